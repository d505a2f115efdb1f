/* SPDX-License-Identifier: Apache-2.0 */
/*
 * criu_ps.h - a source reading a CRIU dump's lazy pages from CRIU's own
 * page server (criu_ps.c), for `faultline lazy-pages --page-server`, and
 * the protocol's header, apart so that the fuzz harness reaches it.
 *
 * The protocol (CRIU's criu/page-xfer.c): the restoring side sends
 * PS_IOV_GET {cmd, nr_pages, vaddr, dst_id = the task's pid in the
 * images}; the dumping side answers PS_IOV_ADD_F with the pages it has
 * from vaddr on (nr_pages, at most the asked) and then their bytes, or
 * hangs up if it has none.  PS_IOV_CLOSE ends it: an int32 status comes
 * back.  Fields are the host's byte order (both ends are one machine
 * type).  CRIU 4.2 widened nr_pages to u64 (24 bytes became 32) in the
 * release that began writing pagemap page counts in field 5, so the
 * images say which layout their page server speaks.
 */
#ifndef FAULTLINE_SOURCE_CRIU_PS_H
#define FAULTLINE_SOURCE_CRIU_PS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CRIU_PS_GET		7u
#define CRIU_PS_ADD_F		6u
#define CRIU_PS_CLOSE		0x1023u
#define CRIU_PS_CMD_MASK	0xffffu		/* the rest: PE_* flags */
#define CRIU_PS_HDR_NARROW	24u		/* CRIU up to 4.1 */
#define CRIU_PS_HDR_WIDE	32u		/* CRIU 4.2 on */

struct criu_ps_hdr {
	uint32_t cmd;
	uint64_t nr_pages;
	uint64_t vaddr;
	uint64_t dst_id;
};

/* The header's bytes in buf (CRIU_PS_HDR_WIDE at most); its length. */
size_t criu_ps_encode(uint8_t *buf, bool wide, const struct criu_ps_hdr *h);
void criu_ps_decode(const uint8_t *buf, bool wide, struct criu_ps_hdr *h);
/*
 * Is a the answer to the request q?  0, or -EPROTO with the error set
 * saying what is wrong (a command not PS_IOV_ADD_F, another task or
 * address, no pages, more pages than asked).
 */
int criu_ps_check(const struct criu_ps_hdr *q, const struct criu_ps_hdr *a);

struct criu_set;
struct fl_source;
/*
 * The lazy pages of set (remote: criu_load found them left on the
 * dumping host), laid out as set->pages_total says, read from the page
 * server at host:port.  0, or -errno with the error set.  With
 * lost_ok, a server that cannot be reached (gone with the connection an
 * earlier daemon had) still gives a source, each read of which fails
 * saying so: the tasks waiting on it get what --on-source-error says.
 */
int source_criu_ps_open(const char *host, const char *port,
			const struct criu_set *set, bool lost_ok,
			struct fl_source **out);

#endif
