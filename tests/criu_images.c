// SPDX-License-Identifier: Apache-2.0
/*
 * tests/criu_images.c - CRIU's images as src/format/criu.c reads them,
 * from a real `criu dump` of a process this test starts: the lazy ranges
 * cover its memory and point at its bytes in pages-<id>.img, and the same
 * dump opened as a source (fl_source_open() of the directory) gives them
 * as each task's regions; a truncated record, a foreign magic, a pagemap
 * pointing past the pages file and a missing pstree are refused with the
 * file named.
 *
 * Decision: real images (CRIU >= 4.1, tests/criu/get-criu.sh) rather than
 * hand-made ones, so that the reader is checked against what CRIU writes;
 * the fuzz harness (fuzz/fuzz_criu.c) covers the malformed rest.  Root
 * only (criu dump), skipped without it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "criu_util.h"
#include "format/criu.h"
#include "source/source.h"
#include "tap.h"
#include "faultline.h"

#define MIB 4

static char img[300], work[200];

/* The bytes of [addr, addr+len) through the set's ranges: "" or what's wrong. */
static void check_memory(const struct criu_task *t, uint64_t addr,
			 uint64_t len, char *why, size_t wl)
{
	char path[400];
	int fd;

	snprintf(path, sizeof(path), "%s/pages-%u.img", img, t->pages_id);
	fd = open(path, O_RDONLY);
	why[0] = 0;
	for (uint64_t a = addr; a < addr + len && !why[0]; a += 4096) {
		const struct criu_range *r = NULL;
		uint64_t w[512];

		for (int i = 0; i < t->nranges; i++)
			if (a >= t->ranges[i].addr &&
			    a < t->ranges[i].addr + t->ranges[i].len)
				r = &t->ranges[i];
		if (!r) {
			snprintf(why, wl, "0x%" PRIx64 " is in no lazy range", a);
			break;
		}
		if (pread(fd, w, 4096, (off_t)(r->off + (a - r->addr))) != 4096) {
			snprintf(why, wl, "short read of pages-%u.img", t->pages_id);
			break;
		}
		for (int i = 0; i < 512; i++)
			if (w[i] != cu_pattern(a - addr + i * 8ull, 0)) {
				snprintf(why, wl, "0x%llx: wrong bytes at "
					 "offset %llu", (unsigned long long)(a + i * 8ull),
					 (unsigned long long)(r->off + (a - r->addr)));
				break;
			}
	}
	close(fd);
}

static int lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void copy_dir(const char *to)
{
	char cmd[1000];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -a '%s' '%s'", to, img, to);
	if (system(cmd))
		BAIL("cannot copy %s", img);
}

/* criu_load of a copy of the images broken by cmd refuses with kw. */
static void refused(const char *name, const char *cmd, const char *kw)
{
	char bad[320], sh[1000];
	struct criu_set s;

	snprintf(bad, sizeof(bad), "%s/bad", work);
	copy_dir(bad);
	snprintf(sh, sizeof(sh), "cd '%s' && %s", bad, cmd);
	if (system(sh))
		BAIL("cannot run %s", cmd);
	int ret = criu_load(bad, &s);

	ok(ret < 0 && strstr(fl_last_error(), kw) &&
	   !strchr(fl_last_error(), '\n'), "%s: refused, naming %s", name, kw);
	if (ret == 0)
		criu_free(&s);
	else
		diag("%s", fl_last_error());
}

/* Does each of t's regions r[0..n) sit at its lazy range's place? */
static bool same_regions(const struct criu_task *t,
			 const struct fl_region_desc *r, unsigned int n)
{
	bool same = n == (unsigned int)t->nranges;

	for (unsigned int i = 0; same && i < n; i++)
		same = r[i].addr == t->ranges[i].addr &&
		       r[i].len == t->ranges[i].len &&
		       r[i].page_size == 4096 &&
		       r[i].src_offset == t->base + t->ranges[i].off;
	return same;
}

/*
 * The dump as a caller of the library sees it (the daemon's CRIU
 * protocol): fl_source_open() of its directory, the pages files end to
 * end, each task's regions its lazy ranges at their place in them, a read
 * there the pages file's bytes; a directory of no dump refused.
 */
