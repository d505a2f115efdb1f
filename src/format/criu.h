/* SPDX-License-Identifier: Apache-2.0 */
/*
 * criu.h - CRIU's images as faultline reads them (criu.c): the tasks of
 * pstree.img, and for each its lazy memory (pagemap-<pid>.img entries
 * flagged PE_LAZY, split at the VMAs of mm-<pid>.img) with where its bytes
 * are in pages-<id>.img.
 *
 * Decision: the whole set is read and checked at start, so that a
 * malformed image is refused before anything is served, never found at
 * the first fault; the parsers take bytes (a file's contents) so that the
 * fuzz harness reaches them without files.
 */
#ifndef FAULTLINE_FORMAT_CRIU_H
#define FAULTLINE_FORMAT_CRIU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CRIU_PAGE_SIZE		4096u
#define CRIU_IMG_COMMON_MAGIC	0x54564319u	/* every image's first u32 */
#define CRIU_PSTREE_MAGIC	0x50273030u
#define CRIU_PAGEMAP_MAGIC	0x56084025u
#define CRIU_MM_MAGIC		0x57492820u
#define CRIU_PE_PARENT		(1u << 0)	/* in a parent snapshot */
#define CRIU_PE_LAZY		(1u << 1)	/* may be restored lazily */
#define CRIU_PE_PRESENT		(1u << 2)	/* in pages-<id>.img */
#define CRIU_TASKS_MAX		65536
#define CRIU_IMAGE_MAX		(256u << 20)	/* bytes of one image read */

/*
 * A lazy range inside one VMA: its bytes at off in the pages file, or
 * for a remote task at off in its lazy bytes (in address order).
 */
struct criu_range {
	uint64_t addr;
	uint64_t len;
	uint64_t off;
};

struct criu_vma {
	uint64_t start;
	uint64_t end;
};

struct criu_task {
	int32_t pid;		/* as the images name it (its pid namespace) */
	uint32_t pages_id;	/* pages-<id>.img */
	uint64_t pages_size;	/* that file's bytes; remote: its lazy bytes */
	uint64_t base;		/* where those start in the set's pages */
	int nranges;
	struct criu_range *ranges;
	uint64_t lazy_bytes;
	/*
	 * Its lazy pages were left on the dumping host (`criu dump
	 * --lazy-pages`, PE_LAZY without PE_PRESENT), for a page server.
	 */
	bool remote;
	bool wide;		/* page counts in field 5: CRIU 4.2 or later */
};

/*
 * A dump: its tasks, and their pages files in task order (remote: their
 * lazy bytes, as a page server serves them; never both kinds).
 */
struct criu_set {
	int ntasks;
	struct criu_task *tasks;
	uint64_t pages_total;	/* the pages files' bytes, concatenated */
	bool remote;		/* lazy pages on the dumping host */
	bool wide;		/* some pagemap written by CRIU 4.2 or later */
};

/*
 * The parsers: a file's bytes, name for the messages.  0 or -EINVAL with
 * one line (fl_last_error) naming the file and the record at fault.
 */
int criu_parse_pstree(const void *buf, size_t len, const char *name,
		      int32_t **pids, int *n);
int criu_parse_mm(const void *buf, size_t len, const char *name,
		  struct criu_vma **vmas, int *n);
/*
 * The lazy ranges of t from its pagemap, split at the VMAs (sorted, as
 * criu_parse_mm checks); t->pages_size bounds every offset.  Sets
 * pages_id, nranges, ranges, lazy_bytes.
 */
int criu_parse_pagemap(const void *buf, size_t len, const char *name,
		       const struct criu_vma *vmas, int nvmas,
		       struct criu_task *t);

/* Read and check a dump's directory: 0 or -errno with the reason set. */
int criu_load(const char *dir, struct criu_set *out);
void criu_free(struct criu_set *set);

#endif
