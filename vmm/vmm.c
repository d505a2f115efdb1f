// SPDX-License-Identifier: Apache-2.0
/*
 * vmm.c - one run of the test VMM: check the configuration, set up the
 * memory and the VM, run every vCPU at once (vcpus.c), and check the
 * guest's sums (--reset: the runs are reset.c's).
 *
 * Decisions: each vCPU is a thread that creates its own vCPU and waits at
 * a barrier, so the clock starts at one instant for all of them and stops
 * at the last halt.  Between two passes every vCPU stops at its port exit
 * while vCPU 0's thread discards the balloon range, as a balloon device
 * would while the guest waits.  The expected sums come from the memory
 * file itself (read-only, never the guest's memory), so a page served
 * wrong cannot be checked against itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/image.h"
#include "reset.h"
#include "util/size.h"
#include "vcpus.h"

static const char *const backend_names[] = {
	[VMM_PREPOPULATED] = "prepopulated", [VMM_FILE] = "file",
	[VMM_UFFD] = "uffd", [VMM_INPROC] = "inproc",
};

int vmm_backend_parse(const char *s, enum vmm_backend *out)
{
	for (int i = 0; i <= VMM_INPROC; i++)
		if (!strcmp(s, backend_names[i])) {
			*out = i;
			return 0;
		}
	return -EINVAL;
}

const char *vmm_backend_name(enum vmm_backend b)
{
	return b <= VMM_INPROC ? backend_names[b] : "?";
}

/* ---- the configuration ------------------------------------------------- */

static int check_reset_options(const struct vmm_config *c)
{
	if (!c->resets) {
		if (c->dirty || c->dirty_pattern || c->reset_eager ||
		    (c->engine_flags & FL_ENGINE_TRACK_SYNC))
			return vmm_fail(-EINVAL, "--dirty, --dirty-pattern, "
					"--reset-eager and --track-sync go "
					"with --reset");
		return 0;
	}
	if (c->backend != VMM_INPROC)
		return vmm_fail(-EINVAL, "--reset resets the inproc engine's "
				"memory: not for the %s backend",
				vmm_backend_name(c->backend));
	if (c->resets > VMM_MAX_RESETS)
		return vmm_fail(-EINVAL, "--reset %u: at most %d runs",
				c->resets, VMM_MAX_RESETS);
	if (c->wl.write)
		return vmm_fail(-EINVAL, "--reset: each run reads its workload "
				"(checked against the snapshot), then writes "
				"the dirty set (--dirty): no --write");
	if (c->discard_len)
		return vmm_fail(-EINVAL, "--reset and --discard do not go "
				"together");
	if (c->dirty % 4096)
		return vmm_fail(-EINVAL, "--dirty %llu: not whole 4 KiB pages",
				(unsigned long long)c->dirty);
	return 0;
}

int vmm_check_options(const struct vmm_config *c)
{
	int ret = check_reset_options(c);

	if (ret < 0)
		return ret;
	if (c->vcpus > VMM_MAX_VCPUS)
		return vmm_fail(-EINVAL, "%u vCPUs: at most %d", c->vcpus,
				VMM_MAX_VCPUS);
	if (c->huge && c->backend == VMM_FILE)
		return vmm_fail(-EINVAL, "--huge: the file backend maps the "
				"memory file itself (no hugetlb)");
	if (c->backend == VMM_UFFD && !c->socket)
		return vmm_fail(-EINVAL, "the uffd backend needs --socket");
	if (c->backend != VMM_INPROC &&
	    (c->chunk || c->replay || (c->engine_flags & ~FL_ENGINE_MOVE)))
		return vmm_fail(-EINVAL, "--chunk, --replay, --no-prefetch and "
				"--no-background are the inproc engine's: not "
				"for the %s backend",
				vmm_backend_name(c->backend));
	if (c->copy_beside && c->backend != VMM_PREPOPULATED)
		return vmm_fail(-EINVAL, "--copy-beside is for the "
				"prepopulated backend");
	return 0;
}

