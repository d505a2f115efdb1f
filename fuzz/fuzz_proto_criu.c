// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_proto_criu.c - CRIU's lazy-pages socket as the daemon reads it
 * (daemon/proto_criu.c), fed in pieces as a socket delivers them, against
 * a dump of three tasks (pids 1, 7 and 9; task 7 without memory).
 *
 * Input: each piece is a header byte then its bytes: the header's low 6
 * bits + 1 are the piece's length (cut at the input's end), bit 6 says a
 * descriptor comes with it (a dup of /dev/null, as a uffd would).
 * Decision: the input cuts the pieces and places the descriptors, so that
 * a crash reproduces; besides the sanitizers, every client named is
 * checked against the dump (a task's ranges at its pages' base, each
 * task once) and no descriptor may leak (counted after free()).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/proto.h"
#include "format/criu.h"
#include "source/concat.h"
#include "source/criu_dump.h"

static struct criu_range r1[] = { { 0x400000, 0x2000, 0 },
				  { 0x600000, 0x1000, 0x3000 } };
static struct criu_range r9[] = { { 0x7f0000000000, 0x4000, 0x1000 } };
static struct criu_task tasks[] = {
	{ .pid = 1, .pages_id = 1, .pages_size = 0x4000, .base = 0,
	  .nranges = 2, .ranges = r1, .lazy_bytes = 0x3000 },
	{ .pid = 7, .pages_id = 2 },
	{ .pid = 9, .pages_id = 3, .pages_size = 0x5000, .base = 0x4000,
	  .nranges = 1, .ranges = r9, .lazy_bytes = 0x4000 },
};
static const struct criu_set set = { .ntasks = 3, .tasks = tasks,
				     .pages_total = 0x9000 };

/* The set as the daemon has it: a CRIU dump's source, made once. */
static const struct fl_source *dump_source(void)
{
	static struct fl_source *dump;
	struct fl_source *none;

	if (!dump && (source_concat_open(NULL, 0, "no pages", &none) < 0 ||
		      source_criu_over(&set, none, &dump) < 0))
		abort();
	return dump;
}

static int open_fds(void)
{
	int n = 0, fd = open("/dev/null", O_RDONLY);

	for (int i = 0; i < fd; i++)
		n += fcntl(i, F_GETFD) >= 0;
	close(fd);
	return n;
}

static void check(void *st, int n)
{
	bool seen[3] = { false };

	for (int i = 0; i < n; i++) {
		struct proto_client c;
		int t;

		if (proto_criu.client(st, i, &c) < 0)
			abort();
		for (t = 0; t < 3 && tasks[t].pid != c.pid; t++)
			;
		if (t == 3 || seen[t] || c.uffd < 0 ||
		    c.nregions != tasks[t].nranges)
			abort();
		seen[t] = true;
		for (int r = 0; r < c.nregions; r++)
			if (c.regions[r].addr != tasks[t].ranges[r].addr ||
			    c.regions[r].src_offset != tasks[t].base +
			    tasks[t].ranges[r].off)
				abort();
		close(c.uffd);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct fl_source *dump = dump_source();
	int before = open_fds(), ret = 0;
	void *st;

	if (proto_criu.open(&st, 0, dump) < 0)
		return 0;
	while (size && ret == 0) {
		size_t n = (data[0] & 63u) + 1;
		int fd = data[0] & 64 ? open("/dev/null", O_RDONLY) : -1;
		char *piece;

		data++;
		size--;
		if (n > size)
			n = size;
		piece = malloc(n ? n : 1);
		memcpy(piece, data, n);
		ret = proto_criu.feed(st, piece, n, &fd, fd >= 0);
		free(piece);
		data += n;
		size -= n;
	}
	check(st, proto_criu.named(st));
	if (ret > 0 && ret != proto_criu.named(st))
		abort();
	proto_criu.free(st);
	if (open_fds() != before)
		abort();
	return 0;
}
