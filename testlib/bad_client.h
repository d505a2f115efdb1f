/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bad_client.h - malformed Firecracker-protocol clients for the `faultline
 * serve` tests (serve_bad's cases, the soak's clients beside its
 * sessions): a handshake from a template, with a real, registered uffd or
 * some other descriptors, then whatever the client does wrong.
 *
 * Decision: the client maps and registers two 4 MiB regions as a VMM
 * would, so only what the case is about is wrong; it runs in a child of
 * its own (su_spawn()), since a client that handed over its uffd and is
 * refused is killed by the daemon, and so that its log lines are told
 * apart by pid.
 */
#ifndef FAULTLINE_BAD_CLIENT_H
#define FAULTLINE_BAD_CLIENT_H

#include <stdint.h>

#include "fc_client.h"

/* What goes with the handshake in SCM_RIGHTS. */
enum bc_fds {
	BC_UFFD,	/* its uffd */
	BC_NONE,	/* nothing */
	BC_TWO,		/* its uffd and /dev/null */
	BC_FORK,	/* a uffd of its own that asks for fork events */
	BC_OTHER,	/* /dev/null, no uffd */
};

/* After the handshake is sent, the client: */
enum bc_then {
	BC_WAIT,	/* waits for the daemon to close the session */
	BC_EOF,		/* shuts its end for writing, then waits */
	BC_GONE,	/* exits at once (its socket, uffd and memory go) */
	BC_UNMAP,	/* unmaps its memory, then waits a little and goes */
};

struct bad_client {
	const char *sock;
	/*
	 * The handshake, its tokens expanded: {A} region 0, {B} region 1
	 * (both {S} = 4 MiB), {A1} = A + 1, {AH} = A + 2 MiB, {F} = file
	 * size, {F2} = twice it, {FH} = F - 2 MiB.  NULL: 10,000 regions.
	 */
	const char *json;
	uint64_t file_size;
	enum bc_fds fds;
	enum bc_then then;
	unsigned int wait_ms;	/* BC_WAIT, BC_EOF: for the daemon's close */
};

/* The handshake's region table, without the brackets: one good region. */
#define BC_REG(addr, size, off) \
	"{\"base_host_virt_addr\":" addr ",\"size\":" size ",\"offset\":" \
	off ",\"page_size\":4096,\"page_size_kib\":4096}"
#define BC_GOOD	BC_REG("{A}", "{S}", "0")

/*
 * A child's main (su_spawn(), arg a struct bad_client): exit 0 if the
 * daemon closed the session (BC_WAIT, BC_EOF) or once it is done (BC_GONE,
 * BC_UNMAP), 1 if the daemon did not close it, 10 and up if it could not
 * even try; killed, if the daemon kills it.
 */
int bad_client_main(void *arg);

#endif
