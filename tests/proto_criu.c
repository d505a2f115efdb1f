// SPDX-License-Identifier: Apache-2.0
/*
 * tests/proto_criu.c - CRIU's lazy-pages socket as daemon/proto_criu.c
 * reads it, message by message, against a dump of three tasks (pids 1, 7
 * and 9, task 7 a zombie): each task named as its uffd arrives, before
 * the restore's end; and every way a restorer's stream can be wrong
 * refused with one line saying how.
 *
 * Decision: the protocol's ops alone (no socket, no CRIU), with
 * descriptors of /dev/null standing for uffds (the daemon checks they are
 * uffds when it serves them); tests/criu_lazy runs the real restorer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/proto.h"
#include "faultline.h"
#include "format/criu.h"
#include "source/concat.h"
#include "source/criu_dump.h"
#include "tap.h"

static struct criu_range r1[] = { { 0x400000, 0x2000, 0 },
				  { 0x600000, 0x1000, 0x3000 } };
static struct criu_range r9[] = { { 0x7f0000000000, 0x4000, 0x1000 } };
static struct criu_task tasks[] = {
	{ .pid = 1, .pages_id = 1, .pages_size = 0x4000, .nranges = 2,
	  .ranges = r1 },
	{ .pid = 7, .pages_id = 2 },
	{ .pid = 9, .pages_id = 3, .pages_size = 0x5000, .base = 0x4000,
	  .nranges = 1, .ranges = r9 },
};
static const struct criu_set set = { .ntasks = 3, .tasks = tasks };
/* The set as the daemon has it: a CRIU dump's source (no pages here). */
static struct fl_source *dump;

/* One read's worth: n bytes of b, with a /dev/null fd if fd. */
static int feed(void *st, const void *b, size_t n, int fd)
{
	int f = fd ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;

	return proto_criu.feed(st, b, n, &f, fd ? 1 : 0);
}

static int pid(void *st, int32_t p)
{
	return feed(st, &p, 4, 0);
}

/* A stream that feeds fine up to the last step, which is refused with kw. */
static void refused(const char *name, int (*steps)(void *), const char *kw)
{
	void *st;

	proto_criu.open(&st, 0, dump);
	int ret = steps(st);

	ok(ret < 0 && strstr(fl_last_error(), kw), "%s: refused (%s)", name,
	   ret < 0 ? fl_last_error() : "accepted");
	proto_criu.free(st);
}

static int s_stranger(void *st) { return pid(st, 5); }
static int s_nofd(void *st) { pid(st, 1); return feed(st, "x", 1, 0); }
static int s_loose_fd(void *st) { return feed(st, "", 0, 1); }
static int s_early(void *st)
{
	pid(st, 1);
	feed(st, "x", 1, 1);
	return pid(st, 0x52535446);
}
static int s_twice(void *st)
{
	pid(st, 1);
	feed(st, "x", 1, 1);
	return pid(st, -1);
}
static int s_after(void *st)
{
	pid(st, 1);
	feed(st, "x", 1, 1);
	pid(st, -7);
	pid(st, 9);
	feed(st, "x", 1, 1);
	uint32_t end[2] = { 0x52535446, 0 };

	return feed(st, end, 8, 0);
}
static int s_zero(void *st) { return pid(st, 0); }

/*
 * A connection taken over mid-stream: task 1 named and handed to its
 * session, task 9's pid half read.  What keep() made, restored into a new
 * state, goes on from there: task 1 is not named again, task 9 is client
 * 1, and the end comes after it.
 */
