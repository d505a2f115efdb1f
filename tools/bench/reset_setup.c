// SPDX-License-Identifier: Apache-2.0
/*
 * reset_setup.c - what `faultline bench reset` measures on: the snapshot
 * (a memfd of the bench pattern, and one 4x as large), the regions
 * restored from it by engines that track writes, the dirty sets and the
 * plan of cases (which --only selects, each in its phase).
 *
 * Decision: every region is hashed whole after a case, so a reset that
 * left one wrong page fails that case's row (report_bad names the page).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench.h"
#include "run.h"
#include "faultline.h"
#include "engine/reset.h"
#include "reset_bench.h"

/* ---- the snapshot ------------------------------------------------------- */

static int open_source(struct reset_ctx *c, struct fl_source **out)
{
	char path[64];
	int ret;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", c->memfd);
	ret = fl_source_open(path, out);
	if (ret < 0)
		fprintf(stderr, "faultline bench reset: %s\n", fl_last_error());
	return ret;
}

/*
 * A memfd holding the pattern for [0, len), opened as a source through
 * /proc/self/fd, and its XXH3.
 */
int reset_snapshot(struct reset_ctx *c)
{
	size_t bs = 2 * MIB;
	uint8_t *buf = malloc(bs);
	int ret = 0;

	c->st4 = XXH3_createState();
	if (!c->st4 || !buf) {
		ret = -ENOMEM;
		goto out;
	}
	c->memfd = memfd_create("faultline-bench-reset", MFD_CLOEXEC);
	if (c->memfd < 0 || ftruncate(c->memfd, (off_t)c->len) < 0) {
		ret = -errno;
		goto out;
	}
	XXH3_64bits_reset(c->st4);
	for (uint64_t off = 0; off < c->len; off += bs) {
		size_t n = c->len - off < bs ? c->len - off : bs;

		bench_pattern(buf, n, off);
		if (pwrite(c->memfd, buf, n, (off_t)off) != (ssize_t)n) {
			ret = errno ? -errno : -EIO;
			goto out;
		}
		XXH3_64bits_update(c->st4, buf, n);
	}
	c->sum_len = XXH3_64bits_digest(c->st4);
	ret = open_source(c, &c->src);
out:
	free(buf);
	return ret;
}

/*
 * The 4x region's snapshot: the same file grown to big_len, the rest a
 * hole (zeros: writing 3 GiB more of pattern into fresh page cache costs
 * this machine ~2 s a GiB, and the reset does not look at contents).
 */
int reset_snapshot4(struct reset_ctx *c)
{
	size_t bs = 2 * MIB;
	uint8_t *zero = calloc(1, bs);

	if (!zero)
		return -ENOMEM;
	if (ftruncate(c->memfd, (off_t)c->big_len) < 0) {
		free(zero);
		return -errno;
	}
	for (uint64_t off = c->len; off < c->big_len; off += bs)
		XXH3_64bits_update(c->st4, zero, bs);
	c->sum_big = XXH3_64bits_digest(c->st4);
	free(zero);
	return open_source(c, &c->src4);
}

/* ---- regions ------------------------------------------------------------ */

bool reset_region_ok(const struct rmem *m)
{
	return bench_sum(m->mem, m->len) == m->sum;
}

/* The first page of m that differs from the pattern, or m->len. */
static uint64_t first_bad(const struct rmem *m)
{
	uint8_t want[PG];

	for (uint64_t off = 0; off < m->len; off += PG) {
		bench_pattern(want, PG, off);
		if (memcmp(m->mem + off, want, PG))
			return off;
	}
	return m->len;
}

