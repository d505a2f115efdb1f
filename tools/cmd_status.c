// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_status.c - `faultline status`: ask a running daemon (serve or
 * lazy-pages) for its status over its control socket, and show every
 * session, or print the daemon's JSON as it is (--json).
 *
 * Decision: the daemon answers data (src/daemon/status.c) and this command
 * renders it, so a script reading --json and an operator reading the table
 * see the same numbers.  Latency percentiles are shown as what they are,
 * the ends of power-of-two buckets ("p50 ≤ 1.05 ms"), beside the measured
 * mean and max.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "cli.h"
#include "daemon/ctl.h"
#include "daemon/log.h"
#include "daemon/status.h"
#include "util/size.h"
#include "util/sock.h"

#define REPLY_MAX	(64u << 20)	/* a status of a thousand sessions fits */
#define TIMEOUT_S	10

static const char usage[] =
	"usage: faultline status --socket PATH | --control PATH [--json]\n"
	"  Every session of the daemon listening on PATH (its control socket:\n"
	"  PATH.ctl; for lazy-pages, WORKDIR/lazy-pages.socket): client, regions,\n"
	"  source, bytes restored, faults, latency, background restore, errors,\n"
	"  age.  --json: the daemon's document as it is, for scripts.\n";

static int fail(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "faultline status: ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	return 1;
}

/* Ask the daemon; its whole answer (malloc'd) into *out.  0 or exit 1. */
static int ask(const char *path, char **out)
{
	struct timeval tv = { .tv_sec = TIMEOUT_S };
	size_t len = 0, cap = 1 << 16;
	char *buf;
	int sent, fd = sock_connect_unix(path);

	if (fd == -EACCES || fd == -EPERM)
		return fail("%s: permission denied (root and the daemon's uid "
			    "only)%s", path, "");
	if (fd < 0)
		return fail("%s: %s (is the daemon running?)", path,
			    strerror(-fd));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	buf = malloc(cap + 1);
	if (!buf) {
		close(fd);
		return fail("%s: %s", path, "out of memory");
	}
	/* Failing, read on: a daemon refusing us has said why, and closed. */
	sent = send_full(fd, CTL_REQ_STATUS "\n", strlen(CTL_REQ_STATUS) + 1);
	for (;;) {
		ssize_t n = recv(fd, buf + len, cap - len, 0);

		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == cap && cap < REPLY_MAX) {
			char *more = realloc(buf, cap * 2 + 1);

			if (!more)
				break;
			buf = more;
			cap *= 2;
		}
	}
	close(fd);
	buf[len] = 0;
	if (!len) {
		free(buf);
		return fail("%s: %s", path, sent < 0 ? strerror(-sent) :
			    "no answer");
	}
	*out = buf;
	return 0;
}

/* ---- the table ----------------------------------------------------------- */

static uint64_t u64(json_object *o, const char *k)
{
	json_object *v;

	return json_object_object_get_ex(o, k, &v) ? (uint64_t)json_object_get_int64(v) : 0;
}

static const char *str(json_object *o, const char *k)
{
	json_object *v;

	return json_object_object_get_ex(o, k, &v) && v ?
	       json_object_get_string(v) : NULL;
}

static json_object *obj(json_object *o, const char *k)
{
	json_object *v;

	return json_object_object_get_ex(o, k, &v) ? v : NULL;
}

/* A size in the unit that shows it ("9.8 KiB", not "0.0 MiB"). */
static void mib(char *buf, size_t len, uint64_t bytes)
{
	snprintf(buf, len, "%s", size_str(bytes).s);
}

static void age(char *buf, size_t len, uint64_t ms)
{
	if (ms < 120000)
		snprintf(buf, len, "%.1f s", (double)ms / 1000);
	else if (ms < 2 * 3600000)
		snprintf(buf, len, "%llu min", (unsigned long long)(ms / 60000));
	else
		snprintf(buf, len, "%.1f h", (double)ms / 3600000);
}

static void show_latency(json_object *lat)
{
	char p50[24], p99[24], mean[24], max[24];

	if (!u64(lat, "count")) {
		printf("  latency  no faults\n");
		return;
	}
	fmt_ns(p50, sizeof(p50), u64(lat, "p50_le_ns"));
	fmt_ns(p99, sizeof(p99), u64(lat, "p99_le_ns"));
	fmt_ns(mean, sizeof(mean), u64(lat, "mean_ns"));
	fmt_ns(max, sizeof(max), u64(lat, "max_ns"));
	printf("  latency  p50 ≤ %s, p99 ≤ %s (bucket bounds); mean %s, "
	       "max %s (measured)\n", p50, p99, mean, max);
}

#define REGIONS_SHOWN	4

static void show_regions(json_object *regs)
{
	size_t n = regs ? json_object_array_length(regs) : 0;

	printf("  regions  %zu:", n);
	for (size_t i = 0; i < n && i < REGIONS_SHOWN; i++) {
		json_object *r = json_object_array_get_idx(regs, i);
		char size[32];

		mib(size, sizeof(size), u64(r, "len"));
		printf("%s 0x%llx %s (%s pages, at %llu)", i ? "," : "",
		       (unsigned long long)u64(r, "addr"), size,
		       u64(r, "page_size") == 4096 ? "4K" : "2M",
		       (unsigned long long)u64(r, "src_offset"));
	}
	if (n > REGIONS_SHOWN)
		printf(", and %zu more", n - REGIONS_SHOWN);
	printf("\n");
}

