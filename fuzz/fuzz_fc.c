// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_fc.c - the Firecracker handshake parser (daemon/proto_fc.c), fed the
 * message in pieces as a socket delivers it.
 *
 * Input: byte 0 says how many piece sizes follow (low 3 bits; 0: the
 * message in one piece) and the memory file's size (bits 3-4); then those
 * sizes, one byte each (size - 1), used in turn; then the message.
 * Decision: the input cuts the pieces, not a random generator, so that a
 * crash reproduces; each piece is a heap copy of exactly its length, so
 * that reading past a piece is an ASan report, not the next piece's bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/proto_fc.h"

static const uint64_t src_sizes[4] = {
	1ull << 30, 4096, 1ull << 47, UINT64_MAX
};

/* What an accepted handshake promises the daemon (parse_region). */
static void check(const struct fl_region_desc *d, int n, uint64_t src_size)
{
	for (int i = 0; i < n; i++) {
		if (!d[i].len || d[i].len % d[i].page_size ||
		    d[i].addr % d[i].page_size || d[i].src_offset % 4096 ||
		    d[i].src_offset > src_size ||
		    d[i].len > src_size - d[i].src_offset)
			abort();
		for (int j = 0; j < i; j++)
			if (d[i].addr < d[j].addr + d[j].len &&
			    d[j].addr < d[i].addr + d[i].len)
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fl_region_desc out[FC_REGIONS_MAX];
	struct fc_parser *p;
	int ret = -EAGAIN;

	if (!size || size < 1u + (data[0] & 7))
		return 0;
	size_t k = data[0] & 7, len = size - 1 - k;
	uint64_t src_size = src_sizes[(data[0] >> 3) & 3];
	const uint8_t *sizes = data + 1, *msg = data + 1 + k;

	if (fc_parser_new(&p) < 0)
		return 0;
	for (size_t off = 0, i = 0; off < len && ret == -EAGAIN; i++) {
		size_t n = k ? sizes[i % k] + 1u : len;
		char *piece;

		if (n > len - off)
			n = len - off;
		piece = malloc(n);
		if (!piece)
			break;
		memcpy(piece, msg + off, n);
		ret = fc_parser_feed(p, piece, n, src_size, out,
				     FC_REGIONS_MAX);
		free(piece);
		off += n;
	}
	if (ret > 0)
		check(out, ret, src_size);
	fc_parser_free(p);
	return 0;
}
