// SPDX-License-Identifier: Apache-2.0
/*
 * serve_layers.c - `faultline serve --mem-file BASE --layer DIFF ...`
 * against Firecracker-style clients that check every byte: raw diffs as
 * Firecracker writes them (pages over the base, pages written as zeros
 * over data, holes that fall through, data over a hole of the base), two
 * diffs where the upper overrides the lower, an image layer (`faultline
 * image create`) over a raw base under a raw diff; three clients at once
 * while the background restore fills the rest, and a naive one-page-per-
 * fault daemon beside the default one.  A layer of another size stops
 * the daemon at start, exit status 1, with one line naming it and both
 * sizes.
 */
#define _GNU_SOURCE
#include <linux/falloc.h>

#include "serve_util.h"
#include "diff.h"
#include "load.h"

#define KIB		1024ull
#define MIB		(1024 * KIB)
#define SIZE		(32 * MIB)
#define BASE_SEED	0x0b00000000000000ull
#define SEED1		0x1100000000000000ull
#define SEED2		0x2200000000000000ull
#define SEED_FULL	0x4400000000000000ull
#define N(a)		((int)(sizeof(a) / sizeof((a)[0])))

static char dir[64];
static struct mem_file base;

/*
 * diff1 over the base, diff2 over diff1 (partly over the base); 2 MiB
 * runs for whole-chunk fills from a layer, and scattered pages in
 * [12M, 14M) for fills from several.
 */
static const struct diff_run diff1[] = {
	DIFF_RUN(1 * MIB, 192 * KIB, SEED1),
	DIFF_RUN(3 * MIB, 4 * KIB, 0),		/* zeros over the base's data */
	DIFF_RUN(4 * MIB, 2 * MIB, SEED1),
	DIFF_RUN(8 * MIB, 2 * MIB, 0),		/* 2 MiB of zeros over data */
	DIFF_PAGES(12 * MIB, 2 * MIB, SEED1, 3),
	DIFF_RUN(20 * MIB + 512 * KIB, 64 * KIB, SEED1), /* over a base hole */
};
static const struct diff_run diff2[] = {
	DIFF_RUN(1 * MIB + 128 * KIB, 192 * KIB, SEED2),
	DIFF_RUN(3 * MIB + 4 * KIB, 4 * KIB, SEED2),
	DIFF_RUN(5 * MIB, 4 * KIB, 0),		/* zeros over diff1's data */
	DIFF_PAGES(12 * MIB, 2 * MIB, SEED2, 5),
	DIFF_RUN(SIZE - 4 * KIB, 4 * KIB, SEED2),	/* the last page */
};

static const char *path_of(const char *name)
{
	return diff_path(dir, name);
}

/* runs as a diff at name, applied to mem. */
static void make_diff(const char *name, const struct diff_run *runs, int n,
		      uint8_t *mem)
{
	if (diff_write(path_of(name), SIZE, runs, n, mem) < 0)
		BAIL("cannot write %s", path_of(name));
}

/*
 * Serve base under extra (--layer ...) and check that three clients at
 * once, and then one of two regions, read every byte of mem.
 */
static void serve_stack(const char *what, const char *const *extra,
			const uint8_t *mem, const char *name)
{
	static const enum su_order orders[] = { SU_FORWARD, SU_REVERSE,
						SU_STRIDE };
	struct mem_file want = { .fd = -1, .size = SIZE, .seed = BASE_SEED,
				 .map = mem };
	struct su_client_args a = {
		.mem = &want, .nregions = 1, .sizes = { SIZE },
		.page_size = FC_PAGE_4K, .stop_fd = -1, .result_fd = -1,
	};
	char line[512];
	pid_t pid[3];
	int bad = 0;
	struct serve s;

	serve_init(&s);
	if (serve_start(&s, base.path, extra)) {
		ok(0, "%s: the daemon starts", what);
		serve_log_dump(&s, 0);
		serve_cleanup(&s);
		return;
	}
	snprintf(line, sizeof(line), "serving %s (32 MiB)", name);
	ok(serve_log_find(&s, 0, 0, (const char *[]){ line, NULL }, 10000,
			  NULL, 0), "%s: the log says \"%s\"", what, line);
	a.sock = s.sock;
	for (int i = 0; i < 3; i++) {
		a.order = orders[i];
		pid[i] = su_spawn(su_client_main, &a);
	}
	for (int i = 0; i < 3; i++)
		bad |= su_reap(pid[i], SU_CHILD_TIMEOUT * 1000) != 0;
	ok(!bad, "%s: three clients at once (forward, backward, strided) "
	   "read every byte of the stack", what);
	a.nregions = 2;
	a.sizes[0] = 12 * MIB + 4 * KIB;
	a.sizes[1] = SIZE - a.sizes[0];
	a.order = SU_STRIDE;
	is_int(su_reap(su_spawn(su_client_main, &a), SU_CHILD_TIMEOUT * 1000),
	       0, "... and a client of two regions, one starting mid-layer");
	serve_stop(&s);
	if (tap_failures())
		serve_log_dump(&s, 0);
	serve_cleanup(&s);
}

