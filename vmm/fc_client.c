// SPDX-License-Identifier: Apache-2.0
/*
 * fc_client.c - the Firecracker side of the UFFD handshake, for
 * `faultline vmm`, `faultline bench` and the tests.
 *
 * Decision: copy Firecracker (v1.12, src/vmm/src/persist.rs) literally, not
 * what would be convenient for faultline: the same mmap flags, a uffd that
 * asks only for EVENT_REMOVE, MISSING-only registration, and the compact
 * serde_json text sent in a single sendmsg with no length prefix or
 * terminator.  The daemon must cope with exactly this.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fc_client.h"
#include "kernel/uffd.h"
#include "util/sock.h"

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT	26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB	(21 << MAP_HUGE_SHIFT)
#endif

#define FC_MAX_FDS	16

void fc_client_init(struct fc_client *c)
{
	memset(c, 0, sizeof(*c));
	c->uffd = -1;
	c->sock = -1;
}

static void unmap_all(struct fc_client *c)
{
	for (int i = 0; i < c->nregions; i++)
		if (c->regions[i].addr)
			munmap(c->regions[i].addr, c->regions[i].size);
	c->nregions = 0;
}

int fc_client_map_at(struct fc_client *c, int nregions, const uint64_t *sizes,
		     const uint64_t *offsets, uint64_t page_size)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
	uint64_t off = 0;
	int ret;

	fc_client_init(c);
	if (nregions < 1 || nregions > FC_MAX_REGIONS)
		return -EINVAL;
	if (page_size == FC_PAGE_2M)
		flags |= MAP_HUGETLB | MAP_HUGE_2MB;
	else if (page_size != FC_PAGE_4K)
		return -EINVAL;

	for (int i = 0; i < nregions; i++) {
		struct fc_region *r = &c->regions[i];
		void *p;

		if (!sizes[i] || sizes[i] % page_size) {
			ret = -EINVAL;
			goto fail;
		}
		p = mmap(NULL, sizes[i], PROT_READ | PROT_WRITE, flags, -1, 0);
		if (p == MAP_FAILED) {
			ret = -errno;
			goto fail;
		}
		r->addr = p;
		r->size = sizes[i];
		r->page_size = page_size;
		r->offset = offsets ? offsets[i] : off;
		off += sizes[i];
		c->nregions = i + 1;
	}

	/*
	 * Firecracker's UffdBuilder: close_on_exec, non_blocking, and not
	 * user_mode_only (vCPU faults come from KVM, in the kernel).
	 */
	ret = uffd_open(O_CLOEXEC | O_NONBLOCK);
	if (ret < 0)
		goto fail;
	c->uffd = ret;
	ret = uffd_api(c->uffd, UFFD_FEATURE_EVENT_REMOVE, &c->features, NULL);
	if (ret < 0)
		goto fail;
	for (int i = 0; i < c->nregions; i++) {
		ret = uffd_register(c->uffd, (uintptr_t)c->regions[i].addr,
				    c->regions[i].size,
				    UFFDIO_REGISTER_MODE_MISSING, NULL);
		if (ret < 0)
			goto fail;
	}
	return 0;
fail:
	if (c->uffd >= 0)
		close(c->uffd);
	c->uffd = -1;
	unmap_all(c);
	return ret;
}

int fc_client_map(struct fc_client *c, int nregions, const uint64_t *sizes,
		  uint64_t page_size)
{
	return fc_client_map_at(c, nregions, sizes, NULL, page_size);
}

int fc_client_json(const struct fc_client *c, char *buf, size_t len)
{
	size_t n = 0;
	int w;

	w = snprintf(buf, len, "[");
	if (w < 0 || (size_t)w >= len)
		return -ENOSPC;
	n += (size_t)w;
	for (int i = 0; i < c->nregions; i++) {
		const struct fc_region *r = &c->regions[i];

		/* serde_json's compact form, fields in struct order. */
		w = snprintf(buf + n, len - n,
			     "%s{\"base_host_virt_addr\":%llu,\"size\":%llu,"
			     "\"offset\":%llu,\"page_size\":%llu,"
			     "\"page_size_kib\":%llu}",
			     i ? "," : "",
			     (unsigned long long)(uintptr_t)r->addr,
			     (unsigned long long)r->size,
			     (unsigned long long)r->offset,
			     (unsigned long long)r->page_size,
			     (unsigned long long)r->page_size);
		if (w < 0 || (size_t)w >= len - n)
			return -ENOSPC;
		n += (size_t)w;
	}
	w = snprintf(buf + n, len - n, "]");
	if (w < 0 || (size_t)w >= len - n)
		return -ENOSPC;
	return (int)(n + (size_t)w);
}

int fc_connect_unix(const char *path)
{
	return sock_connect_unix(path);
}

int fc_send_handshake(int sock, const char *json, const int *fds, int nfds)
{
	size_t len = strlen(json);
	int ret;

	if (nfds < 0 || nfds > FC_MAX_FDS || !len)
		return -EINVAL;
	ret = sock_send_fds(sock, json, len, fds, nfds);
	return ret < 0 ? ret : (int)len;
}

int fc_client_connect(struct fc_client *c, const char *sock_path)
{
	char json[FC_MAX_REGIONS * 160 + 8];
	int ret, sock;

	if (c->uffd < 0 || c->nregions < 1)
		return -EINVAL;
	ret = fc_client_json(c, json, sizeof(json));
	if (ret < 0)
		return ret;
	sock = fc_connect_unix(sock_path);
	if (sock < 0)
		return sock;
	ret = fc_send_handshake(sock, json, &c->uffd, 1);
	if (ret >= 0 && (size_t)ret != strlen(json))
		ret = -EMSGSIZE;	/* short send: Firecracker fails */
	if (ret < 0) {
		close(sock);
		return ret;
	}
	c->sock = sock;
	return 0;
}

void fc_client_close(struct fc_client *c)
{
	if (c->sock >= 0)
		close(c->sock);
	if (c->uffd >= 0)
		close(c->uffd);
	c->sock = -1;
	c->uffd = -1;
	unmap_all(c);
}

int fc_client_end(struct fc_client *c, int timeout_ms)
{
	char b[64];
	int ret = 0;

	if (c->sock >= 0 && shutdown(c->sock, SHUT_WR) == 0) {
		struct pollfd p = { .fd = c->sock, .events = POLLIN };

		for (;;) {
			int n = poll(&p, 1, timeout_ms);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				ret = n < 0 ? -errno : -ETIMEDOUT;
				break;
			}
			ssize_t r = recv(c->sock, b, sizeof(b), MSG_DONTWAIT);

			if (r == 0 || (r < 0 && errno != EAGAIN &&
				       errno != EINTR))
				break;	/* EOF (or reset): the server is done */
		}
	}
	fc_client_close(c);
	return ret;
}

int fc_client_connect_wait(struct fc_client *c, const char *sock_path,
			   int timeout_ms)
{
	int ret;

	for (int waited = 0;; waited += 10) {
		ret = fc_client_connect(c, sock_path);
		if ((ret != -ENOENT && ret != -ECONNREFUSED) ||
		    waited >= timeout_ms)
			return ret;
		usleep(10000);
	}
}
