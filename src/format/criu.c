// SPDX-License-Identifier: Apache-2.0
/*
 * criu.c - read CRIU's images: pstree.img (the tasks), mm-<pid>.img (the
 * VMAs), pagemap-<pid>.img (which pages are lazy, and where their bytes
 * are in pages-<id>.img).  Facts from CRIU's criu/image.c, protobuf.c,
 * pagemap.c and uffd.c: an image is u32 0x54564319, u32 its own magic,
 * then records of u32 length + one protobuf message; pages-<id>.img is raw
 * (no header), holding the pages of every PE_PRESENT entry in entry
 * order, so an entry's bytes start at the summed length of the earlier
 * present ones; an entry without flags is present (old images).
 *
 * Decision: everything CRIU's lazy-pages daemon assumes (entries sorted,
 * inside a VMA, within the pages file) is checked here, so that a bad
 * image is refused at start with the file and record named, and never
 * served as wrong memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "criu_images.pb-c.h"
#include "format/criu.h"
#include "util/error.h"
#include "util/io.h"

/* Records of one image, after its two magics. */
struct rec {
	const uint8_t *buf;
	size_t len, pos;
	int idx;		/* records read, the next is idx + 1 */
	const char *name;
};

static int rec_open(struct rec *r, const void *buf, size_t len,
		    const char *name, uint32_t magic)
{
	uint32_t m[2];

	*r = (struct rec){ .buf = buf, .len = len, .pos = 8, .name = name };
	if (len < 8)
		return fl_err(-EINVAL, "%s: truncated: %zu bytes, no image "
			      "header", name, len);
	memcpy(m, buf, 8);
	if (m[0] != CRIU_IMG_COMMON_MAGIC || m[1] != magic)
		return fl_err(-EINVAL, "%s: not a CRIU image of this kind "
			      "(magic 0x%08x 0x%08x, expected 0x%08x 0x%08x)",
			      name, m[0], m[1], CRIU_IMG_COMMON_MAGIC, magic);
	return 0;
}

/* The next record's bytes: 1, 0 at the end, or -EINVAL. */
static int rec_next(struct rec *r, const uint8_t **msg, size_t *len)
{
	uint32_t n;

	if (r->pos == r->len)
		return 0;
	r->idx++;
	if (r->len - r->pos < 4)
		return fl_err(-EINVAL, "%s: record %d: truncated (%zu bytes of "
			      "its 4-byte length)", r->name, r->idx,
			      r->len - r->pos);
	memcpy(&n, r->buf + r->pos, 4);
	r->pos += 4;
	if (n > r->len - r->pos)
		return fl_err(-EINVAL, "%s: record %d: truncated (%u bytes "
			      "said, %zu left)", r->name, r->idx, n,
			      r->len - r->pos);
	*msg = r->buf + r->pos;
	*len = n;
	r->pos += n;
	return 1;
}

static int bad(const struct rec *r, const char *what)
{
	return fl_err(-EINVAL, "%s: record %d: %s", r->name, r->idx, what);
}

