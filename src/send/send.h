/* SPDX-License-Identifier: Apache-2.0 */
/*
 * send.h - the live post-copy sender (send.c), which `faultline send`
 * runs: internal to the library, not in faultline.h.  A floor of its own
 * above the sources: it serves them (src/source/peer.c) and is none.
 */
#ifndef FAULTLINE_SEND_SEND_H
#define FAULTLINE_SEND_SEND_H

#include <stdbool.h>
#include <stdint.h>

struct send_config {
	const char *listen;	/* ADDR:PORT ([v6]:PORT); ADDR may be empty */
	const char *mem_file;
	uint32_t block_size;	/* 0: PEER_DEF_BLOCK */
	bool once;		/* exit once a receiver confirms it holds every block */
	/* Each line the sender says (sessions, refusals), or NULL: none. */
	void (*note)(void *arg, const char *line);
	void *note_arg;
};

/* Serve receivers until SIGTERM/SIGINT (or --once): 0 or -errno. */
int send_run(const struct send_config *c);

#endif