static void show_restore(json_object *s)
{
	char done[32], all[32];
	uint64_t total = u64(s, "bytes");
	json_object *r = obj(s, "bytes_restored");

	mib(all, sizeof(all), total);
	if (!r) {
		printf("  restored not scanned yet, of %s; background %s\n", all,
		       str(s, "background"));
		return;
	}
	mib(done, sizeof(done), (uint64_t)json_object_get_int64(r));
	printf("  restored %s of %s (%.0f %%)%s; background %s\n", done, all,
	       total ? 100.0 * (double)json_object_get_int64(r) /
		       (double)total : 100.0,
	       json_object_get_boolean(obj(s, "restore_complete")) ?
	       ", complete" : "", str(s, "background"));
}

static void show_session(json_object *s, const char *source)
{
	char a[32];
	const char *err = str(s, "error");

	age(a, sizeof(a), u64(s, "age_ms"));
	printf("session %llu (%s): %s, age %s\n",
	       (unsigned long long)u64(s, "id"), str(s, "client"),
	       str(s, "state"), a);
	if (strcmp(str(s, "state"), "serving"))
		return;
	show_regions(obj(s, "regions"));
	printf("  source   %s\n", source);
	show_restore(s);
	printf("  faults   %llu\n", (unsigned long long)u64(s, "faults"));
	show_latency(obj(s, "latency"));
	printf("  errors   %llu source errors, %llu pages poisoned%s%s\n",
	       (unsigned long long)u64(s, "source_errors"),
	       (unsigned long long)u64(s, "pages_poisoned"),
	       err && *err ? "; the first: " : "", err ? err : "");
}

static void show(json_object *st)
{
	json_object *src = obj(st, "source"), *tot = obj(st, "totals");
	json_object *ss = obj(st, "sessions");
	size_t n = ss ? json_object_array_length(ss) : 0;
	char up[32], size[32];

	age(up, sizeof(up), u64(st, "uptime_ms"));
	mib(size, sizeof(size), u64(src, "size"));
	printf("faultline %s: server pid %llu, up %s%s; %s (%s), protocol %s\n",
	       str(st, "version"), (unsigned long long)u64(st, "server_pid"),
	       up, json_object_get_boolean(obj(st, "draining")) ?
	       ", draining" : "", str(src, "name"), size, str(st, "protocol"));
	printf("%zu session%s now; %llu served, %llu refused, %llu clients "
	       "killed, %llu restores complete\n", n, n == 1 ? "" : "s",
	       (unsigned long long)u64(tot, "sessions_served"),
	       (unsigned long long)u64(tot, "sessions_refused"),
	       (unsigned long long)u64(tot, "clients_killed"),
	       (unsigned long long)u64(tot, "restores_complete"));
	if (obj(src, "bytes_fetched"))
		printf("source: %s fetched from the origin, %s from the "
		       "cache\n", size_str(u64(src, "bytes_fetched")).s,
		       size_str(u64(src, "bytes_cached")).s);
	for (size_t i = 0; i < n; i++)
		show_session(json_object_array_get_idx(ss, i), str(src, "name"));
}

int cmd_status(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "control", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *sock = NULL, *control = NULL, *err;
	char path[SOCK_UNIX_PATH_MAX], *reply = NULL;
	bool json = false;
	json_object *st;
	int opt, ret;

	opterr = 0;	/* cli_bad_option() says it, in one line */
	while ((opt = getopt_long(argc, argv, "s:c:jh", opts, NULL)) != -1) {
		switch (opt) {
		case 's': sock = optarg; break;
		case 'c': control = optarg; break;
		case 'j': json = true; break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			return cli_bad_option("status", argv, "s:c:jh", opts);
		}
	}
	if (optind < argc)
		return cli_bad("status", "argument", argv[optind], "unexpected");
	if (!sock == !control)
		return cli_missing("status", "one of --socket PATH and "
				   "--control PATH is required");
	if (sock && ctl_path_for(sock, path, sizeof(path)) < 0)
		return fail("%s.ctl: %s", sock, "too long for a socket path");
	if ((ret = ask(control ? control : path, &reply)))
		return ret;
	st = json_tokener_parse(reply);
	free(reply);
	if (!st || !json_object_is_type(st, json_type_object)) {
		json_object_put(st);
		return fail("%s%s: not a status (an older daemon?)",
			    control ? control : path, "");
	}
	if ((err = str(st, "error"))) {
		ret = fail("%s: %s", control ? control : path, err);
	} else if (json) {
		puts(json_object_to_json_string_ext(st, JSON_C_TO_STRING_PRETTY |
						    JSON_C_TO_STRING_NOSLASHESCAPE));
	} else {
		show(st);
	}
	json_object_put(st);
	return ret;
}
