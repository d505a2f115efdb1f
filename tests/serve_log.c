// SPDX-License-Identifier: Apache-2.0
/*
 * serve_log.c - the daemon's log lines carry their level: journald's
 * priority prefix when stderr is the stream $JOURNAL_STREAM names (as
 * under systemd), an RFC 3339 timestamp and the level's name anywhere
 * else; --log-level drops what is below it, and at debug each step of a
 * session's state machine is a line.
 *
 * Decision: the daemon's stderr is a file here, and JOURNAL_STREAM is set
 * to that file's device and inode, which is exactly what systemd's check
 * (sd-daemon(3)) compares; a refused client (garbage for a handshake) is
 * a warning, serving and stopping are info.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "serve_util.h"
#include "tap.h"

static struct mem_file mem;

/* A client that sends garbage for a handshake: refused, a warning. */
static void bad_client(const struct serve *s)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", s->sock);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		BAIL("connect %s: %s", s->sock, strerror(errno));
	if (write(fd, "garbage]", 8) != 8)
		BAIL("write: %s", strerror(errno));
	su_closed_by_daemon(fd, 10000);
	close(fd);
}

/* Does some line of the daemon's log match the extended regex re? */
static bool log_has(const struct serve *s, const char *re)
{
	char line[1024];
	regex_t rx;
	bool hit = false;
	FILE *f = fopen(s->log, "r");

	if (!f || regcomp(&rx, re, REG_EXTENDED | REG_NOSUB))
		BAIL("log %s or regex %s", s->log, re);
	while (!hit && fgets(line, sizeof(line), f))
		hit = regexec(&rx, line, 0, NULL, 0) == 0;
	regfree(&rx);
	fclose(f);
	return hit;
}

/*
 * A daemon run: started (JOURNAL_STREAM naming its stderr if journal),
 * a bad client refused, stopped; its log left in s.
 */
static void run(struct serve *s, bool journal, const char *const *extra)
{
	char js[64];
	struct stat st;

	serve_init(s);
	close(open(s->log, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	if (stat(s->log, &st) < 0)
		BAIL("stat %s: %s", s->log, strerror(errno));
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	if (journal)
		setenv("JOURNAL_STREAM", js, 1);
	else
		unsetenv("JOURNAL_STREAM");
	if (serve_start(s, mem.path, extra))
		BAIL("the daemon did not start");
	unsetenv("JOURNAL_STREAM");
	bad_client(s);
	ok(serve_stop(s) == 0, "%s: the daemon stops cleanly",
	   journal ? "journald" : "a file");
}

int main(void)
{
	struct serve s;
	static const char *const warn[] = { "--log-level", "warning", NULL };
	static const char *const debug[] = { "--log-level", "debug", NULL };

	if (mem_file_create(&mem, 4 << 20, 7) < 0)
		BAIL("no memory file");

	run(&s, true, NULL);
	ok(log_has(&s, "^<6>faultline: serving "),
	   "journald: serving, at priority 6 (info)");
	ok(log_has(&s, "^<4>faultline: session 1 \\(pid [0-9]+ uid [0-9]+\\): "
		   "closed: bad handshake"),
	   "journald: a refused client, at priority 4 (warning)");
	ok(!log_has(&s, "^[^<]"), "journald: every line has its priority");
	serve_cleanup(&s);

	run(&s, false, NULL);
	ok(log_has(&s, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:"
		   "[0-9]{2}\\.[0-9]{3}[+-][0-9]{2}:[0-9]{2} info faultline: "
		   "serving "),
	   "a file: an RFC 3339 timestamp and 'info' before each line");
	ok(log_has(&s, " warning faultline: session 1 .*closed: bad "
		   "handshake"), "a file: a refused client is a warning");
	ok(!log_has(&s, "^<"), "a file: no journald prefix");
	serve_cleanup(&s);

	run(&s, false, warn);
	ok(!log_has(&s, " info faultline: "), "--log-level warning: no info "
	   "line");
	ok(log_has(&s, " warning faultline: session 1 .*closed: bad "
		   "handshake"), "--log-level warning: the warning is there");
	serve_cleanup(&s);

	/* Each step of a session's state machine, at debug (session_to()). */
	run(&s, false, debug);
	ok(log_has(&s, " debug faultline: session 1 .*: handshake -> refused: "
		   "bad handshake"), "--log-level debug: a session's step "
	   "logged (handshake -> refused, with its reason)");
	ok(log_has(&s, " debug faultline: session 1 .*: refused -> draining: "
		   "bad handshake"), "--log-level debug: then refused -> "
	   "draining");
	serve_cleanup(&s);

	mem_file_destroy(&mem);
	return done_testing();
}
