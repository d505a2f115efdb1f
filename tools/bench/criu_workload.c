// SPDX-License-Identifier: Apache-2.0
/*
 * criu_workload.c - the process `faultline bench criu` dumps and restores:
 * this binary re-executed (`bench --criu-workload DIR SIZE`), which fills
 * its memory, waits for its go file and then times itself: when it runs
 * again, when its first full pass over its memory is done (XXH3 checked).
 *
 * Decision: it reads CLOCK_MONOTONIC less the offset of the time
 * namespace CRIU restores it into, so its times are the host's clock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "run.h"
#include "cli.h"
#include "faultline.h"
#include "http_util.h"
#include "criu_bench.h"

/* ---- the process that is dumped and restored ---------------------------- */

/* Write dir/name whole (a temporary file renamed): 0 or -errno. */
int criu_put_file(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		ret = -EIO;
	close(fd);
	if (!ret && rename(tmp, path) < 0)
		ret = -errno;
	return ret;
}

/*
 * Until path exists: 0, or -ETIMEDOUT after BOUND_S (a bench that died
 * leaves no process polling for ever).  Its clock goes on across a dump
 * and restore (CRIU keeps it in a time namespace).
 */
static int await_path(const char *path)
{
	double end = bench_now() + BOUND_S;

	while (access(path, F_OK) < 0) {
		if (bench_now() > end)
			return -ETIMEDOUT;
		usleep(200);
	}
	return 0;
}

/*
 * The monotonic offset of this process's time namespace, in seconds: CRIU
 * restores a process into a new one, its clock going on from the dump,
 * and the bench's clock is the host's.  0 if there is none.
 */
static double mono_offset(void)
{
	FILE *f = fopen("/proc/self/timens_offsets", "re");
	char line[96];
	long long sec, nsec;
	double off = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "monotonic %lld %lld", &sec, &nsec) == 2)
			off = (double)sec + (double)nsec * 1e-9;
	if (f)
		fclose(f);
	return off;
}

/*
 * argv: --criu-workload DIR SIZE.  Fills SIZE bytes with the bench pattern,
 * writes DIR/ready (its pid), waits for DIR/go, then reads every byte once
 * (the XXH3 of its memory against the pattern's) and writes DIR/result:
 * "RUN PASS ok|wrong" (the host's CLOCK_MONOTONIC, seconds), and waits
 * for DIR/exit.
 */
int bench_criu_workload(int argc, char **argv)
{
	char go[PATH_MAX], quit[PATH_MAX], text[96];
	uint64_t size, want;
	double t_run, t_pass, off;
	void *p;
	bool ok;

	if (argc != 3 || parse_size(argv[2], &size) < 0 || !size ||
	    size % PMD_SIZE_BYTES)
		return 2;
	setsid();	/* its own session: criu dumps it alone */
	snprintf(go, sizeof(go), "%s/go", argv[1]);
	snprintf(quit, sizeof(quit), "%s/exit", argv[1]);
	p = bench_map(size);
	if (!p || bench_prefault(p, size) < 0)
		return 1;
	bench_pattern(p, size, 0);
	want = bench_pattern_sum(size);
	snprintf(text, sizeof(text), "%d\n", (int)getpid());
	if (criu_put_file(argv[1], "ready", text) < 0)
		return 1;
	if (await_path(go) < 0)	/* dumped here, and restored here */
		return 1;
	t_run = bench_now();
	ok = bench_sum(p, size) == want;
	t_pass = bench_now();
	off = mono_offset();	/* read after: not in the times */
	snprintf(text, sizeof(text), "%.9f %.9f %s\n", t_run - off,
		 t_pass - off, ok ? "ok" : "wrong");
	if (criu_put_file(argv[1], "result", text) < 0)
		return 1;
	return await_path(quit) < 0;
}

