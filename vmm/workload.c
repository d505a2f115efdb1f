// SPDX-License-Identifier: Apache-2.0
/*
 * workload.c - parsing workloads and cutting guest memory into slices; the
 * walks themselves are inline in workload.h, beside guest.S's definition.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

#define SLICE_ALIGN	512	/* 4 KiB pages in 2 MiB */

static int parse_count(const char *s, uint32_t min, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < min || v > 1u << 30)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int vmm_workload_parse(const char *spec, struct vmm_workload *w)
{
	memset(w, 0, sizeof(*w));
	if (!strcmp(spec, "linear"))
		w->kind = WL_LINEAR;
	else if (!strcmp(spec, "random"))
		w->kind = WL_RANDOM;
	else if (!strcmp(spec, "sparse"))
		w->kind = WL_SPARSE;
	else if (!strcmp(spec, "sparse-random"))
		w->kind = WL_SPARSE_RANDOM;
	else if (!strncmp(spec, "stride:", 7)) {
		w->kind = WL_STRIDE;
		return parse_count(spec + 7, 1, &w->stride);
	} else if (!strncmp(spec, "compute:", 8)) {
		w->kind = WL_LINEAR;
		return parse_count(spec + 8, 0, &w->compute);
	} else
		return -EINVAL;
	return 0;
}

const char *vmm_workload_name(const struct vmm_workload *w, char *buf,
			      int len)
{
	if (w->compute)
		snprintf(buf, len, "compute:%u", w->compute);
	else if (w->kind == WL_STRIDE)
		snprintf(buf, len, "stride:%u", w->stride);
	else
		snprintf(buf, len, "%s", w->kind == WL_RANDOM ? "random" :
			 w->kind == WL_SPARSE ? "sparse" :
			 w->kind == WL_SPARSE_RANDOM ? "sparse-random" :
			 "linear");
	return buf;
}

/* The smallest 2^k - 1 that is >= n - 1: random's modulus, less one. */
static uint32_t lcg_mask(uint32_t n)
{
	uint32_t m = 1;

	while (m < n)
		m <<= 1;
	return m - 1;
}

void vmm_slices(const struct vmm_workload *w, uint32_t npages,
		unsigned int nvcpus, struct vmm_slice *out)
{
	uint32_t each = npages / nvcpus, first = 0;

	if (each >= SLICE_ALIGN)
		each -= each % SLICE_ALIGN;
	for (unsigned int i = 0; i < nvcpus; i++) {
		struct vmm_slice *s = &out[i];

		memset(s, 0, sizeof(*s));
		s->first = first;
		s->npages = i + 1 < nvcpus ? each : npages - first;
		s->kind = w->kind;
		s->arg = w->kind == WL_STRIDE ? w->stride :
			 w->kind == WL_RANDOM ? lcg_mask(s->npages) :
			 w->kind == WL_SPARSE_RANDOM ?
			 lcg_mask((s->npages + WL_SPARSE_EVERY - 1) >>
				  WL_SPARSE_SHIFT) : 0;
		s->seed = w->kind == WL_RANDOM || w->kind == WL_SPARSE_RANDOM ?
			  0x2545f491u * (i + 1) & s->arg : 0;
		s->compute = w->compute;
		s->write = w->write;
		first += s->npages;
	}
}

int vmm_dirty_parse(const char *s, enum vmm_dirty_pattern *out)
{
	if (!strcmp(s, "scattered"))
		*out = VMM_DIRTY_SCATTERED;
	else if (!strcmp(s, "contiguous"))
		*out = VMM_DIRTY_CONTIGUOUS;
	else
		return -EINVAL;
	return 0;
}

const char *vmm_dirty_name(enum vmm_dirty_pattern p)
{
	return p == VMM_DIRTY_CONTIGUOUS ? "contiguous" : "scattered";
}

/*
 * The dirty set is pages g * step for g < dirty_pages (step 1:
 * contiguous); a slice [first, first + npages) holds those with g from
 * ceil(first / step) up to, not including, ceil((first + npages) / step).
 */
void vmm_dirty_slices(uint32_t npages, uint32_t dirty_pages,
		      enum vmm_dirty_pattern p, unsigned int nvcpus,
		      struct vmm_slice *s)
{
	uint32_t step = p == VMM_DIRTY_CONTIGUOUS ? 1 : npages / dirty_pages;

	for (unsigned int i = 0; i < nvcpus; i++) {
		uint64_t g0 = ((uint64_t)s[i].first + step - 1) / step;
		uint64_t g1 = ((uint64_t)s[i].first + s[i].npages + step - 1) /
			      step;

		if (g1 > dirty_pages)
			g1 = dirty_pages;
		s[i].dstep = step;
		s[i].dcount = g1 > g0 ? (uint32_t)(g1 - g0) : 0;
		s[i].dfirst = s[i].dcount ? (uint32_t)(g0 * step) - s[i].first
					  : 0;
	}
}

static void count_one(void *ctx, uint32_t j)
{
	(void)j;
	(*(uint64_t *)ctx)++;
}

uint64_t vmm_slice_touches(const struct vmm_slice *s)
{
	uint64_t n = 0;

	vmm_walk(s, count_one, &n);
	return n;
}
