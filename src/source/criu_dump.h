/* SPDX-License-Identifier: Apache-2.0 */
/*
 * criu_dump.h - a CRIU dump as a source (criu_dump.c): the images
 * directory of `criu dump`, read and checked (format/criu.h), its lazy
 * pages end to end in the tasks' order, and its tasks, each with its lazy
 * memory as regions of that source (fl_source_criu_task(), faultline.h),
 * which is what the daemon's CRIU protocol serves.  open.c opens one for
 * a directory; `faultline lazy-pages` opens one here for pages read from
 * elsewhere.
 */
#ifndef FAULTLINE_SOURCE_CRIU_DUMP_H
#define FAULTLINE_SOURCE_CRIU_DUMP_H

#include <stdbool.h>

struct criu_set;
struct fl_source;

/* Where a dump's lazy pages are read; zeroed: its own pages files. */
struct criu_pages {
	/*
	 * A source laid out as the pages files, end to end (`faultline
	 * image create --criu`), its size theirs: the open takes over this
	 * reference, also when it fails.  NULL: none.
	 */
	struct fl_source *source;
	/* Else CRIU's page server at host:port (criu_ps.h), or NULL. */
	const char *host, *port;
	/* Its header, CRIU_PS_HDR_NARROW or _WIDE; 0: as the images say. */
	unsigned int header;
	/* An unreachable server still gives a source, whose reads fail. */
	bool lost_ok;
};

/*
 * The dump in dir, its pages as how says (NULL: its own pages files).
 * 0, or -errno with the reason set (a malformed image, pages that are not
 * the dump's size, lazy pages left on the dumping host without a server).
 */
int source_criu_open(const char *dir, const struct criu_pages *how,
		     struct fl_source **out);
/*
 * The same checks with no source kept, and a page server not dialled: it
 * takes one connection, which is the server's to make.
 */
int source_criu_check(const char *dir, const struct criu_pages *how);
/*
 * set's tasks over pages (a reference taken over, also on failure), set
 * copied: what source_criu_open() ends with, apart for the tests and the
 * fuzz harness of the CRIU protocol, which make a set of their own.
 */
int source_criu_over(const struct criu_set *set, struct fl_source *pages,
		     struct fl_source **out);

#endif