static void test_refused(void)
{
	const char *extra[] = { "--layer", path_of("small"), NULL };
	char want[512];
	struct serve s;
	int r;

	if (diff_write(path_of("small"), SIZE / 2, NULL, 0, NULL) < 0)
		BAIL("cannot write %s", path_of("small"));
	snprintf(want, sizeof(want), "faultline serve: layer %s is 16 MiB "
		 "(16777216 bytes), its base %s is 32 MiB (33554432 bytes): "
		 "not a diff of that base", path_of("small"), base.path);
	serve_init(&s);
	r = serve_start(&s, base.path, extra);
	ok(r < 0 && WIFEXITED(s.status) && WEXITSTATUS(s.status) == 1 &&
	   su_file_has(s.log, want),
	   "a layer of half the base's size: the daemon exits 1 at start, "
	   "saying \"%s\"", want);
	if (r == 0) {
		serve_stop(&s);
		serve_log_dump(&s, 0);
	} else if (tap_failures()) {
		serve_log_dump(&s, 0);
	}
	serve_cleanup(&s);
}

int main(void)
{
	static const struct diff_run full[] = {
		DIFF_RUN(0, 16 * MIB, SEED_FULL),
		DIFF_RUN(24 * MIB, 8 * MIB, SEED_FULL),
	};
	uint8_t *mem1, *mem2, *mem3;
	char cmd[512], name[512];
	int fd;

	load_start();	/* first: FL_LOAD spinners fork from an empty process */
	snprintf(dir, sizeof(dir), "/tmp/fl-serve-layers-XXXXXX");
	if (!mkdtemp(dir))
		BAIL("mkdtemp: %s", strerror(errno));
	if (mem_file_create(&base, SIZE, BASE_SEED) < 0)
		BAIL("cannot create the base");
	fd = open(base.path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				20 * MIB, 1 * MIB) < 0)
		skip_all("cannot punch holes in /tmp");
	close(fd);
	mem1 = malloc(SIZE);
	mem2 = malloc(SIZE);
	mem3 = calloc(1, SIZE);
	if (!mem1 || !mem2 || !mem3)
		BAIL("out of memory");
	memcpy(mem1, base.map, SIZE);
	make_diff("diff1", diff1, N(diff1), mem1);
	memcpy(mem2, mem1, SIZE);
	make_diff("diff2", diff2, N(diff2), mem2);
	if (!diff_holes_seen(path_of("diff1"), 1 * MIB))
		skip_all("the filesystem of /tmp does not report holes page "
			 "by page (SEEK_DATA)");
	/* A full memory (16M-24M zeros) as an image: it holds every page. */
	if (diff_write(path_of("full"), SIZE, full, N(full), mem3) < 0)
		BAIL("cannot write %s", path_of("full"));
	snprintf(cmd, sizeof(cmd), "%s image create %s %s >/dev/null",
		 serve_bin(), path_of("full"), path_of("img"));
	if (system(cmd) != 0)
		BAIL("%s: failed", cmd);
	make_diff("diff2", diff2, N(diff2), mem3);

	snprintf(name, sizeof(name), "%s + %s", base.path, path_of("diff1"));
	serve_stack("base + diff1", (const char *[]){ "--layer",
		    path_of("diff1"), NULL }, mem1, name);
	snprintf(name, sizeof(name), "%s + %s + %s", base.path,
		 path_of("diff1"), path_of("diff2"));
	serve_stack("base + diff1 + diff2", (const char *[]){ "--layer",
		    path_of("diff1"), "--layer", path_of("diff2"), NULL },
		    mem2, name);
	serve_stack("base + diff1 + diff2, one page a fault, nothing ahead",
		    (const char *[]){ "--layer", path_of("diff1"), "--layer",
		    path_of("diff2"), "--chunk", "4K", "--no-prefetch",
		    "--no-background", NULL }, mem2, name);
	snprintf(name, sizeof(name), "%s + %s + %s", base.path,
		 path_of("img"), path_of("diff2"));
	serve_stack("base + image + diff2", (const char *[]){ "--layer",
		    path_of("img"), "--layer", path_of("diff2"), NULL },
		    mem3, name);
	test_refused();
	free(mem1);
	free(mem2);
	free(mem3);
	mem_file_destroy(&base);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		diag("could not remove %s", dir);
	return done_testing();
}