static void through_source(const struct criu_set *s)
{
	const struct fl_region_desc *r = NULL;
	struct fl_source *src;
	unsigned int n = 0;
	char path[400], a[4096], b[4096];
	pid_t pid = 0;
	int fd;

	if (!is_int(fl_source_open(img, &src), 0, "fl_source_open of the "
		    "dump's directory")) {
		diag("%s", fl_last_error());
		return;
	}
	is_int(fl_source_size(src), s->pages_total, "its size: the pages "
	       "files'");
	is_int(fl_source_criu_tasks(src), s->ntasks, "its tasks: "
	       "pstree.img's");
	ok(fl_source_criu_task(src, 0, &pid, &r, &n) == 0 &&
	   pid == s->tasks[0].pid && same_regions(&s->tasks[0], r, n),
	   "task 0: its pid, its lazy ranges as regions of the source");
	is_int(fl_source_criu_task(src, s->ntasks, &pid, &r, &n), -EINVAL,
	       "no task past the last");
	snprintf(path, sizeof(path), "%s/pages-%u.img", img,
		 s->tasks[0].pages_id);
	fd = open(path, O_RDONLY);
	ok(n && src->ops->read(src, a, sizeof(a), r[0].src_offset) == 0 &&
	   pread(fd, b, sizeof(b), (off_t)s->tasks[0].ranges[0].off) ==
	   (ssize_t)sizeof(b) && !memcmp(a, b, sizeof(a)),
	   "its first region reads the pages file's bytes");
	close(fd);
	fl_source_put(src);
	ok(fl_source_open(work, &src) == -EINVAL &&
	   strstr(fl_last_error(), "no CRIU dump"),
	   "a directory of no dump: refused (%s)", fl_last_error());
}

int main(int argc, char **argv)
{
	char buf[128], log[300];
	struct criu_set s;
	unsigned long long addr, len;
	int pid;

	cu_workload_main(argc, argv);
	cu_require(false);
	char *d = cu_tmpdir("criu-images");

	snprintf(work, sizeof(work), "%s", d);
	snprintf(img, sizeof(img), "%s/img", work);
	snprintf(log, sizeof(log), "%s/criu.log", work);
	mkdir(img, 0755);

	pid_t child = cu_start(work, "plain", MIB, 1);

	if (!cu_wait_file(work, "ready.0") ||
	    cu_read_file(work, "ready.0", buf, sizeof(buf)) <= 0 ||
	    sscanf(buf, "%d %llx %llu", &pid, &addr, &len) != 3)
		BAIL("the workload did not start");
	const char *dump[] = { "dump", "-t", buf, "-D", img, NULL };

	snprintf(buf, sizeof(buf), "%d", pid);
	if (!is_int(cu_run_criu(log, dump), 0, "criu dump")) {
		diag("see %s", log);
		return done_testing();
	}
	ok(cu_reap(child), "the dumped process is gone");

	int ret = criu_load(img, &s);

	if (!is_int(ret, 0, "criu_load of a real dump"))
		diag("%s", fl_last_error());
	if (ret == 0) {
		char why[200];

		is_int(s.ntasks, 1, "one task");
		is_int(s.tasks[0].pid, pid, "its pid");
		ok(s.tasks[0].lazy_bytes >= len, "lazy: %" PRIu64 " bytes",
		   s.tasks[0].lazy_bytes);
		check_memory(&s.tasks[0], addr, len, why, sizeof(why));
		ok(!why[0], "every page of its memory is lazy, its bytes in "
		   "the pages file");
		if (why[0])
			diag("%s", why);
		through_source(&s);
		criu_free(&s);
	}
	snprintf(buf, sizeof(buf), "pagemap-%d.img", pid);
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "truncate -s -3 %s", buf);
	refused("a truncated pagemap", cmd, buf);
	snprintf(cmd, sizeof(cmd), "printf 'XXXX' | dd of=mm-%d.img bs=1 "
		 "seek=4 conv=notrunc 2>/dev/null", pid);
	refused("an mm image of another kind", cmd, "mm-");
	refused("a pages file cut short", "truncate -s 8192 pages-*.img",
		"points past the end of pages-");
	refused("no pstree", "rm pstree.img", "pstree.img: missing");

	/* faultline lazy-pages refuses such a dump before it listens. */
	char out[2048], bin[1024], sh[2048];

	if (!realpath(getenv("FAULTLINE_BIN") ? getenv("FAULTLINE_BIN") :
		      "build/faultline", bin))
		BAIL("no faultline binary");
	snprintf(sh, sizeof(sh), "cd '%s/bad' && cp ../img/pstree.img . && "
		 "truncate -s 8192 pages-*.img && '%s' lazy-pages -D . "
		 "2>&1; echo \"exit $?\"", work, bin);
	FILE *f = popen(sh, "r");
	size_t got = f ? fread(out, 1, sizeof(out) - 1, f) : 0;

	out[got] = 0;
	if (f)
		pclose(f);
	ok(strstr(out, "points past the end of pages-") &&
	   strstr(out, "exit 1") && access("lazy-pages.socket", F_OK) < 0 &&
	   lines(out) == 2,
	   "faultline lazy-pages refuses it at start, in one line");
	diag("%s", out);
	cu_rmdir(work);
	free(d);
	return done_testing();
}