/* The options against the memory file; sizes resolved into mc. */
static int check_config(struct vmm_config *mc, uint64_t file_size)
{
	const struct vmm_config *c = mc;
	uint64_t psz = c->huge ? 2ULL << 20 : 4096;
	uint64_t *size = &mc->mem_size;
	int ret = vmm_check_options(c);

	if (ret < 0)
		return ret;

	*size = c->mem_size ? c->mem_size : file_size;
	if (*size == 0 || *size % psz)
		return vmm_fail(-EINVAL, "guest memory of %llu bytes: not a "
				"positive multiple of %s", (unsigned long long)
				*size, c->huge ? "2 MiB" : "4 KiB");
	if (*size > VMM_MAX_MEM)
		return vmm_fail(-EINVAL, "guest memory of %s: at most "
				"3 GiB", size_str(*size).s);
	if (*size > file_size)
		return vmm_fail(-EINVAL, "guest memory of %s, but the "
				"memory file has %s", size_str(*size).s,
				size_str(file_size).s);
	if (*size / 4096 < (c->vcpus ? c->vcpus : 1))
		return vmm_fail(-EINVAL, "%u vCPUs over %s: each needs a "
				"page of its own", c->vcpus,
				size_str(*size).s);
	if (c->discard_len && (c->discard_off % psz || c->discard_len % psz ||
			       c->discard_off + c->discard_len > *size))
		return vmm_fail(-EINVAL, "--discard %llu:%llu: not whole pages "
				"of guest memory",
				(unsigned long long)c->discard_off,
				(unsigned long long)c->discard_len);
	if (c->resets && !c->dirty)
		mc->dirty = *size < VMM_DIRTY_DEFAULT ? *size :
			    VMM_DIRTY_DEFAULT;
	if (c->resets && c->dirty > *size)
		return vmm_fail(-EINVAL, "--dirty %s: more than the guest "
				"memory (%s)", size_str(c->dirty).s,
				size_str(*size).s);
	return 0;
}

static int choose_guest(const struct vmm_config *c, struct vmm_result *r)
{
	int ret = kvm_probe();

	kvm_describe(r->kvm, sizeof(r->kvm));
	if (c->guest == VMM_GUEST_PROCESS ||
	    (c->guest == VMM_GUEST_AUTO && ret < 0))
		return 0;
	if (ret < 0)
		return vmm_fail(ret, "no usable KVM: %s", r->kvm);
	r->kvm_guest = true;
	return 0;
}

static int run_vcpus(struct vm_run *run, struct vmm_result *r)
{
	int ret;

	vm_vcpus_start(run);
	ret = vmm_mem_start(&run->mem, run->c);
	if (ret == 0 && run->c->copy_beside)
		ret = vmm_beside_start(&run->beside);
	if (ret == 0)
		ret = run->c->resets ? vmm_reset_loops(run, r) :
		      vm_run_once(run, &r->elapsed_ms);
	r->faults = vm_vcpus_stop(run);
	return ret < 0 ? ret : atomic_load(&run->err);
}

/* ---- the sums the guest must report ------------------------------------ */

struct expect_ctx {
	const struct vmm_config *c;
	const struct vmm_slice *s;
	const uint8_t *file;
	unsigned int pass;
	uint32_t sum;
	uint64_t touches;
};

static bool discarded(const struct vmm_config *c, uint64_t off)
{
	return c->discard_len && off >= c->discard_off &&
	       off < c->discard_off + c->discard_len;
}

/*
 * The word a touch must see: the file's, plus one per earlier write pass;
 * after a discard, anonymous memory reads zeros (the file backend maps
 * the file's bytes again).  --reset's dirty pass sees the file's (its
 * runs never write their workload: no --write, no --discard).
 */
static void expect_touch(void *arg, uint32_t j)
{
	struct expect_ctx *x = arg;
	uint64_t off = vmm_touch_offset(x->s, j);
	uint32_t v, file;

	memcpy(&file, x->file + off, 4);
	v = file + x->pass * x->s->write;
	if (x->pass > 0 && discarded(x->c, off))
		v = x->c->backend == VMM_FILE ? file : 0;
	x->sum = vmm_sum_step(x->sum, v);
	x->touches++;
}

/* The sums each vCPU's passes must have (want), and the touches of a run. */
static int expect_sums(struct vm_run *run, int fd, struct vmm_result *r)
{
	const uint8_t *file = mmap(NULL, run->mem.size, PROT_READ, MAP_SHARED,
				   fd, 0);

	if (file == MAP_FAILED)
		return vmm_fail(-errno, "cannot map the memory file to check "
				"the guest: %s", strerror(errno));
	for (unsigned int i = 0; i < run->nvcpus; i++)
		for (unsigned int pass = 0; pass < run->passes; pass++) {
			struct vcpu *v = &run->v[i];
			struct expect_ctx x = {
				.c = run->c, .s = &v->s, .file = file,
				.pass = pass,
			};

			if (pass == 1 && v->s.dstep)
				vmm_dirty_walk(&v->s, expect_touch, &x);
			else
				vmm_walk(&v->s, expect_touch, &x);
			r->touches += x.touches;
			v->want[pass] = x.sum;
		}
	munmap((void *)file, run->mem.size);
	return 0;
}

