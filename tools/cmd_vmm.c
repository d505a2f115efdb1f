// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_vmm.c - `faultline vmm`: option parsing and output for the test VMM
 * (vmm/vmm.c).  Exit status 0 only when the guest ran and every byte it
 * read was right.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util/size.h"
#include "vmm.h"

static const char usage[] =
	"usage: faultline vmm --mem-file FILE [--mem-size SIZE]\n"
	"       --backend prepopulated|file|uffd|inproc [--socket PATH]\n"
	"       [--huge] [--vcpus N] --workload W [--write] [--json]\n"
	"       [--discard OFFSET:LENGTH] [--guest auto|kvm|process]\n"
	"       [--chunk SIZE] [--no-prefetch] [--no-background] [--no-move]\n"
	"       [--replay TRACE] [--copy-beside]\n"
	"  W: linear, random, stride:N (every Nth page), sparse (1 MiB every\n"
	"  16 MiB), sparse-random (those runs in random order), compute:N\n"
	"  (linear, N steps of work after each touch)\n"
	"  --discard: a second pass after madvise(DONTNEED) of that range\n"
	"  --chunk, --no-*, --replay: the inproc engine's options\n"
	"  --copy-beside: another thread copies the file once meanwhile\n";

static int bad(const char *opt, const char *val, const char *why)
{
	return cli_bad("vmm", opt, val, why);
}

static int parse_range(const char *s, uint64_t *off, uint64_t *len)
{
	char buf[64], *colon;

	snprintf(buf, sizeof(buf), "%s", s);
	colon = strchr(buf, ':');
	if (!colon)
		return -EINVAL;
	*colon = 0;
	if (parse_size(buf, off) < 0 || parse_size(colon + 1, len) < 0 ||
	    *len == 0)
		return -EINVAL;
	return 0;
}

static int parse_vcpus(const char *s, unsigned int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || end == s || v < 1 || v > VMM_MAX_VCPUS)
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

static int parse_guest(const char *s, enum vmm_guest *g)
{
	if (!strcmp(s, "auto"))
		*g = VMM_GUEST_AUTO;
	else if (!strcmp(s, "kvm"))
		*g = VMM_GUEST_KVM;
	else if (!strcmp(s, "process"))
		*g = VMM_GUEST_PROCESS;
	else
		return -EINVAL;
	return 0;
}

static void print_text(const struct vmm_config *c, const struct vmm_result *r)
{
	char wl[32];

	printf("%s guest (%s), %u vCPU%s, %s %s%s, %s %s: %.1f ms, "
	       "%llu touches, %llu faults, %s copied, checksum %s\n",
	       r->kvm_guest ? "KVM" : "process", r->kvm, r->vcpus,
	       r->vcpus > 1 ? "s" : "",
	       vmm_workload_name(&c->wl, wl, sizeof(wl)),
	       c->wl.write ? "writes" : "reads", c->huge ? " (hugetlb)" : "",
	       size_str(r->mem_bytes).s,
	       vmm_backend_name(c->backend), r->elapsed_ms,
	       (unsigned long long)r->touches, (unsigned long long)r->faults,
	       size_str(r->bytes_copied).s,
	       r->checksum_ok ? "ok" : "WRONG");
}

int cmd_vmm(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mem-file", required_argument, NULL, 'm' },
		{ "mem-size", required_argument, NULL, 'S' },
		{ "backend", required_argument, NULL, 'b' },
		{ "socket", required_argument, NULL, 's' },
		{ "huge", no_argument, NULL, 'H' },
		{ "vcpus", required_argument, NULL, 'v' },
		{ "workload", required_argument, NULL, 'w' },
		{ "write", no_argument, NULL, 'W' },
		{ "json", no_argument, NULL, 'j' },
		{ "discard", required_argument, NULL, 'd' },
		{ "guest", required_argument, NULL, 'g' },
		{ "chunk", required_argument, NULL, 'c' },
		{ "no-prefetch", no_argument, NULL, 'P' },
		{ "no-background", no_argument, NULL, 'B' },
		{ "no-move", no_argument, NULL, 'M' },
		{ "replay", required_argument, NULL, 'r' },
		{ "copy-beside", no_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct vmm_config c = { .vcpus = 1, .engine_flags = FL_ENGINE_MOVE };
	struct vmm_result r;
	bool json = false, have_backend = false, have_wl = false, write = false;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'm': c.mem_file = optarg; break;
		case 'S':
			if (parse_size(optarg, &c.mem_size) < 0)
				return bad("--mem-size", optarg, "not a size");
			break;
		case 'b':
			if (vmm_backend_parse(optarg, &c.backend) < 0)
				return bad("--backend", optarg, "not one of "
					   "prepopulated, file, uffd, inproc");
			have_backend = true;
			break;
		case 's': c.socket = optarg; break;
		case 'H': c.huge = true; break;
		case 'v':
			if (parse_vcpus(optarg, &c.vcpus) < 0)
				return bad("--vcpus", optarg, "not 1 to 8");
			break;
		case 'w':
			if (vmm_workload_parse(optarg, &c.wl) < 0)
				return bad("--workload", optarg, "not linear, "
					   "random, stride:N, sparse, "
					   "sparse-random or compute:N");
			have_wl = true;
			break;
		case 'W': write = true; break;
		case 'j': json = true; break;
		case 'd':
			if (parse_range(optarg, &c.discard_off,
					&c.discard_len) < 0)
				return bad("--discard", optarg,
					   "not OFFSET:LENGTH");
			break;
		case 'g':
			if (parse_guest(optarg, &c.guest) < 0)
				return bad("--guest", optarg,
					   "not auto, kvm or process");
			break;
		case 'c':
			if ((ret = cli_parse_chunk("vmm", optarg, &c.chunk)))
				return ret;
			break;
		case 'P': c.engine_flags |= FL_ENGINE_NO_PREFETCH; break;
		case 'B': c.engine_flags |= FL_ENGINE_NO_BACKGROUND; break;
		case 'M': c.engine_flags &= ~FL_ENGINE_MOVE; break;
		case 'r': c.replay = optarg; break;
		case 'C': c.copy_beside = true; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return CLI_USAGE;
		}
	}
	if (optind < argc)
		return bad("argument", argv[optind], "unexpected");
	if (!c.mem_file || !have_backend || !have_wl) {
		fprintf(stderr, "faultline vmm: --mem-file, --backend and "
			"--workload are required\n%s", usage);
		return CLI_USAGE;
	}
	c.wl.write = write;
	if (vmm_check_options(&c) < 0) {
		fprintf(stderr, "faultline vmm: %s\n", vmm_error());
		return CLI_USAGE;
	}
	ret = vmm_run(&c, &r);
	if (ret < 0) {
		fprintf(stderr, "faultline vmm: %s\n", vmm_error());
		return CLI_FAILED;
	}
	if (json) {
		char *s = vmm_result_json(&c, &r);

		printf("%s\n", s);
		free(s);
	} else {
		print_text(&c, &r);
	}
	return r.checksum_ok ? 0 : CLI_FAILED;
}