static void kept(void)
{
	struct proto_client c;
	struct proto_keep k = { 0 };
	void *st, *st2;
	int32_t p9 = 9;
	uint32_t end = 0x52535446;

	proto_criu.open(&st, 0, dump);
	pid(st, 1);
	feed(st, "x", 1, 1);
	proto_criu.client(st, 0, &c);
	close(c.uffd);
	pid(st, -7);
	feed(st, &p9, 2, 0);
	ok(proto_criu.keep(st, &k) == 0 && k.len > 0 && k.nfds == 0,
	   "kept mid-stream: a blob, no descriptor");
	proto_criu.open(&st2, 0, dump);
	is_int(proto_criu.restore(st2, k.blob, k.len, k.fds, k.nfds), 0,
	       "restored: more to come");
	is_int(proto_criu.named(st2), 1, "task 1 counted as named");
	is_int(feed(st2, (char *)&p9 + 2, 2, 0), 0, "the pid's other half");
	is_int(feed(st2, "x", 1, 1), 0, "task 9's uffd");
	is_int(feed(st2, &end, 4, 0), 2, "the end: two clients in all");
	ok(proto_criu.client(st2, 1, &c) == 0 && c.pid == 9 && c.uffd >= 0,
	   "client 1 is task 9");
	close(c.uffd);
	ok(proto_criu.restore(st, k.blob, k.len - 1, NULL, 0) < 0,
	   "a kept state of another length: refused (%s)", fl_last_error());
	free(k.blob);
	proto_criu.free(st);
	proto_criu.free(st2);
}

int main(void)
{
	struct proto_client c;
	struct fl_source *none;
	void *st;

	if (!ok(source_concat_open(NULL, 0, "no pages", &none) == 0 &&
		source_criu_over(&set, fl_source_get(none), &dump) == 0,
		"the dump's tasks over no pages: a source"))
		return done_testing();
	ok(proto_criu.open(&st, 0, NULL) < 0, "no dump: refused (%s)",
	   fl_last_error());
	is_int(fl_source_criu_tasks(none), -ENODATA,
	       "a source of no dump has no tasks");
	ok(proto_criu.open(&st, 0, none) < 0, "a source of no dump: refused "
	   "(%s)", fl_last_error());
	fl_source_put(none);
	proto_criu.open(&st, 0, dump);
	is_int(pid(st, 1), 0, "pid 1: more to come");
	is_int(proto_criu.named(st), 0, "not named before its uffd");
	is_int(feed(st, "\1", 1, 1), 0, "its uffd, with one byte");
	is_int(proto_criu.named(st), 1, "task 1 named before the end");
	ok(proto_criu.client(st, 0, &c) == 0 && c.pid == 1 &&
	   c.nregions == 2 && c.regions[1].addr == 0x600000 &&
	   c.regions[1].src_offset == 0x3000 && c.uffd >= 0,
	   "its regions: its lazy ranges at their pages' place");
	close(c.uffd);
	is_int(pid(st, -7), 0, "a zombie: -pid, nothing else");
	/* pid, byte and fd in one read, then the end split in two reads. */
	char buf[5] = { 9, 0, 0, 0, 'x' };
	uint32_t end = 0x52535446;

	is_int(feed(st, buf, 5, 1), 0, "pid and uffd in one read");
	is_int(feed(st, &end, 2, 0), 0, "half the end: more to come");
	is_int(feed(st, (char *)&end + 2, 2, 0), 2, "the end: two clients");
	ok(proto_criu.client(st, 1, &c) == 0 && c.pid == 9 &&
	   c.regions[0].src_offset == 0x4000 + 0x1000,
	   "task 9: its offsets past task 1's pages");
	close(c.uffd);
	proto_criu.free(st);

	refused("a pid not in pstree.img", s_stranger, "not a task of pstree");
	refused("a task's byte without its uffd", s_nofd, "no uffd");
	refused("a descriptor before any task", s_loose_fd, "no task to take");
	refused("the end before every task", s_early, "after 1 of the 3");
	refused("a task sent twice", s_twice, "twice");
	refused("bytes after the end", s_after, "after the end");
	refused("pid 0", s_zero, "not a pid");
	kept();
	fl_source_put(dump);
	return done_testing();
}
