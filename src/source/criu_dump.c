// SPDX-License-Identifier: Apache-2.0
/*
 * criu_dump.c - a CRIU dump as a source (criu_dump.h): its images read
 * and checked by format/criu.c, its lazy pages from one of three places
 * (its pages files end to end, a source laid out as they are, CRIU's page
 * server), and its task table as each task's regions of those pages.
 *
 * Decision: the dump is a source that reads through the source of its
 * pages (every read handed down, map() too, so a pages file keeps its
 * one-copy path) and carries the task table, rather than a task table
 * beside a source: whoever serves it (the daemon's CRIU protocol) needs
 * only the source, through the public API, and the one place that knows
 * how the pages files lie (pages-<id>.img, in pstree.img's order, a task
 * with none taking no room) is here.  Each task's regions are made once,
 * at open, and live as long as the source.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faultline.h"
#include "format/criu.h"
#include "source/concat.h"
#include "source/criu_dump.h"
#include "source/criu_ps.h"
#include "source/source.h"
#include "util/error.h"

struct dump_task {
	pid_t pid;
	unsigned int nregions;
	struct fl_region_desc *regions;
};

struct criu_dump {
	struct fl_source s;
	struct fl_source *pages;
	int ntasks;
	struct dump_task tasks[];
};

static struct fl_source *pages_of(struct fl_source *s)
{
	return ((struct criu_dump *)s)->pages;
}

static int dump_read(struct fl_source *s, void *buf, size_t len,
		     uint64_t off)
{
	return pages_of(s)->ops->read(pages_of(s), buf, len, off);
}

static const void *dump_map(struct fl_source *s, uint64_t off, size_t len)
{
	struct fl_source *p = pages_of(s);

	return p->ops->map ? p->ops->map(p, off, len) : NULL;
}

static bool dump_hole(struct fl_source *s, uint64_t off, size_t len)
{
	struct fl_source *p = pages_of(s);

	return p->ops->hole && p->ops->hole(p, off, len);
}

static void dump_hint(struct fl_source *s, uint64_t off, size_t len)
{
	struct fl_source *p = pages_of(s);

	if (p->ops->hint)
		p->ops->hint(p, off, len);
}

static void dump_destroy(struct fl_source *s)
{
	struct criu_dump *d = (struct criu_dump *)s;

	for (int i = 0; i < d->ntasks; i++)
		free(d->tasks[i].regions);
	fl_source_put(d->pages);
	free(d);
}

static const struct fl_source_ops dump_ops = {
	.name = "criu",
	.read = dump_read,
	.map = dump_map,
	.hole = dump_hole,
	.hint = dump_hint,
	.destroy = dump_destroy,
};

/* t's lazy ranges as regions of the pages, at its place in them. */
static int task_regions(const struct criu_task *t, struct dump_task *out)
{
	out->pid = t->pid;
	out->regions = calloc(t->nranges ? (size_t)t->nranges : 1,
			      sizeof(*out->regions));
	if (!out->regions)
		return -ENOMEM;
	for (int i = 0; i < t->nranges; i++)
		out->regions[i] = (struct fl_region_desc){
			.addr = t->ranges[i].addr, .len = t->ranges[i].len,
			.page_size = CRIU_PAGE_SIZE,
			.src_offset = t->base + t->ranges[i].off };
	out->nregions = (unsigned int)t->nranges;
	return 0;
}

int source_criu_over(const struct criu_set *set, struct fl_source *pages,
		     struct fl_source **out)
{
	struct criu_dump *d = calloc(1, sizeof(*d) + sizeof(d->tasks[0]) *
				     (size_t)set->ntasks);
	int ret = 0;

	if (!d) {
		fl_source_put(pages);
		return -ENOMEM;
	}
	source_init(&d->s, &dump_ops, pages->size, pages->desc);
	d->s.below = pages;	/* its remote bytes are the pages' */
	d->pages = pages;
	for (; d->ntasks < set->ntasks && ret == 0; d->ntasks++)
		ret = task_regions(&set->tasks[d->ntasks], &d->tasks[d->ntasks]);
	if (ret < 0) {
		dump_destroy(&d->s);
		return ret;
	}
	*out = &d->s;
	return 0;
}

/* The pages files of the tasks that have any, in the set's order. */
static int own_pages(const char *dir, const struct criu_set *set,
		     struct fl_source **out)
{
	const char **paths = calloc((size_t)set->ntasks + 1, sizeof(*paths));
	char desc[300];
	int n = 0, ret = 0;

