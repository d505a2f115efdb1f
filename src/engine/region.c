// SPDX-License-Identifier: Apache-2.0
/*
 * region.c - region life cycle, the range operations events need, and
 * the engine's list of regions (find, insert, cut on UNMAP, move or split
 * on REMAP).
 *
 * Population decisions (which pages to fill, and with what) are the engine's;
 * this file only keeps the per-page truth and answers range questions.  A
 * region leaving the list goes to the caller's drop(), so that the engine
 * forgets work queued on it without this file knowing about that work.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "engine/cache.h"
#include "engine/region.h"
#include "source/source.h"

int region_new(const struct fl_region_desc *d, struct fl_source *src,
	       struct region **out)
{
	struct region *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->addr = d->addr;
	r->len = d->len;
	r->page_size = d->page_size;
	r->page_shift = (unsigned int)__builtin_ctzll(d->page_size);
	r->npages = d->len >> r->page_shift;
	r->src_off = d->src_offset;
	r->memfd = d->flags & FL_REGION_MINOR ? d->memfd : -1;
	r->memfd_off = d->memfd_offset;
	r->state = calloc(r->npages ? r->npages : 1, 1);
	if (!r->state) {
		free(r);
		return -ENOMEM;
	}
	r->src = fl_source_get(src);
	*out = r;
	return 0;
}

void region_free(struct region *r)
{
	if (!r)
		return;
	fl_source_put(r->src);
	scache_put(r->cache);
	if (!r->shared_state)
		free((void *)r->state);
	free((void *)r->dirty);
	free(r);
}

void region_share_state(struct region *r, _Atomic uint8_t *mem, bool keep)
{
	for (uint64_t i = 0; i < r->npages; i++) {
		uint8_t s = keep ? atomic_load(&mem[i]) : PG_MISSING;

		/*
		 * A fill the last server had under way: EEXIST will tell.
		 * A reset under way: its drop may not have happened, but
		 * the page then is mapped and never faults.
		 */
		if (s == PG_BUSY || s == PG_RESET || s >= PG_NSTATES)
			s = PG_MISSING;
		atomic_store(&mem[i], s);
	}
	free((void *)r->state);
	r->state = mem;
	r->shared_state = true;
}

/* Clip [start, end) to r, in pages; false if they do not meet. */
static bool clip_pages(const struct region *r, uint64_t start, uint64_t end,
		       uint64_t *first, uint64_t *last)
{
	uint64_t rend = r->addr + r->len;

	if (end <= r->addr || start >= rend)
		return false;
	if (start < r->addr)
		start = r->addr;
	if (end > rend)
		end = rend;
	*first = (start - r->addr) >> r->page_shift;
	/* A partial page at either end is zapped too: round outwards. */
	*last = (end - r->addr + r->page_size - 1) >> r->page_shift;
	return true;
}

/* Pages of [first, last) in a state of mask (bits 1 << state) become to. */
static uint64_t move_pages(struct region *r, uint64_t first, uint64_t last,
			   unsigned int mask, enum page_state to)
{
	uint64_t n = 0;

	for (uint64_t i = first; i < last; i++) {
		if (!(mask & (1u << region_get(r, i))))
			continue;
		atomic_store_explicit(&r->state[i], to, memory_order_release);
		n++;
	}
	return n;
}

uint64_t region_mark_removed(struct region *r, uint64_t start, uint64_t end)
{
	uint64_t first, last;

	if (!clip_pages(r, start, end, &first, &last))
		return 0;
	/* A reset's own drop is not the client's: those stay RESET. */
	uint64_t n = move_pages(r, first, last, ~(1u << PG_RESET), PG_REMOVED);

	for (uint64_t i = first; r->dirty && i < last; i++)
		if (region_get(r, i) == PG_REMOVED)
			region_set_dirty(r, i);
	return n;
}

uint64_t region_reset_begin(struct region *r, uint64_t start, uint64_t end)
{
	uint64_t first, last;

	if (!clip_pages(r, start, end, &first, &last))
		return 0;
	return move_pages(r, first, last, 1u << PG_MISSING |
			  1u << PG_PRESENT | 1u << PG_REMOVED, PG_RESET);
}

uint64_t region_reset_end(struct region *r, uint64_t start, uint64_t end)
{
	uint64_t first, last;

	if (!clip_pages(r, start, end, &first, &last))
		return 0;
	return move_pages(r, first, last, 1u << PG_RESET, PG_MISSING);
}

/* r's dirty map, all clear: 0 or -ENOMEM. */
static int dirty_alloc(struct region *r)
{
	r->dirty = calloc(r->npages ? r->npages : 1, 1);
	return r->dirty ? 0 : -ENOMEM;
}