/* Say loudly which page is wrong, and what it holds. */
void reset_report_bad(const struct rmem *m, const char *what)
{
	uint64_t off = first_bad(m);

	if (off == m->len) {
		fprintf(stderr, "faultline bench reset: %s: region hash wrong "
			"but every page matches on a second look\n", what);
		return;
	}
	fprintf(stderr, "faultline bench reset: %s: WRONG BYTES: page at "
		"offset 0x%llx of the %llu MiB region differs from the "
		"snapshot (word 0: %016llx, want %016llx; word 1: %016llx)\n",
		what, (unsigned long long)off,
		(unsigned long long)(m->len / MIB),
		(unsigned long long)*(uint64_t *)(m->mem + off),
		(unsigned long long)~(off >> 12),
		(unsigned long long)*(uint64_t *)(m->mem + off + 8));
}

/*
 * A region of len bytes served from c->src by an engine that tracks
 * writes, every page in (write-protected) and checked.
 */
int reset_rmem_setup(struct fl_source *src, struct rmem *m, uint64_t len,
		      uint64_t sum)
{
	struct fl_engine_opts eo = { .uffd = -1,
				     .flags = FL_ENGINE_NO_BACKGROUND };
	struct fl_region_desc d = { .len = len, .page_size = PG,
				    .flags = FL_REGION_REGISTER };
	int ret;

	m->len = len;
	m->sum = sum;
	m->mem = bench_map(len);
	if (!m->mem)
		return -ENOMEM;
	madvise(m->mem, len, MADV_NOHUGEPAGE);
	d.addr = (uintptr_t)m->mem;
	ret = fl_engine_create(&eo, &m->e);
	ret = ret ? ret : fl_engine_add_region(m->e, &d, src);
	if (!ret) {
		ret = fl_engine_track_writes(m->e);
		if (ret > 0)
			m->track = ret;
	}
	ret = ret < 0 ? ret : fl_engine_start(m->e, 1);
	if (ret < 0) {
		fprintf(stderr, "faultline bench reset: %s\n", fl_last_error());
		return ret;
	}
	/* Every page in, by faults in order (the engine's chunks grow). */
	if (madvise(m->mem, len, MADV_POPULATE_READ) < 0)
		return -errno;
	ret = fl_engine_reset(m->e, 0);
	if (ret != 0) {
		fprintf(stderr, "faultline bench reset: a reset after the "
			"restore, nothing written, reset %d pages%s%s\n", ret,
			ret < 0 ? ": " : "", ret < 0 ? fl_last_error() : "");
		return ret < 0 ? ret : -EPROTO;
	}
	if (!reset_region_ok(m)) {
		reset_report_bad(m, "the restore before any reset");
		return -EPROTO;
	}
	m->used = true;
	return 0;
}

/* Plain anonymous memory of len bytes, populated (the M_PLAIN case). */
int reset_plain_setup(struct rmem *m, uint64_t len)
{
	m->len = len;
	m->mem = bench_map(len);
	if (!m->mem)
		return -ENOMEM;
	madvise(m->mem, len, MADV_NOHUGEPAGE);
	m->used = true;
	return bench_prefault(m->mem, len);
}

void reset_rmem_free(struct rmem *m)
{
	if (m->e)
		fl_engine_destroy(m->e);
	bench_unmap(m->mem, m->len);
	memset(m, 0, sizeof(*m));
}

/* ---- dirty sets --------------------------------------------------------- */

static int add_set(struct reset_ctx *c, uint64_t bytes, bool scattered,
		   const char *key, const char *name)
{
	struct dset *s = &c->sets[c->nsets];
	uint64_t span = c->len / PG;

	if (c->nsets >= MAX_SETS)
		return -ENOSPC;
	s->bytes = bytes;
	s->npages = bytes / PG;
	s->scattered = scattered;
	snprintf(s->key, sizeof(s->key), "%s", key);
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->off = malloc(s->npages * sizeof(*s->off));
	if (!s->off)
		return -ENOMEM;
	/*
	 * Scattered: evenly spread over the region, no two adjacent (each
	 * page a run of its own, the worst case for batching); contiguous:
	 * one run from a quarter into the region.
	 */
	for (uint64_t i = 0; i < s->npages; i++)
		s->off[i] = scattered ? (i * span / s->npages) * PG :
			    (span / 4) * PG + i * PG;
	return c->nsets++;
}