int criu_parse_pstree(const void *buf, size_t len, const char *name,
		      int32_t **pids, int *n)
{
	const uint8_t *m;
	size_t ml;
	struct rec r;
	int ret, cap = 0;
	int32_t *v = NULL;

	*pids = NULL;
	*n = 0;
	if ((ret = rec_open(&r, buf, len, name, CRIU_PSTREE_MAGIC)) < 0)
		return ret;
	while ((ret = rec_next(&r, &m, &ml)) > 0) {
		FlCriuPstreeEntry *e = fl_criu_pstree_entry__unpack(NULL, ml, m);
		uint32_t pid = e ? e->pid : 0;

		if (e)
			fl_criu_pstree_entry__free_unpacked(e, NULL);
		if (!e) {
			ret = bad(&r, "not a pstree entry");
			break;
		}
		if (!pid || pid > INT32_MAX) {
			ret = fl_err(-EINVAL, "%s: record %d: pid %u", name,
				     r.idx, pid);
			break;
		}
		for (int i = 0; i < *n; i++)
			if (v[i] == (int32_t)pid)
				ret = fl_err(-EINVAL, "%s: record %d: pid %u "
					     "twice", name, r.idx, pid);
		if (ret < 0)
			break;
		if (*n == CRIU_TASKS_MAX) {
			ret = bad(&r, "more tasks than faultline serves");
			break;
		}
		if (*n == cap) {
			int32_t *nv = realloc(v, sizeof(*v) * (cap = cap ? 2 * cap : 8));

			if (!nv) {
				ret = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[(*n)++] = (int32_t)pid;
	}
	if (ret == 0 && !*n)
		ret = fl_err(-EINVAL, "%s: no task", name);
	if (ret < 0) {
		free(v);
		*n = 0;
		return ret;
	}
	*pids = v;
	return 0;
}

int criu_parse_mm(const void *buf, size_t len, const char *name,
		  struct criu_vma **vmas, int *n)
{
	const uint8_t *m;
	size_t ml;
	struct rec r;
	FlCriuMmEntry *e;
	int ret;

	*vmas = NULL;
	*n = 0;
	if ((ret = rec_open(&r, buf, len, name, CRIU_MM_MAGIC)) < 0)
		return ret;
	if ((ret = rec_next(&r, &m, &ml)) <= 0)
		return ret < 0 ? ret : fl_err(-EINVAL, "%s: no mm entry", name);
	e = fl_criu_mm_entry__unpack(NULL, ml, m);
	if (!e)
		return bad(&r, "not an mm entry");
	struct criu_vma *v = calloc(e->n_vmas ? e->n_vmas : 1, sizeof(*v));

	for (size_t i = 0; v && i < e->n_vmas; i++) {
		uint64_t s = e->vmas[i]->start, end = e->vmas[i]->end;

		if (s >= end || (s | end) % CRIU_PAGE_SIZE ||
		    (i && s < v[i - 1].end)) {
			ret = fl_err(-EINVAL, "%s: record %d: VMA %zu "
				     "0x%" PRIx64 "-0x%" PRIx64 ": %s", name,
				     r.idx, i, s, end, s >= end ? "empty" :
				     (s | end) % CRIU_PAGE_SIZE ?
				     "not page aligned" :
				     "overlaps or precedes the one before");
			break;
		}
		v[i] = (struct criu_vma){ s, end };
	}
	*n = (int)e->n_vmas;
	fl_criu_mm_entry__free_unpacked(e, NULL);
	if (!v || ret < 0) {
		free(v);
		*n = 0;
		return v ? ret : -ENOMEM;
	}
	*vmas = v;
	return 0;
}

static int add_range(struct criu_task *t, int *cap, uint64_t addr,
		     uint64_t len, uint64_t off)
{
	if (t->nranges == *cap) {
		int nc = *cap ? 2 * *cap : 16;
		struct criu_range *nr = realloc(t->ranges, sizeof(*nr) * nc);

		if (!nr)
			return -ENOMEM;
		t->ranges = nr;
		*cap = nc;
	}
	t->ranges[t->nranges++] = (struct criu_range){ addr, len, off };
	t->lazy_bytes += len;
	return 0;
}

/* [s, e) at off, cut at the VMAs from *vi on (both sorted). */
static int split_lazy(const struct rec *r, struct criu_task *t, int *cap,
		      const struct criu_vma *v, int nv, int *vi, uint64_t s,
		      uint64_t e, uint64_t off)
{
	char why[128];

	while (s < e) {
		while (*vi < nv && v[*vi].end <= s)
			(*vi)++;
		if (*vi == nv || v[*vi].start > s) {
			snprintf(why, sizeof(why), "lazy page 0x%" PRIx64
				 " is in no VMA of the mm image", s);
			return bad(r, why);
		}
		uint64_t end = e < v[*vi].end ? e : v[*vi].end;
		struct criu_range *last = t->nranges ?
					  &t->ranges[t->nranges - 1] : NULL;

		/*
		 * The entry before ends here, in this VMA and in the pages
		 * file: one range (CRIU writes an entry per 1 MiB or so; a
		 * region each would make a 1 GiB task 1,000 regions).
		 */
		if (last && last->addr + last->len == s &&
		    last->off + last->len == off && last->addr >= v[*vi].start) {
			last->len += end - s;
			t->lazy_bytes += end - s;
		} else if (add_range(t, cap, s, end - s, off) < 0) {
			return -ENOMEM;
		}
		off += end - s;
		s = end;
	}
	return 0;
}

/* Where a pagemap walk is: the entry before's end, the next offsets. */
struct pm_walk {
	uint64_t prev_end;
	uint64_t off;		/* in pages-<id>.img */
	uint64_t roff;		/* in the lazy bytes left on the dumping host */
	int cap, vi;
};

/* Check an entry's page count and order; its length in *len. */
static int entry_len(const struct rec *r, const FlCriuPagemapEntry *pe,
		     uint64_t prev_end, uint64_t *len)
{
	uint64_t nr = pe->has_nr_pages ? pe->nr_pages : pe->compat_nr_pages;
	char why[160];

	if (pe->vaddr % CRIU_PAGE_SIZE || !nr ||
	    nr > (UINT64_MAX - pe->vaddr) / CRIU_PAGE_SIZE ||
	    pe->vaddr < prev_end) {
		snprintf(why, sizeof(why), "entry 0x%" PRIx64 " +%" PRIu64
			 " pages: %s", pe->vaddr, nr,
			 pe->vaddr % CRIU_PAGE_SIZE ? "not page aligned" :
			 !nr ? "no pages" : pe->vaddr < prev_end ?
			 "overlaps or precedes the entry before" :
			 "past the end of the address space");
		return bad(r, why);
	}
	*len = nr * CRIU_PAGE_SIZE;
	return 0;
}

/*
 * Lazy pages the dump left on its host (criu dump --lazy-pages, for a
 * page server): numbered in address order, as the page server's source
 * reads them.  A task's lazy pages are all there or all in its file.
 */
static int remote_entry(const struct rec *r, struct criu_task *t,
			const struct criu_vma *v, int nv, struct pm_walk *w,
			uint64_t start, uint64_t len)
{
	int ret;

	if (t->nranges && !t->remote)
		return bad(r, "lazy pages both in the pages file and left on "
			   "the dumping host");
	t->remote = true;
	ret = split_lazy(r, t, &w->cap, v, nv, &w->vi, start, start + len,
			 w->roff);
	w->roff += len;
	return ret;
}

static int pagemap_entry(const struct rec *r, struct criu_task *t,
			 const struct criu_vma *v, int nv, struct pm_walk *w,
			 const FlCriuPagemapEntry *pe)
{
	uint32_t fl = pe->has_flags ? pe->flags :
		      pe->has_in_parent && pe->in_parent ? CRIU_PE_PARENT :
		      CRIU_PE_PRESENT;
	uint64_t len = 0;
	char why[160];
	int ret = entry_len(r, pe, w->prev_end, &len);

	if (ret < 0)
		return ret;
	w->prev_end = pe->vaddr + len;
	t->wide |= pe->has_nr_pages;
	if (fl & CRIU_PE_PARENT)
		return bad(r, "pages in a parent image (a pre-dump): not "
			   "supported");
	if ((fl & CRIU_PE_LAZY) && !(fl & CRIU_PE_PRESENT))
		return remote_entry(r, t, v, nv, w, pe->vaddr, len);
	if (!(fl & CRIU_PE_PRESENT))
		return 0;
	if (w->off > t->pages_size || len > t->pages_size - w->off) {
		snprintf(why, sizeof(why), "entry 0x%" PRIx64 " +%" PRIu64
			 " pages: points past the end of pages-%u.img (%"
			 PRIu64 " bytes)", pe->vaddr, len / CRIU_PAGE_SIZE,
			 t->pages_id, t->pages_size);
		return bad(r, why);
	}
	if (fl & CRIU_PE_LAZY) {
		if (t->remote)
			return bad(r, "lazy pages both in the pages file and "
				   "left on the dumping host");
		ret = split_lazy(r, t, &w->cap, v, nv, &w->vi, pe->vaddr,
				 w->prev_end, w->off);
	}
	w->off += len;
	return ret;
}

/* pages_id from the head record: 0 or -EINVAL. */
static int pagemap_head(struct rec *r, uint32_t *id)
{
	const uint8_t *m;
	size_t ml;
	int ret = rec_next(r, &m, &ml);

	if (ret <= 0)
		return ret < 0 ? ret : fl_err(-EINVAL, "%s: no pagemap head",
					      r->name);
	FlCriuPagemapHead *h = fl_criu_pagemap_head__unpack(NULL, ml, m);

	if (!h)
		return bad(r, "not a pagemap head");
	*id = h->pages_id;
	fl_criu_pagemap_head__free_unpacked(h, NULL);
	return 0;
}

int criu_parse_pagemap(const void *buf, size_t len, const char *name,
		       const struct criu_vma *vmas, int nvmas,
		       struct criu_task *t)
{
	struct pm_walk w = { 0 };
	const uint8_t *m;
	size_t ml;
	struct rec r;
	int ret;

	t->nranges = 0;
	t->ranges = NULL;
	t->lazy_bytes = 0;
	t->remote = false;
	t->wide = false;
	if ((ret = rec_open(&r, buf, len, name, CRIU_PAGEMAP_MAGIC)) < 0 ||
	    (ret = pagemap_head(&r, &t->pages_id)) < 0)
		return ret;
	while ((ret = rec_next(&r, &m, &ml)) > 0) {
		FlCriuPagemapEntry *pe = fl_criu_pagemap_entry__unpack(NULL, ml, m);

		if (!pe) {
			ret = bad(&r, "not a pagemap entry");
			break;
		}
		ret = pagemap_entry(&r, t, vmas, nvmas, &w, pe);
		fl_criu_pagemap_entry__free_unpacked(pe, NULL);
		if (ret < 0)
			break;
	}
	if (ret < 0) {
		free(t->ranges);
		t->ranges = NULL;
		t->nranges = 0;
	} else if (t->remote) {
		t->pages_size = w.roff;	/* what a page server serves */
	}
	return ret;
}

/* ---- a directory ---------------------------------------------------------- */

/* The whole of dir/name: 0, -ENOENT quietly, or -errno with the reason. */
static int slurp(const char *dir, const char *name, void **buf, size_t *len)
{
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open_regular(path, &st, true);

	if (fd == -ENOENT)
		return fd;
	if (fd < 0)
		return fl_err(fd, "%s: %s", path, strerror(-fd));
	if ((uint64_t)st.st_size > CRIU_IMAGE_MAX) {
		close(fd);
		return fl_err(-EFBIG, "%s: %lld bytes: larger than faultline "
			      "reads (%u MiB)", path, (long long)st.st_size,
			      CRIU_IMAGE_MAX >> 20);
	}
	*len = (size_t)st.st_size;
	*buf = malloc(*len ? *len : 1);
	int ret = *buf ? pread_full(fd, *buf, *len, 0) : -ENOMEM;

	close(fd);
	if (ret < 0) {
		free(*buf);
		*buf = NULL;
		return fl_err(ret, "%s: cannot read it: %s", path,
			      ret == -EIO ? "shorter than its size" :
			      strerror(-ret));
	}
	return 0;
}

/* One task's VMAs and lazy ranges; none if it has no mm (a zombie). */
static int load_task(const char *dir, struct criu_task *t)
{
	char name[64], pname[64];
	void *mb = NULL, *pb = NULL;
	size_t ml, pl;
	struct criu_vma *v = NULL;
	struct rec r;
	int nv = 0, ret;

	snprintf(name, sizeof(name), "mm-%d.img", t->pid);
	ret = slurp(dir, name, &mb, &ml);
	if (ret == -ENOENT)
		return 0;
	if (ret == 0)
		ret = criu_parse_mm(mb, ml, name, &v, &nv);
	snprintf(pname, sizeof(pname), "pagemap-%d.img", t->pid);
	if (ret == 0 && (ret = slurp(dir, pname, &pb, &pl)) == -ENOENT)
		ret = fl_err(-ENOENT, "%s/%s: missing (%s is there)", dir,
			     pname, name);
	/* The pages file is named by the head: its size bounds the rest. */
	if (ret == 0 && (ret = rec_open(&r, pb, pl, pname,
					CRIU_PAGEMAP_MAGIC)) == 0)
		ret = pagemap_head(&r, &t->pages_id);
	if (ret == 0) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/pages-%u.img", dir,
			 t->pages_id);
		if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
			ret = fl_err(-ENOENT, "%s: %s (named by %s)", path,
				     errno == ENOENT || S_ISREG(st.st_mode) ?
				     "missing" : "not a regular file", pname);
		else
			t->pages_size = (uint64_t)st.st_size;
	}
	if (ret == 0)
		ret = criu_parse_pagemap(pb, pl, pname, v, nv, t);
	free(mb);
	free(pb);
	free(v);
	return ret;
}

