// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_probe.c - `faultline probe [--json]`: what the running kernel offers
 * (userfaultfd features and ioctls, hugetlb pages, KVM) and what faultline
 * will use of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "kernel/uffd.h"

struct kvm_info {
	bool present;
	bool pre_fault_cap;	/* KVM_CAP_PRE_FAULT_MEMORY reported */
	const char *why;	/* why it is absent, if it is */
};

static long read_long(const char *path)
{
	long v = -1;
	FILE *f = fopen(path, "r");

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static void probe_kvm(struct kvm_info *k)
{
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);

	memset(k, 0, sizeof(*k));
	if (fd < 0) {
		k->why = errno == ENOENT ? "no /dev/kvm" : "cannot open /dev/kvm";
		return;
	}
	k->present = true;
	int vm = ioctl(fd, KVM_CREATE_VM, 0);

	if (vm >= 0) {
		k->pre_fault_cap = ioctl(vm, KVM_CHECK_EXTENSION,
					 KVM_CAP_PRE_FAULT_MEMORY) > 0;
		close(vm);
	}
	if (!k->pre_fault_cap)
		k->why = "KVM_CAP_PRE_FAULT_MEMORY not reported (no TDP MMU)";
	close(fd);
}

static json_object *bit_names(uint64_t mask, const char *(*name)(int))
{
	json_object *a = json_object_new_array();

	for (int b = 0; b < 64; b++) {
		if (!(mask & (1ull << b)))
			continue;
		const char *n = name(b);
		char buf[24];

		if (!n) {
			snprintf(buf, sizeof(buf), "bit%d", b);
			n = buf;
		}
		json_object_array_add(a, json_object_new_string(n));
	}
	return a;
}

/* Does this kernel have PAGEMAP_SCAN (Linux 6.7)?  One scan of a page. */
static bool pagemap_scan_works(void)
{
	static char page[4096] __attribute__((aligned(4096)));
	struct pm_scan_arg a = {
		.size = sizeof(a),
		.start = (uintptr_t)page,
		.end = (uintptr_t)page + sizeof(page),
		.return_mask = PAGE_IS_WRITTEN,
	};
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && ioctl(fd, PAGEMAP_SCAN, &a) >= 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

/* What fl_engine_track_writes() would use, in-process. */
static const char *tracking(const struct uffd_caps *c)
{
	if ((c->features & UFFD_FEATURE_WP_ASYNC) && pagemap_scan_works())
		return "WP_ASYNC + PAGEMAP_SCAN";
	return "synchronous write-protect faults";
}

static json_object *uses(const struct uffd_caps *c, const struct kvm_info *k)
{
	json_object *u = json_object_new_object();
	bool move = c->features & UFFD_FEATURE_MOVE;
	bool poison = c->features & UFFD_FEATURE_POISON;

	json_object_object_add(u, "resolve", json_object_new_string("COPY"));
	json_object_object_add(u, "zero_pages",
			       json_object_new_string("ZEROPAGE (anon), zeroed COPY (hugetlb; tracked writes)"));
	json_object_object_add(u, "in_process_zero_copy",
			       json_object_new_string(move ? "MOVE" : "COPY"));
	json_object_object_add(u, "source_error",
			       json_object_new_string(poison ? "POISON" : "kill client"));
	json_object_object_add(u, "events",
			       json_object_new_string("REMOVE UNMAP REMAP"));
	json_object_object_add(u, "write_tracking",
			       json_object_new_string(tracking(c)));
	json_object_object_add(u, "kvm_pre_fault_memory",
			       json_object_new_boolean(k->pre_fault_cap));
	return u;
}

static json_object *probe_json(const struct uffd_caps *c,
			       const struct kvm_info *k)
{
	json_object *o = json_object_new_object();
	json_object *uf = json_object_new_object();
	json_object *hp = json_object_new_object();
	json_object *kv = json_object_new_object();

	json_object_object_add(uf, "open_via", json_object_new_string(c->open_via));
	json_object_object_add(uf, "features_mask", json_object_new_uint64(c->features));
	json_object_object_add(uf, "features", bit_names(c->features, uffd_feature_name));
	json_object_object_add(uf, "ioctls", bit_names(c->api_ioctls, uffd_ioctl_name));
	json_object_object_add(uf, "range_ioctls", bit_names(c->range_ioctls, uffd_ioctl_name));
	json_object_object_add(o, "userfaultfd", uf);

	json_object_object_add(hp, "nr_hugepages_2m",
		json_object_new_int64(read_long("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")));
	json_object_object_add(hp, "free_hugepages_2m",
		json_object_new_int64(read_long("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")));
	json_object_object_add(hp, "available",
		json_object_new_boolean(access("/proc/sys/vm/nr_hugepages", W_OK) == 0 ||
					read_long("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages") > 0));
	json_object_object_add(o, "hugetlb", hp);

	json_object_object_add(kv, "present", json_object_new_boolean(k->present));
	json_object_object_add(kv, "pre_fault_memory", json_object_new_boolean(k->pre_fault_cap));
	if (k->why)
		json_object_object_add(kv, "note", json_object_new_string(k->why));
	json_object_object_add(o, "kvm", kv);
	json_object_object_add(o, "faultline_uses", uses(c, k));
	return o;
}

static void print_text(json_object *o)
{
	json_object_object_foreach(o, section, val) {
		printf("%s:\n", section);
		json_object_object_foreach(val, key, v) {
			printf("  %-22s %s\n", key,
			       json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
							      JSON_C_TO_STRING_NOSLASHESCAPE));
		}
	}
}

static const char usage[] =
	"usage: faultline probe [--json]\n"
	"       faultline probe --criu\n"
	"  What the kernel offers (userfaultfd features and ioctls, hugetlb\n"
	"  pages, KVM) and what faultline uses of it; --json: as a document.\n"
	"  --criu: can criu dump a process here?  Finds criu (on PATH, else\n"
	"  build/criu/bin/criu, which `make criu` builds), dumps a child that\n"
	"  only waits into a temporary directory (as root), and prints the\n"
	"  exact fix where one is needed: `export PATH=...` for a criu not on\n"
	"  PATH, `export CRIU_FAULT=130` where a dump hangs because hardware\n"
	"  breakpoints never fire (PVM guests).  Exit 0 when criu can dump.\n";

int cmd_probe(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "criu", no_argument, NULL, OPT_CRIU },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	bool json = false, criu = false;
	struct uffd_caps caps;
	struct kvm_info kvm;
	int opt;

	opterr = 0;	/* cli_bad_option() says it, in one line */
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_JSON: json = true; break;
		case OPT_CRIU: criu = true; break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			return cli_bad_option("probe", argv, "h", opts);
		}
	}
	if (optind < argc)
		return cli_bad("probe", "argument", argv[optind], "unexpected");
	if (criu && json)
		return cli_missing("probe", "--criu prints text only (no "
				   "--json)");
	if (criu)
		return probe_criu();
	int ret = uffd_query(&caps);

	if (ret < 0) {
		fprintf(stderr, "faultline probe: userfaultfd unavailable: %s\n",
			uffd_strerror(ret));
		return CLI_FAILED;
	}
	probe_kvm(&kvm);
	json_object *o = probe_json(&caps, &kvm);

	if (json)
		printf("%s\n", json_object_to_json_string_ext(o,
				JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	else
		print_text(o);
	json_object_put(o);
	return 0;
}
