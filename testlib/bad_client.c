// SPDX-License-Identifier: Apache-2.0
/*
 * bad_client.c - malformed Firecracker-protocol clients (bad_client.h
 * says what and why).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "bad_client.h"
#include "kernel/uffd.h"
#include "serve_util.h"

#define MIB	(1ULL << 20)

/* Expand the {X} tokens of t into out. */
static void expand(const char *t, char *out, size_t len,
		   const struct fc_client *c, uint64_t fsize)
{
	uint64_t a = (uintptr_t)c->regions[0].addr;
	uint64_t b = (uintptr_t)c->regions[1].addr;
	const struct { const char *tok; uint64_t v; } tab[] = {
		{ "{A}", a }, { "{B}", b }, { "{S}", 4 * MIB },
		{ "{A1}", a + 1 }, { "{AH}", a + 2 * MIB },
		{ "{F}", fsize }, { "{F2}", 2 * fsize },
		{ "{FH}", fsize - 2 * MIB },
	};
	size_t n = 0;

	while (*t && n + 24 < len) {
		size_t i, k = sizeof(tab) / sizeof(*tab);

		for (i = 0; i < k; i++)
			if (!strncmp(t, tab[i].tok, strlen(tab[i].tok)))
				break;
		if (i < k) {
			n += (size_t)snprintf(out + n, len - n, "%llu",
					      (unsigned long long)tab[i].v);
			t += strlen(tab[i].tok);
		} else {
			out[n++] = *t++;
		}
	}
	out[n] = 0;
}

/* 10000 well-formed 4 KiB regions: more than any VM has. */
static char *huge_count_json(const struct fc_client *c)
{
	const int n = 10000;
	size_t len = (size_t)n * 140 + 8, o = 0;
	char *j = malloc(len);
	uint64_t a = (uintptr_t)c->regions[0].addr;

	o += (size_t)snprintf(j + o, len - o, "[");
	for (int i = 0; i < n; i++)
		o += (size_t)snprintf(j + o, len - o,
			"%s{\"base_host_virt_addr\":%llu,\"size\":4096,"
			"\"offset\":%d,\"page_size\":4096,"
			"\"page_size_kib\":4096}", i ? "," : "",
			(unsigned long long)(a + (uint64_t)(i % 1024) * 4096),
			(i % 1024) * 4096);
	snprintf(j + o, len - o, "]");
	return j;
}

/* The descriptors the case sends, in fds: how many, or -1. */
static int case_fds(const struct bad_client *bc, const struct fc_client *c,
		    int fds[2])
{
	uint64_t feat;
	int n = 0;

	if (bc->fds == BC_UFFD || bc->fds == BC_TWO)
		fds[n++] = c->uffd;
	if (bc->fds == BC_TWO || bc->fds == BC_OTHER)
		fds[n++] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (bc->fds == BC_FORK) {
		fds[n] = uffd_open(O_CLOEXEC);
		if (fds[n] < 0 || uffd_api(fds[n], UFFD_FEATURE_EVENT_FORK,
					   &feat, NULL) < 0)
			return -1;
		n++;
	}
	return n;
}

int bad_client_main(void *arg)
{
	const struct bad_client *bc = arg;
	uint64_t sizes[2] = { 4 * MIB, 4 * MIB };
	struct fc_client c;
	char json[4096];
	char *big = NULL;
	int fds[2], nfds, ret, sock;

	if (fc_client_map(&c, 2, sizes, FC_PAGE_4K))
		return 10;
	if (bc->json)
		expand(bc->json, json, sizeof(json), &c, bc->file_size);
	else
		big = huge_count_json(&c);
	nfds = case_fds(bc, &c, fds);
	if (nfds < 0)
		return 12;
	sock = fc_connect_unix(bc->sock);
	if (sock < 0)
		return 11;
	/* A daemon that stops reading must not block us forever. */
	setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO,
		   &(struct timeval){ .tv_sec = 3 }, sizeof(struct timeval));
	ret = fc_send_handshake(sock, big ? big : json, fds, nfds);
	if (ret < 0 && ret != -EPIPE && ret != -ECONNRESET &&
	    ret != -EAGAIN)
		diag("bad client: sendmsg: %s", strerror(-ret));
	free(big);
	switch (bc->then) {
	case BC_GONE:
		_exit(0);
	case BC_UNMAP:
		for (int i = 0; i < c.nregions; i++)
			munmap(c.regions[i].addr, c.regions[i].size);
		su_sleep_ms(50);	/* the daemon may be filling it */
		return 0;
	case BC_EOF:
		shutdown(sock, SHUT_WR);
		break;
	case BC_WAIT:
		break;
	}
	return su_closed_by_daemon(sock, bc->wait_ms) ? 0 : 1;
}
