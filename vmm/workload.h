/* SPDX-License-Identifier: Apache-2.0 */
/*
 * workload.h - the guest's workloads in C: parsing `--workload`, cutting
 * guest memory into one slice per vCPU, and the walk over a slice that
 * guest.S does, so that the VMM can compute from the memory file the sums
 * the guest must report, and a process guest (no /dev/kvm) can do the
 * same touches.
 */
#ifndef FAULTLINE_VMM_WORKLOAD_H
#define FAULTLINE_VMM_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "guest_abi.h"

struct vmm_workload {
	int kind;		/* WL_* */
	uint32_t stride;	/* WL_STRIDE: touch every stride-th page */
	uint32_t compute;	/* LCG steps of work after each touch */
	bool write;		/* touches are read-modify-writes */
};

/*
 * Where `--reset`'s runs write (--dirty-pattern): every (memory / dirty)-th
 * page from the first, or the first dirty bytes of guest memory.
 */
enum vmm_dirty_pattern {
	VMM_DIRTY_SCATTERED,
	VMM_DIRTY_CONTIGUOUS,
};

/* One vCPU's share: the parameters guest.S reads (guest_abi.h). */
struct vmm_slice {
	uint32_t first;		/* index of the slice's first 4 KiB page */
	uint32_t npages;
	uint32_t kind, arg, seed;
	uint32_t compute;
	bool write;
	/* The dirty set's pages in this slice: dfirst + k * dstep, k < dcount
	 * (slice pages); dstep 0: no dirty pass. */
	uint32_t dfirst, dcount, dstep;
};

/*
 * "linear", "random", "stride:N", "sparse", "sparse-random", "compute:N":
 * 0 or -EINVAL.
 */
int vmm_workload_parse(const char *spec, struct vmm_workload *w);
/* The spec back, for tables and JSON ("stride:4"). */
const char *vmm_workload_name(const struct vmm_workload *w, char *buf,
			      int len);

/*
 * Cut npages into nvcpus slices, each a multiple of 2 MiB but the last
 * (so hugetlb pages are shared by two vCPUs only at a remainder).
 */
void vmm_slices(const struct vmm_workload *w, uint32_t npages,
		unsigned int nvcpus, struct vmm_slice *out);

/* "scattered" or "contiguous": 0 or -EINVAL. */
int vmm_dirty_parse(const char *s, enum vmm_dirty_pattern *out);
const char *vmm_dirty_name(enum vmm_dirty_pattern p);

/*
 * Give each of the nvcpus slices (vmm_slices()) its part of a dirty set of
 * dirty_pages pages (at least 1, at most npages) of the npages of guest
 * memory, in pattern p.
 */
void vmm_dirty_slices(uint32_t npages, uint32_t dirty_pages,
		      enum vmm_dirty_pattern p, unsigned int nvcpus,
		      struct vmm_slice *s);

/* Pages a pass over the slice touches. */
uint64_t vmm_slice_touches(const struct vmm_slice *s);

/* Offset in guest memory of the word that touching slice page j reads. */
static inline uint64_t vmm_touch_offset(const struct vmm_slice *s,
					uint32_t j)
{
	uint32_t page = s->first + j;

	return (uint64_t)page * 4096 + 4 * (page & 1023);
}

/* A pass's checksum after one more touch that read the word v. */
static inline uint32_t vmm_sum_step(uint32_t sum, uint32_t v)
{
	return sum + v;
}

/*
 * Call fn(ctx, j) for each slice page j in the order guest.S touches them.
 * Inline so that the process guest's touch is not an indirect call.
 */
static inline void vmm_walk(const struct vmm_slice *s,
			    void (*fn)(void *ctx, uint32_t j), void *ctx)
{
	uint32_t j, x, left;

	switch (s->kind) {
	case WL_STRIDE:
		for (j = 0; j < s->npages; j += s->arg)
			fn(ctx, j);
		break;
	case WL_SPARSE:
		for (j = 0; j < s->npages; j++) {
			if ((j & (WL_SPARSE_EVERY - 1)) >= WL_SPARSE_RUN) {
				j |= WL_SPARSE_EVERY - 1;
				continue;
			}
			fn(ctx, j);
		}
		break;
	case WL_SPARSE_RANDOM:
		x = s->seed;
		for (left = s->arg + 1; left; left--) {
			x = (x * (uint32_t)WL_LCG_A + WL_LCG_C) & s->arg;
			for (j = x << WL_SPARSE_SHIFT;
			     j < (x << WL_SPARSE_SHIFT) + WL_SPARSE_RUN &&
			     j < s->npages; j++)
				fn(ctx, j);
		}
		break;
	case WL_RANDOM:
		x = s->seed;
		for (left = s->arg + 1; left; left--) {
			x = (x * (uint32_t)WL_LCG_A + WL_LCG_C) & s->arg;
			if (x < s->npages)
				fn(ctx, x);
		}
		break;
	default:
		for (j = 0; j < s->npages; j++)
			fn(ctx, j);
	}
}

/* Call fn(ctx, j) for each slice page j of the dirty set, in its order. */
static inline void vmm_dirty_walk(const struct vmm_slice *s,
				  void (*fn)(void *ctx, uint32_t j), void *ctx)
{
	for (uint32_t k = 0; k < s->dcount; k++)
		fn(ctx, s->dfirst + k * s->dstep);
}

#endif