int criu_load(const char *dir, struct criu_set *out)
{
	int32_t *pids = NULL;
	void *buf = NULL;
	bool local = false;
	size_t len;
	int n = 0, ret;

	memset(out, 0, sizeof(*out));
	ret = slurp(dir, "pstree.img", &buf, &len);
	if (ret == -ENOENT)
		return fl_err(ret, "%s/pstree.img: missing: not a CRIU dump",
			      dir);
	if (ret == 0)
		ret = criu_parse_pstree(buf, len, "pstree.img", &pids, &n);
	free(buf);
	if (ret < 0)
		return ret;
	out->tasks = calloc((size_t)n, sizeof(*out->tasks));
	if (!out->tasks) {
		free(pids);
		return -ENOMEM;
	}
	out->ntasks = n;
	for (int i = 0; i < n && ret == 0; i++) {
		struct criu_task *t = &out->tasks[i];

		t->pid = pids[i];
		ret = load_task(dir, t);
		if (!ret && t->pages_size > UINT64_MAX - out->pages_total)
			ret = fl_err(-EFBIG, "%s/pagemap-%d.img: more lazy "
				     "bytes than 2^64 with the tasks before",
				     dir, t->pid);
		t->base = out->pages_total;
		out->pages_total += t->pages_size;
		local |= t->nranges && !t->remote;
		out->remote |= t->remote;
		out->wide |= t->wide;
	}
	if (ret == 0 && local && out->remote)
		ret = fl_err(-EINVAL, "%s: some tasks' lazy pages are in their "
			     "pages files, others' on the dumping host", dir);
	free(pids);
	if (ret < 0)
		criu_free(out);
	return ret;
}

void criu_free(struct criu_set *set)
{
	for (int i = 0; set->tasks && i < set->ntasks; i++)
		free(set->tasks[i].ranges);
	free(set->tasks);
	memset(set, 0, sizeof(*set));
}
