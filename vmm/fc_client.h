/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fc_client.h - a UFFD client that behaves exactly as Firecracker does.
 *
 * Used by `faultline vmm`, the benchmarks and the daemon tests: map the
 * guest regions private and anonymous (hugetlb for 2 MiB pages), create a
 * uffd asking only for UFFD_FEATURE_EVENT_REMOVE, register every region
 * MISSING only, connect a Unix stream socket and send ONE message: the JSON
 * array describing the regions with the uffd in SCM_RIGHTS.  The socket then
 * stays open for the life of the "VM", as Firecracker keeps it.
 *
 * Every function returns 0 (or a count) on success and -errno on failure.
 */
#ifndef FAULTLINE_FC_CLIENT_H
#define FAULTLINE_FC_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#define FC_MAX_REGIONS	64
#define FC_PAGE_4K	4096ULL
#define FC_PAGE_2M	(2ULL << 20)

struct fc_region {
	void *addr;		/* host virtual address of the mapping */
	uint64_t size;		/* bytes, a multiple of page_size */
	uint64_t offset;	/* where the region's data starts in the file */
	uint64_t page_size;	/* 4096 or 2 MiB (hugetlb) */
};

struct fc_client {
	int nregions;
	struct fc_region regions[FC_MAX_REGIONS];
	int uffd;		/* -1 until fc_client_map() */
	int sock;		/* -1 until fc_client_connect() */
	uint64_t features;	/* what UFFDIO_API granted */
};

/* Reset to the empty state (no mappings, fds -1); map() does it too. */
void fc_client_init(struct fc_client *c);

/*
 * Map nregions regions of sizes[i] bytes with page_size pages (4096, or
 * 2 MiB for MAP_HUGETLB|MAP_HUGE_2MB), create the uffd and register each
 * region MISSING.  Offsets are consecutive from 0, as in Firecracker's
 * memory file; fc_client_map_at() takes them explicitly (offsets may be
 * NULL).  On failure nothing stays mapped or open.
 */
int fc_client_map(struct fc_client *c, int nregions, const uint64_t *sizes,
		  uint64_t page_size);
int fc_client_map_at(struct fc_client *c, int nregions, const uint64_t *sizes,
		     const uint64_t *offsets, uint64_t page_size);

/* Write the handshake JSON for c's regions into buf; returns its length. */
int fc_client_json(const struct fc_client *c, char *buf, size_t len);

/* Connect a SOCK_STREAM Unix socket to path; returns the fd. */
int fc_connect_unix(const char *path);

/*
 * Connect to sock_path and send the handshake (one sendmsg, the uffd in
 * SCM_RIGHTS).  The socket stays open in c->sock.
 */
int fc_client_connect(struct fc_client *c, const char *sock_path);
/* fc_client_connect(), retried while nobody listens yet (up to timeout_ms). */
int fc_client_connect_wait(struct fc_client *c, const char *sock_path,
			   int timeout_ms);

/*
 * Send one handshake message as Firecracker does: json (its strlen bytes,
 * no terminator) with nfds descriptors in SCM_RIGHTS (nfds may be 0).
 * One sendmsg, MSG_NOSIGNAL; returns the bytes sent.  For malformed
 * handshakes in tests.
 */
int fc_send_handshake(int sock, const char *json, const int *fds, int nfds);

/*
 * Close the socket and the uffd and unmap every region, at once, as a VMM
 * that exits (or crashes) does.
 */
void fc_client_close(struct fc_client *c);

/*
 * End the session for a client that will map new memory at the same
 * addresses: shut the socket for writing, wait (up to timeout_ms) for the
 * server's EOF, which says it will touch this memory no more, then close
 * as fc_client_close() does.  0, or -ETIMEDOUT (closed anyway).
 */
int fc_client_end(struct fc_client *c, int timeout_ms);

#endif
