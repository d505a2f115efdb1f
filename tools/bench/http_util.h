/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_util.h - a real nginx for `faultline bench remote` and the HTTP
 * tests: started on 127.0.0.1 on a free port with a generated config in a
 * temporary directory (foreground, single process, so SIGKILL stops it
 * outright), serving DIR/www, with an access log of one line per request
 * ("URI STATUS RANGE BYTES") that the tests count.  Under /slow/ each response is limited to 256 KiB/s (nginx lets
 * the first second's worth go at once: a 512 KiB block takes up to 1 s); under
 * /noetag/ no ETag is sent (Last-Modified only).
 */
#ifndef FAULTLINE_HTTP_UTIL_H
#define FAULTLINE_HTTP_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct nginx {
	char dir[128];		/* config, logs, www/ */
	char www[160];
	char log[160];
	int port;
	pid_t pid;
};

const char *nginx_binary(void);

int free_port(void);

int port_open(int port);

/* Create the directory and config; 0 or -1. */
int nginx_setup(struct nginx *n);

/* Start (or restart) nginx and wait until it accepts; 0 or -1. */
int nginx_start(struct nginx *n);

void nginx_kill(struct nginx *n);

/* Lines of the access log (requests served so far). */
long nginx_requests(const struct nginx *n);

/* Requests logged after the first `from` lines whose line contains s. */
long nginx_requests_matching(const struct nginx *n, long from,
					   const char *s);

void nginx_cleanup(struct nginx *n);

#endif
