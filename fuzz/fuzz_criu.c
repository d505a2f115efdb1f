// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_criu.c - the CRIU image parsers (format/criu.c): the input's first
 * byte picks pstree, mm or pagemap (the pagemap against the VMAs of a
 * fixed mm and a pages file of the input's next 4 bytes' size), the rest
 * is the image.
 *
 * Decision: besides the sanitizers, the lazy ranges a pagemap yields are
 * checked for what serving relies on: page aligned, inside a VMA, sorted,
 * and within the pages file.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/criu.h"

static const struct criu_vma vmas[] = {
	{ 0x400000, 0x600000 },
	{ 0x600000, 0x601000 },
	{ 0x7f0000000000, 0x7f0000400000 },
};

static void check(const struct criu_task *t)
{
	uint64_t prev = 0, sum = 0;

	for (int i = 0; i < t->nranges; i++) {
		const struct criu_range *r = &t->ranges[i];
		int in = 0;

		for (size_t v = 0; v < sizeof(vmas) / sizeof(vmas[0]); v++)
			in |= r->addr >= vmas[v].start &&
			      r->addr + r->len <= vmas[v].end;
		if (!in || !r->len || (r->addr | r->len | r->off) % 4096 ||
		    r->addr < prev || r->off + r->len > t->pages_size)
			abort();
		prev = r->addr + r->len;
		sum += r->len;
	}
	if (sum != t->lazy_bytes)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 5)
		return 0;
	uint32_t pages;
	int n;

	memcpy(&pages, data + 1, 4);
	switch (data[0] % 3) {
	case 0: {
		int32_t *pids;

		if (criu_parse_pstree(data + 5, size - 5, "pstree.img", &pids,
				      &n) == 0)
			free(pids);
		break;
	}
	case 1: {
		struct criu_vma *v;

		if (criu_parse_mm(data + 5, size - 5, "mm-1.img", &v, &n) == 0)
			free(v);
		break;
	}
	default: {
		struct criu_task t = { .pid = 1, .pages_size = pages };

		if (criu_parse_pagemap(data + 5, size - 5, "pagemap-1.img", vmas,
				       3, &t) == 0) {
			check(&t);
			free(t.ranges);
		}
		break;
	}
	}
	return 0;
}