int reset_find_set(const struct reset_ctx *c, const char *key)
{
	for (int i = 0; i < c->nsets; i++)
		if (!strcmp(c->sets[i].key, key))
			return i;
	return -1;
}

void reset_dirty(const struct rmem *m, const struct dset *s)
{
	/* Word 1 of a pattern page is never zero. */
	for (uint64_t i = 0; i < s->npages; i++)
		*(volatile uint64_t *)(m->mem + s->off[i] + 8) = 0;
}

/* Read a word of every dirty page, in order: seconds per page. */
double reset_touch(const struct rmem *m, const struct dset *s)
{
	double t0 = bench_now();

	for (uint64_t i = 0; i < s->npages; i++)
		(void)*(volatile uint64_t *)(m->mem + s->off[i]);
	return (bench_now() - t0) / (double)s->npages;
}

/* The dirty pages hold the snapshot again. */
bool reset_set_ok(const struct rmem *m, const struct dset *s)
{
	uint8_t want[PG];

	for (uint64_t i = 0; i < s->npages; i++) {
		bench_pattern(want, PG, s->off[i]);
		if (memcmp(m->mem + s->off[i], want, PG))
			return false;
	}
	return true;
}

/* M_PLAIN: every dropped page gone (mincore) and reading zeros. */
bool reset_plain_dropped(const struct rmem *m, const struct dset *s)
{
	unsigned char v;

	for (uint64_t i = 0; i < s->npages; i++) {
		const uint64_t *w = (const uint64_t *)(m->mem + s->off[i]);

		if (mincore((void *)w, PG, &v) < 0 || (v & 1))
			return false;
		for (int k = 0; k < 512; k++)
			if (w[k])
				return false;
	}
	return true;
}

/* ---- the cases ---------------------------------------------------------- */

static void add_case(struct reset_ctx *c, const char *set, enum method m,
		     bool busy, bool big, int phase)
{
	static const char *const mkey[] = {
		[M_LAZY] = "lazy", [M_EAGER] = "eager",
		[M_PERPAGE] = "perpage", [M_PLAIN] = "plain_perpage",
		[M_WHOLE] = "whole", [M_FULL] = "full",
	};
	static const char *const mlabel[] = {
		[M_LAZY] = "reset lazy", [M_EAGER] = "reset eager",
		[M_PERPAGE] = "DONTNEED per page",
		[M_PLAIN] = "DONTNEED/page, no uffd",
		[M_WHOLE] = "DONTNEED all, drop",
		[M_FULL] = "full restore (new engine)",
	};
	struct rcase *k = &c->cases[c->ncases];
	int si = set ? reset_find_set(c, set) : -1;
	char key[40], name[32] = "";

	if (set && si < 0)
		return;
	if (c->ncases >= MAX_CASES) {
		fprintf(stderr, "faultline bench reset: more than %d cases\n",
			MAX_CASES);
		return;
	}
	if (set)
		memcpy(name, c->sets[si].name, sizeof(name));
	const char *rg = big ? "_4x" : phase == 2 && m != M_PLAIN ? "_1x" : "";

	snprintf(key, sizeof(key), "%s%s%s%s%s", mkey[m], set ? "_" : "",
		 set ? set : "", rg, busy ? "_busy" : "");
	if (!bench_selected(c->o, key))
		return;
	memset(k, 0, sizeof(*k));
	memcpy(k->key, key, sizeof(key));
	snprintf(k->label, sizeof(k->label), "%s%s%s%s%s", mlabel[m],
		 set ? ", " : "", name,
		 big ? ", 4x region" : *rg ? ", 1x region" : "",
		 busy ? ", busy" : "");
	k->set = si;
	k->phase = phase;
	k->m = m;
	k->busy = busy;
	k->big = big;
	k->iters = set && !strcmp(set, "64p") &&
		   (m == M_LAZY || m == M_EAGER) ? c->iters : 1;
	c->ncases++;
}

