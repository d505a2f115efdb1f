// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_criu_ps.c - an answer of CRIU's page server as `faultline
 * lazy-pages --page-server` reads it (source/criu_ps.c): the header
 * decoded in either layout and checked against the request it answers.
 *
 * Input: byte 0's low bit picks the layout (1: CRIU 4.2's 32 bytes, 0:
 * the 24 before), then the request's header and the answer's, each in
 * that layout.  What must hold: the request survives encode and decode;
 * an answer accepted is
 * PS_IOV_ADD_F for the request's task and address with 1 to the asked
 * pages; one refused says why in one line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "faultline.h"
#include "source/criu_ps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct criu_ps_hdr q, a, back;
	uint8_t buf[CRIU_PS_HDR_WIDE];
	bool wide;
	size_t hl;

	if (size < 1)
		return 0;
	wide = data[0] & 1;
	hl = wide ? CRIU_PS_HDR_WIDE : CRIU_PS_HDR_NARROW;
	if (size < 1 + 2 * hl)
		return 0;
	criu_ps_decode(data + 1, wide, &q);
	criu_ps_decode(data + 1 + hl, wide, &a);
	if (criu_ps_encode(buf, wide, &q) != hl)
		abort();
	criu_ps_decode(buf, wide, &back);
	if (back.cmd != q.cmd || back.nr_pages != q.nr_pages ||
	    back.vaddr != q.vaddr || back.dst_id != q.dst_id)
		abort();
	if (criu_ps_check(&q, &a) == 0) {
		if ((a.cmd & CRIU_PS_CMD_MASK) != CRIU_PS_ADD_F ||
		    a.dst_id != q.dst_id || a.vaddr != q.vaddr ||
		    !a.nr_pages || a.nr_pages > q.nr_pages)
			abort();
	} else if (!fl_last_error()[0] || strchr(fl_last_error(), '\n')) {
		abort();
	}
	return 0;
}