/* ---- one run ------------------------------------------------------------ */

static int setup(struct vm_run *run, const struct vmm_config *c, int fd,
		 struct vmm_result *r)
{
	struct vmm_slice slices[VMM_MAX_VCPUS];
	uint32_t npages;
	struct stat st;
	int ret;

	if (fstat(fd, &st) < 0)
		return vmm_fail(-errno, "%s: %s", c->mem_file, strerror(errno));
	run->mc = *c;
	ret = check_config(&run->mc, st.st_size);
	if (ret < 0 || (ret = choose_guest(c, r)) < 0)
		return ret;
	c = run->c = &run->mc;
	run->kvm = r->kvm_guest;
	r->mem_bytes = c->mem_size;
	npages = c->mem_size / 4096;
	vmm_slices(&c->wl, npages, run->nvcpus, slices);
	if (c->resets) {
		vmm_dirty_slices(npages, c->dirty / 4096, c->dirty_pattern,
				 run->nvcpus, slices);
		r->reset.dirty_bytes = c->dirty;
	}
	for (unsigned int i = 0; i < run->nvcpus; i++) {
		run->v[i] = (struct vcpu){ .run = run, .id = i, .s = slices[i] };
		run->v[i].kv.fd = -1;
	}
	if (run->kvm && (ret = kvm_vm_open(&run->vm)) < 0)
		return ret;
	ret = vmm_mem_open(&run->mem, c, fd);
	if (ret == 0 && c->copy_beside)
		ret = vmm_beside_open(&run->beside, fd, c->mem_size);
	if (ret < 0)
		return ret;
	if (!run->kvm)
		return 0;
	for (unsigned int i = 0; i < run->nvcpus; i++)
		vm_write_params(run, &run->v[i]);
	return kvm_vm_add_memory(&run->vm, 1, GUEST_MEM_BASE, run->mem.addr,
				 run->mem.size);
}

int vmm_run(const struct vmm_config *c, struct vmm_result *r)
{
	struct vm_run *run;
	int fd, ret;

	memset(r, 0, sizeof(*r));
	run = calloc(1, sizeof(*run));
	if (!run)
		return vmm_fail(-ENOMEM, "out of memory");
	run->c = c;
	run->nvcpus = c->vcpus ? c->vcpus : 1;
	run->passes = c->discard_len || c->resets ? 2 : 1;
	run->vm.fd = run->vm.kvm = -1;
	run->beside.uffd = -1;
	r->vcpus = run->nvcpus;
	ret = image_refuse(c->mem_file, "vmm, which checks the guest against "
			   "it,", false);
	if (ret < 0) {
		free(run);
		return vmm_fail(ret, "%s", fl_last_error());
	}
	fd = open(c->mem_file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(run);
		return vmm_fail(-errno, "%s: %s", c->mem_file, strerror(errno));
	}
	ret = setup(run, c, fd, r);
	/* --reset checks each run: the sums first (the file's pages read). */
	if (ret == 0 && c->resets)
		ret = expect_sums(run, fd, r);
	if (ret == 0)
		ret = run_vcpus(run, r);
	if (ret == 0) {
		r->bytes_copied = vmm_mem_resident(&run->mem);
		if (!r->have_engine && run->mem.e &&
		    fl_engine_stats(run->mem.e, &r->engine) == 0)
			r->have_engine = true;
		if (!c->resets && (ret = expect_sums(run, fd, r)) == 0)
			r->checksum_ok = vm_sums_ok(run, "");
	}
	vmm_beside_close(&run->beside);
	vmm_mem_close(&run->mem);
	if (run->kvm)
		kvm_vm_close(&run->vm);
	close(fd);
	free(run);
	return ret;
}

void vmm_result_free(struct vmm_result *r)
{
	free(r->reset.reset);
	free(r->reset.fresh);
	r->reset.reset = r->reset.fresh = NULL;
}