/* A new region for pages [first, last) of r, at addr, states copied. */
static int region_slice(const struct region *r, uint64_t first,
			uint64_t last, uint64_t addr, struct region **out)
{
	struct fl_region_desc d = {
		.addr = addr,
		.len = (last - first) << r->page_shift,
		.page_size = r->page_size,
		.src_offset = r->src_off + (first << r->page_shift),
		.flags = r->memfd >= 0 ? FL_REGION_MINOR : 0,
		.memfd = r->memfd,
		.memfd_offset = r->memfd_off + (first << r->page_shift),
	};
	int ret = region_new(&d, r->src, out);

	if (ret < 0)
		return fl_err(ret, "region 0x%llx: out of memory splitting it",
			      (unsigned long long)r->addr);
	if (r->cache)
		(*out)->cache = scache_get(r->cache);
	for (uint64_t i = first; i < last; i++)
		atomic_store(&(*out)->state[i - first], region_get(r, i));
	if (r->dirty && dirty_alloc(*out) < 0) {
		region_free(*out);
		*out = NULL;
		return fl_err(-ENOMEM, "region 0x%llx: out of memory splitting "
			      "it", (unsigned long long)r->addr);
	}
	for (uint64_t i = first; r->dirty && i < last; i++)
		if (atomic_load(&r->dirty[i]))
			region_set_dirty(*out, i - first);
	return 0;
}

int region_track(struct region *r)
{
	if (r->dirty)
		return 0;
	if (dirty_alloc(r) < 0)
		return -ENOMEM;
	for (uint64_t i = 0; i < r->npages; i++) {
		enum page_state s = region_get(r, i);

		if (s != PG_MISSING && s != PG_GONE)
			region_set_dirty(r, i);
	}
	return 0;
}

int region_cut(struct region *r, uint64_t start, uint64_t end,
	       struct region **tail)
{
	uint64_t first, last;

	*tail = NULL;
	if (!clip_pages(r, start, end, &first, &last))
		return 0;
	if (last < r->npages) {
		int ret = region_slice(r, last, r->npages,
				       region_page_addr(r, last), tail);

		if (ret < 0) {
			/* Keep covering the range, as zeros: never as data. */
			region_set(r, first, last - first, PG_REMOVED);
			return ret;
		}
	}
	if (first == 0)
		return 1;
	r->npages = first;
	r->len = first << r->page_shift;
	return 0;
}

int region_remap(struct region *r, uint64_t start, uint64_t len,
		 uint64_t new_addr, struct region **out)
{
	uint64_t first, last;

	*out = NULL;
	if (!clip_pages(r, start, start + len, &first, &last))
		return 0;
	uint64_t moved_at = region_page_addr(r, first);

	if (first == 0 && last == r->npages) {
		r->addr = new_addr + (moved_at - start);
		return 1;
	}
	return region_slice(r, first, last, new_addr + (moved_at - start),
			    out);
}

void region_count(const struct region *r, uint64_t counts[PG_NSTATES])
{
	memset(counts, 0, PG_NSTATES * sizeof(*counts));
	for (uint64_t i = 0; i < r->npages; i++)
		counts[region_get(r, i) % PG_NSTATES]++;
}

/* ---- the list ----------------------------------------------------------- */

struct region *region_find(const struct region_list *l, uint64_t addr)
{
	for (int i = 0; i < l->n; i++)
		if (region_contains(l->v[i], addr))
			return l->v[i];
	return NULL;
}

int region_insert(struct region_list *l, struct region *r)
{
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 8;
		struct region **v = realloc(l->v, sizeof(*v) * (size_t)cap);

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = r;
	l->added++;
	return 0;
}

/* Add r (a split-off part), or free it if there is no room. */
static void insert_or_free(struct region_list *l, struct region *r)
{
	if (r && region_insert(l, r) < 0)
		region_free(r);
}

void region_list_cut(struct region_list *l, uint64_t start, uint64_t end,
		     region_drop_fn *drop, void *arg)
{
	/* Tails appended here lie past the range: cutting them is a no-op. */
	for (int i = 0; i < l->n; i++) {
		struct region *tail, *r = l->v[i];
		int gone = region_cut(r, start, end, &tail);

		insert_or_free(l, tail);
		if (gone == 1) {
			l->v[i--] = l->v[--l->n];	/* the last one takes slot i */
			drop(arg, r);
		}
	}
}

void region_list_move(struct region_list *l, uint64_t from, uint64_t to,
		      uint64_t len, region_drop_fn *drop, void *arg)
{
	int n = l->n;

	/* First the moved parts, at their new addresses... */
	for (int i = 0; i < n; i++) {
		struct region *nr;

		if (region_remap(l->v[i], from, len, to, &nr) == 0)
			insert_or_free(l, nr);
	}
	/* ...then what stayed behind no longer covers the old range. */
	region_list_cut(l, from, from + len, drop, arg);
}

void region_list_removed(struct region_list *l, uint64_t start, uint64_t end)
{
	for (int i = 0; i < l->n; i++)
		region_mark_removed(l->v[i], start, end);
}

void region_list_free(struct region_list *l, region_drop_fn *drop, void *arg)
{
	for (int i = 0; i < l->n; i++) {
		if (drop)
			drop(arg, l->v[i]);
		else
			region_free(l->v[i]);
	}
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}