	if (!paths)
		return -ENOMEM;
	for (int i = 0; i < set->ntasks && ret == 0; i++) {
		char *p;

		if (!set->tasks[i].pages_size)
			continue;
		if (asprintf(&p, "%s/pages-%u.img", dir,
			     set->tasks[i].pages_id) < 0)
			ret = -ENOMEM;
		else
			paths[n++] = p;
	}
	snprintf(desc, sizeof(desc), "%s (CRIU images, %d task%s)", dir,
		 set->ntasks, set->ntasks == 1 ? "" : "s");
	if (ret == 0)
		ret = source_concat_open(paths, n, desc, out);
	for (int i = 0; i < n; i++)
		free((char *)paths[i]);
	free(paths);
	return ret;
}

/* A source laid out as the pages files (taken over): their size? */
static int laid_out(struct fl_source *src, const struct criu_set *set,
		    struct fl_source **out)
{
	int ret;

	*out = src;
	if (src->size == set->pages_total)
		return 0;
	ret = fl_err(-EINVAL, "--pages %s: %llu bytes, but the dump's pages "
		     "files have %llu (made by `faultline image create "
		     "--criu` from this dump?)", src->desc,
		     (unsigned long long)src->size,
		     (unsigned long long)set->pages_total);
	fl_source_put(src);
	*out = NULL;
	return ret;
}

/*
 * The pages of set (in dir) as how says (its source taken over); with a
 * page server, dialled only if dial (else *out is NULL).
 */
static int open_pages(const char *dir, const struct criu_pages *how,
		      struct criu_set *set, bool dial, struct fl_source **out)
{
	int ret = 0;

	*out = NULL;
	if (set->remote && !how->host)
		ret = fl_err(-EINVAL, "%s: the dump left its lazy pages on "
			     "the dumping host (criu dump --lazy-pages): serve "
			     "them with --page-server --address HOST --port "
			     "PORT", dir);
	else if (how->source && !how->host)
		return laid_out(how->source, set, out);
	if (how->source)
		fl_source_put(how->source);
	if (ret < 0)
		return ret;
	if (how->header)	/* the server's CRIU, not the dump's */
		set->wide = how->header == CRIU_PS_HDR_WIDE;
	if (how->host)
		return dial ? source_criu_ps_open(how->host, how->port, set,
						  how->lost_ok, out) : 0;
	return own_pages(dir, set, out);
}

/* criu_load(), and how's source let go if it fails. */
static int load(const char *dir, const struct criu_pages *how,
		struct criu_set *set)
{
	int ret = criu_load(dir, set);

	if (ret < 0 && how && how->source)
		fl_source_put(how->source);
	return ret;
}

/* The dump in dir, its pages as how says: a source, or (out NULL) checks. */
static int assemble(const char *dir, const struct criu_pages *how,
		    struct fl_source **out)
{
	static const struct criu_pages own;
	struct fl_source *pages;
	struct criu_set set;
	int ret = load(dir, how, &set);

	if (ret < 0)
		return ret;
	ret = open_pages(dir, how ? how : &own, &set, out != NULL, &pages);
	if (ret == 0 && out)
		ret = source_criu_over(&set, pages, out);
	else if (pages)
		fl_source_put(pages);
	criu_free(&set);
	return ret;
}

int source_criu_check(const char *dir, const struct criu_pages *how)
{
	return assemble(dir, how, NULL);
}

int source_criu_open(const char *dir, const struct criu_pages *how,
		     struct fl_source **out)
{
	return assemble(dir, how, out);
}

int fl_source_criu_tasks(const struct fl_source *src)
{
	if (!src || src->ops != &dump_ops)
		return fl_err(-ENODATA, "%s: not a CRIU dump", src ?
			      src->desc : "no source");
	return ((const struct criu_dump *)src)->ntasks;
}

int fl_source_criu_task(const struct fl_source *src, int i, pid_t *pid,
			const struct fl_region_desc **regions,
			unsigned int *nregions)
{
	const struct criu_dump *d = (const struct criu_dump *)src;
	int n = fl_source_criu_tasks(src);

	if (n < 0)
		return n;
	if (i < 0 || i >= n)
		return fl_err(-EINVAL, "%s: task %d of %d", src->desc, i, n);
	if (pid)
		*pid = d->tasks[i].pid;
	if (regions)
		*regions = d->tasks[i].regions;
	if (nregions)
		*nregions = d->tasks[i].nregions;
	return 0;
}
