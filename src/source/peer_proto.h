/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer_proto.h - the live post-copy wire protocol between `faultline send`
 * (src/send/send.c, the host that has the memory file) and the tcp://
 * source (peer.c, the host that restores from it).  It lives with the
 * receiver, a source like the others, and the sender, above the sources,
 * includes it from here.
 *
 * The file is cut into blocks of block_size bytes (the last may be short).
 * A receiver holds two TCP connections to the sender, so that the pages a
 * guest is waiting for never queue behind the bulk stream (QEMU's
 * postcopy-preempt idea):
 *
 *   demand  receiver: HELLO(role DEMAND)   sender: WELCOME
 *           receiver: REQ ...              sender: DATA / ERROR ...
 *   stream  receiver: HELLO(role STREAM) + bitmap of the blocks it has
 *           sender:   WELCOME, then DATA for every block not in the bitmap
 *                     and not yet sent on demand, in file order from the
 *                     last demanded block (wrapping), then DONE.
 *
 * The demand connection is opened first; its WELCOME tells the receiver the
 * file size, block size and file identity.  Both HELLOs carry the receiver's
 * random token, which pairs the two connections into one session on the
 * sender.  After a dropped connection the receiver opens both again (same
 * token) and its stream HELLO's bitmap says which blocks it already has:
 * those are never sent again.  A demand for a block the stream already sent
 * in this session is answered anyway (the stream copy may still be in
 * flight); the receiver keeps the first copy and drops the other.
 *
 * File identity (file_id): a 64-bit digest of the sender's file (st_dev,
 * st_ino, st_size, st_mtim) taken when `faultline send` starts, never 0.
 * The receiver records it from its first WELCOME and sends it in every
 * later HELLO (0 before it knows it).  The sender re-checks the file with
 * fstat before serving each session and after reading each block: if the
 * file changed since the sender started, or a HELLO names another file_id,
 * it refuses (ERROR with PEER_F_CHANGED) instead of serving.  A receiver
 * that sees another file_id, or PEER_F_CHANGED, stops using the sender for
 * good: blocks it holds stay valid, the others fail with -EIO.  So one
 * receiver never mixes two snapshots, whether the sender restarted on
 * another file or the file was rewritten under it.  (Undetectable: a
 * rewrite that keeps st_mtim, which the kernel updates before it changes
 * any byte, within the same timestamp tick as the sender's start.)
 *
 * End of a session: once the receiver holds every block and has seen DONE
 * it sends HAVE_ALL on the stream connection and closes.  Only then does
 * the sender count the session complete (`send --once` exits on it).
 *
 * Every message is a 24-byte header, little-endian, then len payload bytes:
 *
 *   type  u16   PEER_*
 *   flags u16   PEER_F_*
 *   len   u32   payload bytes that follow (at most block_size, or the
 *               bitmap for a STREAM hello)
 *   a     u64   type-specific (block index)
 *   b     u64   type-specific (block count)
 *
 *   HELLO    (r->s) payload struct peer_hello (+ bitmap for STREAM: bit i of
 *            byte i/8 set = block i is held; ceil(nblocks/8) bytes)
 *   WELCOME  (s->r) payload struct peer_hello: the sender's size, block
 *            size and file_id
 *   REQ      (r->s) a = first block, b = count
 *   DATA     (s->r) a = block, len = its bytes; PEER_F_ZERO: all zero, len 0
 *   ERROR    (s->r) a = first block, b = count (0: the whole session), the
 *            payload a one-line reason; those blocks cannot be produced.
 *            PEER_F_CHANGED: the sender's file is not the one the receiver
 *            started from (b is 0)
 *   DONE     (s->r) the stream has sent every block
 *   HAVE_ALL (r->s, stream) the receiver holds every block; it closes next
 *
 * Version 2 added file_id (peer_hello grew from 32 to 40 bytes), HAVE_ALL
 * and PEER_F_CHANGED; the two ends must run the same version.
 */
#ifndef FAULTLINE_SOURCE_PEER_PROTO_H
#define FAULTLINE_SOURCE_PEER_PROTO_H

#include <stdint.h>

#define PEER_MAGIC	0x43504c46u	/* "FLPC" little-endian */
#define PEER_VERSION	2

enum peer_type {
	PEER_HELLO = 1,
	PEER_WELCOME,
	PEER_REQ,
	PEER_DATA,
	PEER_ERROR,
	PEER_DONE,
	PEER_HAVE_ALL,
};

enum peer_role {
	PEER_ROLE_DEMAND = 1,
	PEER_ROLE_STREAM,
};

#define PEER_F_ZERO	(1u << 0)	/* DATA: all zero */
#define PEER_F_CHANGED	(1u << 1)	/* ERROR: the sender's file changed */

#define PEER_MIN_BLOCK	4096u
#define PEER_MAX_BLOCK	(2u << 20)
#define PEER_DEF_BLOCK	(64u << 10)
/*
 * A receiver keeps 6 bytes per block: it accepts at most 2^27 blocks (768
 * MiB of state; 8 TiB in 64 KiB blocks) and 2^47 bytes (the user address
 * space), so a sender cannot make it allocate without bound.
 */
#define PEER_MAX_BLOCKS	(1ull << 27)
#define PEER_MAX_SIZE	(1ull << 47)
#define PEER_MAX_ERRMSG	200

struct peer_hdr {
	uint16_t type;
	uint16_t flags;
	uint32_t len;
	uint64_t a;
	uint64_t b;
} __attribute__((packed));

struct peer_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t role;
	uint64_t token;
	uint64_t size;		/* 0 in a DEMAND hello: not known yet */
	uint32_t block_size;
	uint32_t reserved;
	uint64_t file_id;	/* 0 in a first DEMAND hello: not known yet */
} __attribute__((packed));

_Static_assert(sizeof(struct peer_hdr) == 24, "peer_hdr is 24 bytes");
_Static_assert(sizeof(struct peer_hello) == 40, "peer_hello is 40 bytes");

/* What a tcp:// source has done so far (tests, logs). */
struct peer_stats {
	uint64_t size, block_size, nblocks;
	uint64_t blocks_have;		/* received so far */
	uint64_t blocks_demand;		/* first received on the demand link */
	uint64_t blocks_stream;		/* first received on the stream */
	uint64_t dups;			/* copies dropped: already held */
	uint64_t requests;		/* REQ messages sent */
	uint64_t bytes_received;	/* payload bytes, duplicates included */
	uint64_t connects;		/* sessions opened (1 + reconnects) */
	uint64_t complete_ns;		/* CLOCK_MONOTONIC when all were held */
	int dead;			/* gave up: the sender is gone */
	int changed;			/* gave up: the sender's file changed */
};


struct fl_source;
/* Fill *out for a source opened from tcp://; -EINVAL for any other. */
int source_peer_stats(struct fl_source *s, struct peer_stats *out);

#endif
