// SPDX-License-Identifier: Apache-2.0
/*
 * engine_source_error.c - a source that cannot produce pages (its file
 * truncated under the engine), in-process with on_error poison: the
 * faulting thread gets SIGBUS, also when the failing chunk crosses a VMA's
 * end (the kernel refuses a POISON across it: page by page then), and the
 * engine keeps serving every other page; a sparse file (holes read as
 * zeros) cut short is not taken for one whose end is a hole: its lost
 * pages are poisoned, never served as zeros.
 *
 * Decision: each case runs in a forked child with an alarm, so a thread
 * left asleep fails the test instead of hanging the run.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faultline.h"
#include "tap.h"
#include "util.h"

#define SEED	0x5e5e
#define LEN	(8ull << 20)
#define END	(LEN / 2 + 4 * PAGE)	/* the file truncated mid-chunk */

static sigjmp_buf bus_jmp;

static void on_bus(int sig)
{
	(void)sig;
	siglongjmp(bus_jmp, 1);
}

/* 1 if reading p raises SIGBUS, 0 if it reads. */
static int bus_on_read(const volatile uint8_t *p)
{
	if (sigsetjmp(bus_jmp, 1))
		return 1;
	(void)*p;
	return 0;
}

/*
 * Child: the file truncated 16 KiB into a chunk of its second half, a VMA
 * boundary 32 KiB
 * into a 64 KiB chunk of it; exit 0 if that chunk's fault gets SIGBUS and
 * the first half is still served right.
 */
static int child(const char *path, bool split)
{
	struct fl_engine_opts o = {
		.uffd = -1, .on_error = FL_ON_ERROR_POISON,
		.flags = FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND,
	};
	struct fl_source *src;
	struct fl_engine *e;
	uint8_t *mem = map_anon(LEN, 0);
	struct fl_region_desc d = { .addr = (uintptr_t)mem, .len = LEN,
				    .page_size = PAGE,
				    .flags = FL_REGION_REGISTER };

	alarm(10);
	signal(SIGBUS, on_bus);
	if (fl_source_open(path, &src) || truncate(path, END) ||
	    fl_engine_create(&o, &e) || fl_engine_add_region(e, &d, src))
		return 10;
	if (split)	/* two VMAs from here: a mprotect would do the same */
		madvise(mem + (6 << 20) + (32 << 10), 2 << 20, MADV_HUGEPAGE);
	if (fl_engine_start(e, 1))
		return 11;
	if (!bus_on_read(mem + (6 << 20)))
		return 1;	/* read data that is not there */
	if (!bus_on_read(mem + (6 << 20) + (40 << 10)))
		return 2;	/* the other VMA's page of the chunk */
	if (!same_as_file(mem, 1 << 20, 0, SEED, 0))
		return 3;	/* the engine stopped serving */
	/* The chunk the file ends in: its pages before the end are data. */
	if (!same_as_file(mem + LEN / 2, 4 * PAGE, LEN / 2, SEED, 0))
		return 4;
	if (!bus_on_read(mem + END))
		return 5;
	fl_engine_destroy(e);
	return 0;
}

static void run(const char *name, bool split, bool sparse)
{
	char *path = make_snapshot(LEN, SEED, NULL, 0);
	pid_t pid;
	int st = -1;

	if (sparse) {	/* a hole in [1 MiB, 2 MiB): the file is sparse */
		int fd = open(path, O_RDWR);

		if (fd < 0 || fallocate(fd, FALLOC_FL_PUNCH_HOLE |
					FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20))
			BAIL("cannot punch a hole in %s", path);
		close(fd);
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(child(path, split));
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "%s: SIGBUS on the unreadable pages, the rest still served "
	   "(status 0x%x: 1/2/5 no SIGBUS, 3 engine gone, 4 readable pages "
	   "failed with their chunk, SIGALRM a thread left asleep)", name,
	   st);
	drop_snapshot(path);
}

int main(void)
{
	run("a chunk in one VMA", false, false);
	run("a chunk across two VMAs", true, false);
	run("a sparse file cut short", false, true);
	return done_testing();
}
