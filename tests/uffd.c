// SPDX-License-Identifier: Apache-2.0
/*
 * uffd.c - the kernel layer against the real kernel: feature query, the
 * second-API rule, COPY with partial progress stopped by EEXIST, ZEROPAGE,
 * MOVE of a contiguous run, POISON (SIGBUS), WAKE, and EAGAIN while a
 * REMOVE event is pending.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>

#include "tap.h"
#include "kernel/uffd.h"
#include "util.h"

static void *do_madvise(void *p)
{
	madvise(p, PAGE, MADV_DONTNEED);
	return NULL;
}

static sigjmp_buf jb;

static void on_bus(int sig)
{
	(void)sig;
	siglongjmp(jb, 1);
}

/* Does reading p raise SIGBUS? */
static int raises_sigbus(const volatile uint8_t *p)
{
	signal(SIGBUS, on_bus);
	if (sigsetjmp(jb, 1) == 0) {
		(void)*p;
		return 0;
	}
	return 1;
}

int main(void)
{
	struct uffd_caps caps;
	uint64_t feat, done;
	static uint8_t src[16 * PAGE] __attribute__((aligned(4096)));

	int qret = uffd_query(&caps);

	ok(qret == 0, "query via %s", qret ? "-" : caps.open_via);
	ok(caps.features & UFFD_FEATURE_MOVE, "kernel reports MOVE");
	ok(caps.range_ioctls & (1ull << _UFFDIO_COPY), "COPY on anon ranges");

	int fd = uffd_create(UFFD_WANT_FEATURES, &feat);

	ok(fd >= 0, "uffd created");
	ok(uffd_api(fd, 0, NULL, NULL) == -EINVAL, "second UFFDIO_API is EINVAL");

	uint8_t *mem = map_anon(64 * PAGE, 0);

	ok(uffd_register(fd, (uintptr_t)mem, 64 * PAGE,
			 UFFDIO_REGISTER_MODE_MISSING, NULL) == 0, "register");
	memset(src, 0x5a, sizeof(src));

	/* Page 3 populated first: a 8-page COPY stops there with EEXIST. */
	ok(uffd_copy(fd, (uintptr_t)mem + 3 * PAGE, src, PAGE, 0, &done) == 0 &&
	   done == PAGE, "single page COPY");
	int ret = uffd_copy(fd, (uintptr_t)mem, src, 8 * PAGE, 0, &done);

	ok(ret == -EEXIST && done == 3 * PAGE,
	   "COPY over a present page: -EEXIST after 3 pages (%d, %llu)", ret,
	   (unsigned long long)done);
	ok(mem[0] == 0x5a && mem[2 * PAGE] == 0x5a, "pages before it copied");

	ok(uffd_zeropage(fd, (uintptr_t)mem + 8 * PAGE, 4 * PAGE, 0, &done) == 0 &&
	   done == 4 * PAGE && is_zero_mem(mem + 8 * PAGE, 4 * PAGE), "ZEROPAGE");

	/* MOVE a contiguous run of 8 present pages in one ioctl. */
	uint8_t *from = map_anon(8 * PAGE, 0);

	memset(from, 0x77, 8 * PAGE);
	ret = uffd_move(fd, (uintptr_t)mem + 16 * PAGE, (uintptr_t)from,
			8 * PAGE, 0, &done);
	ok(ret == 0 && done == 8 * PAGE && mem[16 * PAGE] == 0x77 &&
	   mem[24 * PAGE - 1] == 0x77, "MOVE of an 8-page run (%d)", ret);

	/* POISON: the next access raises SIGBUS. */
	ret = uffd_poison(fd, (uintptr_t)mem + 30 * PAGE, PAGE, 0, &done);
	ok(ret == 0, "POISON (%d)", ret);
	ok(raises_sigbus(mem + 30 * PAGE), "poisoned page raises SIGBUS");

	/* EAGAIN: a REMOVE event pending (the madvise thread waits on it). */
	pthread_t th;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	pthread_create(&th, NULL, do_madvise, mem + 40 * PAGE);
	poll(&p, 1, 5000);
	ret = uffd_copy(fd, (uintptr_t)mem + 41 * PAGE, src, PAGE, 0, &done);
	ok(ret == -EAGAIN && done == 0, "COPY while REMOVE pending: -EAGAIN (%d)", ret);
	struct uffd_msg m;

	ok(uffd_read(fd, &m, 1) == 1 && m.event == UFFD_EVENT_REMOVE,
	   "the pending message is the REMOVE");
	pthread_join(th, NULL);
	ok(uffd_copy(fd, (uintptr_t)mem + 41 * PAGE, src, PAGE, 0, &done) == 0,
	   "COPY succeeds once the event is read");
	ok(uffd_read(fd, &m, 1) == 0, "nothing else pending");
	ok(uffd_wake(fd, (uintptr_t)mem, PAGE) == 0, "WAKE of a range");
	ok(uffd_unregister(fd, (uintptr_t)mem, 64 * PAGE) == 0, "unregister");
	ok(uffd_copy(fd, (uintptr_t)mem + 50 * PAGE, src, PAGE, 0, &done) == -ENOENT,
	   "COPY into an unregistered range: -ENOENT");
	close(fd);
	return done_testing();
}
