/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proto_fc.h - Firecracker's UFFD handshake: the JSON array of regions that
 * arrives with the uffd, parsed incrementally (the socket is never closed,
 * so the array's own end is the end of the message) and validated field by
 * field against the memory file.
 */
#ifndef FAULTLINE_PROTO_FC_H
#define FAULTLINE_PROTO_FC_H

#include <stddef.h>
#include <stdint.h>

#include "faultline.h"

#define FC_HANDSHAKE_MAX	(64 << 10)	/* bytes */
#define FC_REGIONS_MAX		256

struct fc_parser;

int fc_parser_new(struct fc_parser **out);
void fc_parser_free(struct fc_parser *p);

/*
 * Feed len more bytes.  Returns -EAGAIN while the array is incomplete, the
 * number of regions (written to out[0..max)) once it is complete and valid,
 * or -EINVAL / -E2BIG with a one-line message (fl_last_error()) naming the
 * region, field and value at fault.  src_size bounds offset + size.
 */
int fc_parser_feed(struct fc_parser *p, const char *buf, size_t len,
		   uint64_t src_size, struct fl_region_desc *out, int max);

#endif
