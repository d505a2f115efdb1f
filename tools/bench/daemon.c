// SPDX-License-Identifier: Apache-2.0
/*
 * daemon.c - a `faultline serve` daemon for a benchmark to restore
 * through, started from this binary (or $FAULTLINE_BIN) and stopped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench.h"
#include "fc_client.h"
#include "kernel/uffd.h"
#include "cli.h"
#include "util/clock.h"

/* ---- a faultline serve daemon ------------------------------------------ */

const char *bench_faultline_exe(void)
{
	static char buf[PATH_MAX];
	const char *env = getenv("FAULTLINE_BIN");
	ssize_t n;

	if (env && *env)
		return env;
	n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		const char *b = strrchr(buf, '/');

		if (b && !strcmp(b + 1, "faultline"))
			return buf;
	}
	return "build/faultline";
}

int bench_daemon_start(struct bench_daemon *d, const char *bench, int id,
		       const char *const *args)
{
	const char *exe = bench_faultline_exe();
	const char *argv[24] = { "faultline", "serve", "--socket", d->sock };
	int argc = 4;
	pid_t pid;

	while (*args && argc < 23)
		argv[argc++] = *args++;
	snprintf(d->sock, sizeof(d->sock), "/tmp/flb-%d-%d.sock",
		 (int)getpid(), id);
	unlink(d->sock);
	bench_path_add(d->sock);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0) {
			dup2(null, STDOUT_FILENO);
			dup2(null, STDERR_FILENO);
		}
		execv(exe, (char *const *)argv);
		_exit(127);
	}
	d->pid = pid;
	/* Wait until it accepts connections (up to 5 s). */
	for (int i = 0; i < 500; i++) {
		int fd = fc_connect_unix(d->sock);

		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			d->pid = 0;
			break;
		}
		usleep(10000);
	}
	fprintf(stderr, "faultline bench %s: %s serve --socket %s "
		"did not start\n", bench, exe, d->sock);
	return -ECHILD;
}

void bench_daemon_stop(struct bench_daemon *d)
{
	int st;

	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		for (int i = 0; i < 300; i++) {
			if (waitpid(d->pid, &st, WNOHANG) == d->pid)
				goto done;
			usleep(10000);
		}
		kill(d->pid, SIGKILL);
		waitpid(d->pid, &st, 0);
	}
done:
	d->pid = 0;
	if (d->sock[0])
		bench_unlink(d->sock);
}

int bench_daemon_connect(struct fc_client *fc, const char *sock)
{
	return fc_client_connect_wait(fc, sock, 5000);
}

