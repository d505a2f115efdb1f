// SPDX-License-Identifier: Apache-2.0
/*
 * beside.c - `faultline vmm --copy-beside`: prepopulated memory, and while
 * the guest runs another thread copies the whole memory file once
 * (UFFDIO_COPY, 2 MiB at a time, from the mapped page cache) into scratch
 * memory.  What that costs the guest over plain prepopulated memory is
 * this machine's price for a restore's copy beside it (caches, memory
 * bandwidth, a hypervisor below): a restore that copies cannot do better.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "beside.h"
#include "kernel/uffd.h"
#include "util/size.h"
#include "error.h"

#define STEP	(2ULL << 20)

int vmm_beside_open(struct vmm_beside *b, int fd, uint64_t len)
{
	void *src, *dst;
	int ret;

	memset(b, 0, sizeof(*b));
	b->uffd = -1;
	b->len = len;
	src = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
	dst = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	b->src = src == MAP_FAILED ? NULL : src;
	b->dst = dst == MAP_FAILED ? NULL : dst;
	if (!b->src || !b->dst) {
		ret = vmm_fail(-ENOMEM, "--copy-beside: cannot map %s",
			       size_str(len).s);
		goto fail;
	}
	b->uffd = uffd_create(0, NULL);
	if (b->uffd < 0) {
		ret = vmm_fail(b->uffd, "--copy-beside: no userfaultfd: %s",
			       uffd_strerror(b->uffd));
		goto fail;
	}
	ret = uffd_register(b->uffd, (uintptr_t)b->dst, len,
			    UFFDIO_REGISTER_MODE_MISSING, NULL);
	if (ret == 0)
		return 0;
	vmm_fail(ret, "--copy-beside: UFFDIO_REGISTER: %s", strerror(-ret));
fail:
	vmm_beside_close(b);
	return ret;
}

static void *copier(void *arg)
{
	struct vmm_beside *b = arg;

	for (uint64_t off = 0; off < b->len; off += STEP) {
		uint64_t n = b->len - off < STEP ? b->len - off : STEP;

		if (uffd_copy(b->uffd, (uintptr_t)b->dst + off, b->src + off,
			      n, 0, NULL) < 0)
			break;
	}
	return NULL;
}

int vmm_beside_start(struct vmm_beside *b)
{
	int ret = -pthread_create(&b->th, NULL, copier, b);

	b->running = ret == 0;
	return ret;
}

void vmm_beside_close(struct vmm_beside *b)
{
	if (b->running)
		pthread_join(b->th, NULL);
	if (b->uffd >= 0)
		close(b->uffd);
	if (b->src)
		munmap((void *)b->src, b->len);
	if (b->dst)
		munmap(b->dst, b->len);
	memset(b, 0, sizeof(*b));
	b->uffd = -1;
}