int reset_find_case(const struct reset_ctx *c, const char *key)
{
	for (int i = 0; i < c->ncases; i++)
		if (!strcmp(c->cases[i].key, key))
			return i;
	return -1;
}

/* The dirty sets and the cases, for region size c->len. */
int reset_plan(struct reset_ctx *c)
{
	static const uint64_t dlist[] = { 1 * MIB, 16 * MIB, 128 * MIB,
					  512 * MIB };
	uint64_t pct = c->len / PG / 100;
	char key[24], name[48];
	int ret;

	if ((ret = add_set(c, 64 * PG, true, "64p", "64 pages")) < 0 ||
	    (ret = add_set(c, pct * PG, true, "1pct", "1% scattered")) < 0)
		return ret;
	for (size_t i = 0; i < sizeof(dlist) / sizeof(*dlist); i++) {
		uint64_t d = dlist[i];

		if (d > c->len / 2 || (c->o->quick && d > 16 * MIB))
			continue;
		for (int s = 0; s < 2; s++) {
			snprintf(key, sizeof(key), "%llum_%c",
				 (unsigned long long)(d / MIB), s ? 's' : 'c');
			snprintf(name, sizeof(name), "%llu MiB %s",
				 (unsigned long long)(d / MIB),
				 s ? "scattered" : "contiguous");
			if ((ret = add_set(c, d, s, key, name)) < 0)
				return ret;
		}
	}

	/* Phase 1: the 1x region alone (and a full restore's memory). */
	add_case(c, NULL, M_FULL, false, false, 1);	/* the reference */
	add_case(c, "64p", M_LAZY, false, false, 1);
	add_case(c, "64p", M_EAGER, false, false, 1);
	add_case(c, "1pct", M_LAZY, false, false, 1);
	add_case(c, "1pct", M_EAGER, false, false, 1);
	add_case(c, "1pct", M_PERPAGE, false, false, 1);
	add_case(c, "1pct", M_WHOLE, false, false, 1);
	for (int i = 2; i < c->nsets; i++) {
		add_case(c, c->sets[i].key, M_LAZY, false, false, 1);
		add_case(c, c->sets[i].key, M_EAGER, false, false, 1);
		if (c->sets[i].bytes <= 16 * MIB)
			add_case(c, c->sets[i].key, M_PERPAGE, false, false, 1);
	}
	/* A second thread of this process busy on the other CPU. */
	add_case(c, NULL, M_FULL, true, false, 1);
	add_case(c, "64p", M_LAZY, true, false, 1);
	add_case(c, "1pct", M_LAZY, true, false, 1);
	add_case(c, "1pct", M_EAGER, true, false, 1);
	add_case(c, "1pct", M_PERPAGE, true, false, 1);
	add_case(c, "1pct", M_WHOLE, true, false, 1);
	add_case(c, "128m_c", M_LAZY, true, false, 1);
	add_case(c, "128m_s", M_LAZY, true, false, 1);
	/*
	 * Phase 2: the 1x region beside one 4x as large (the same dirty
	 * pages in both, measured side by side) and plain memory for the
	 * drops without a uffd.
	 */
	static const char *const grow[] = { "64p", "1pct", "16m_s", "128m_c" };

	for (size_t i = 0; i < sizeof(grow) / sizeof(*grow); i++) {
		const char *g = grow[i];

		if (c->o->quick && !strcmp(g, "128m_c"))
			g = "16m_c";
		add_case(c, g, M_LAZY, false, false, 2);
		add_case(c, g, M_LAZY, false, true, 2);
	}
	add_case(c, "1pct", M_EAGER, false, false, 2);
	add_case(c, "1pct", M_EAGER, false, true, 2);
	add_case(c, "1pct", M_PERPAGE, false, false, 2);
	add_case(c, "1pct", M_PLAIN, false, false, 2);
	return 0;
}

