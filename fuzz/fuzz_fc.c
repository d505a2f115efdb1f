// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_fc.c - the Firecracker handshake parser (daemon/proto_fc.c), fed the
 * message in pieces as a socket delivers it; and the same pieces through
 * its protocol ops (proto.h), the state kept and restored halfway as a
 * takeover does, which must reach the same verdict and regions.
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

#include "daemon/proto.h"
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

/*
 * Piece i of what is left of the message (sizes[i % k] + 1 bytes, or all
 * of it), as a heap copy of exactly its length (*n): reading past a piece
 * is an ASan report.  NULL if out of memory.
 */
static char *piece_of(const uint8_t *sizes, size_t k, size_t i,
		      const uint8_t *msg, size_t left, size_t *n)
{
	char *p;

	*n = k ? sizes[i % k] + 1u : left;
	if (*n > left)
		*n = left;
	p = malloc(*n);
	if (p)
		memcpy(p, msg, *n);
	return p;
}

/*
 * The pieces through proto_fc's ops, kept and restored into a new state
 * after piece `cut` (a takeover), then on to the end.  Must match what the
 * parser alone said (ret, out).
 */
static void through_ops(const uint8_t *sizes, size_t k, const uint8_t *msg,
			size_t len, uint64_t src_size, int want,
			const struct fl_region_desc *out)
{
	const struct proto_ops *o = &proto_fc;
	struct proto_client c;
	struct proto_keep kp;
	void *st = NULL, *st2 = NULL;
	size_t cut = k ? sizes[0] % (k + 1) : 0;
	int ret = 0;

	if (o->open(&st, src_size, NULL) < 0)
		return;
	for (size_t off = 0, i = 0; off < len && ret == 0; i++) {
		size_t n;
		char *piece = piece_of(sizes, k, i, msg + off, len - off, &n);

		if (!piece)
			break;
		ret = o->feed(st, piece, n, NULL, 0);
		free(piece);
		off += n;
		if (i != cut || ret != 0)
			continue;
		if (o->keep(st, &kp) < 0 || o->open(&st2, src_size, NULL) < 0) {
			free(kp.blob);
			o->free(st);
			return;
		}
		ret = o->restore(st2, kp.blob, kp.len, kp.fds, kp.nfds);
		free(kp.blob);
		o->free(st);
		st = st2;
	}
	/* The parser's own verdict: -EAGAIN is "more" (0), n regions is 1. */
	if ((want == -EAGAIN ? 0 : want > 0 ? 1 : want) != ret)
		abort();
	if (ret == 1) {
		if (o->client(st, 0, &c) < 0 || c.nregions != want ||
		    memcmp(c.regions, out, sizeof(*out) * (size_t)want))
			abort();
	}
	o->free(st);
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
		size_t n;
		char *piece = piece_of(sizes, k, i, msg + off, len - off, &n);

		if (!piece)
			break;
		ret = fc_parser_feed(p, piece, n, src_size, out,
				     FC_REGIONS_MAX);
		free(piece);
		off += n;
	}
	if (ret > 0)
		check(out, ret, src_size);
	fc_parser_free(p);
	through_ops(sizes, k, msg, len, src_size, ret, out);
	return 0;
}
