// SPDX-License-Identifier: Apache-2.0
/*
 * s3srv.c - the S3-compatible test server (s3srv.h): node running
 * tests/s3/server.js as a child that dies with its test (PDEATHSIG, and it
 * exits when its stdin closes); ready once its port accepts.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "http_util.h"
#include "s3srv.h"
#include "serve_util.h"

static const char *s3rver_dir(void)
{
	const char *d = getenv("FL_S3RVER_DIR");

	return d ? d : "build/s3rver";
}

const char *s3srv_why_not(const char **component)
{
	static char why[PATH_MAX + 64];
	char path[PATH_MAX];

	*component = "node";
	if (system("command -v node >/dev/null 2>&1"))
		return "not on PATH (make deps installs nodejs)";
	*component = "curl";
	if (system("command -v curl >/dev/null 2>&1"))
		return "not on PATH (make deps installs it)";
	*component = "the S3 test server";
	snprintf(path, sizeof(path),
		 "%s/node_modules/@20minutes/s3rver/package.json", s3rver_dir());
	if (access(path, R_OK)) {
		snprintf(why, sizeof(why), "not in %s (make deps installs it "
			 "with npm)", s3rver_dir());
		return why;
	}
	return NULL;
}

int s3srv_start(struct s3srv *s, const char *tmp)
{
	char modules[PATH_MAX], rel[PATH_MAX], port[16];
	int p[2];

	snprintf(rel, sizeof(rel), "%s/node_modules", s3rver_dir());
	if (!realpath(rel, modules) || pipe2(p, O_CLOEXEC))
		return -1;
	snprintf(s->dir, sizeof(s->dir), "%s/s3", tmp);
	snprintf(s->log, sizeof(s->log), "%s/s3.log", tmp);
	snprintf(s->access, sizeof(s->access), "%s/access.log", tmp);
	mkdir(s->dir, 0700);
	s->port = free_port();
	snprintf(port, sizeof(port), "%d", s->port);
	snprintf(s->endpoint, sizeof(s->endpoint), "http://127.0.0.1:%d",
		 s->port);
	fflush(stdout);
	s->pid = fork();
	if (s->pid == 0) {
		int fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(p[0], 0);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("FL_S3_SECRET", SECRET, 1);
		setenv("NODE_PATH", modules, 1);
		setenv("NODE_NO_WARNINGS", "1", 1);
		execlp("node", "node", "tests/s3/server.js", port, s->dir,
		       KEY_ID, BUCKET, s->access, (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	s->stdin_w = p[1];
	for (int i = 0; i < 3000; i++) {
		if (port_open(s->port))
			return 0;
		if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
			s->pid = -1;
			return -1;
		}
		usleep(5000);
	}
	return -1;
}

void s3srv_stop(struct s3srv *s)
{
	if (s->pid > 0) {
		close(s->stdin_w);
		kill(s->pid, SIGTERM);
		if (su_reap(s->pid, 5000) == SU_TIMEOUT)
			diag("the S3 server did not stop in 5 s");
		s->pid = -1;
	}
}

int s3srv_upload(const struct s3srv *s, const char *file, const char *key)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd),
		 "h=$(sha256sum '%s' | cut -d' ' -f1) && "
		 "curl -sSf -o /dev/null --aws-sigv4 aws:amz:%s:s3 "
		 "-u '%s:%s' -X PUT -H \"x-amz-content-sha256: $h\" "
		 "--data-binary @'%s' '%s/%s/%s'", file, REGION, KEY_ID,
		 SECRET, file, s->endpoint, BUCKET, key);
	return system(cmd);
}

void s3srv_env(const struct s3srv *s, const char *secret, const char *token)
{
	setenv("AWS_ACCESS_KEY_ID", KEY_ID, 1);
	setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
	setenv("AWS_REGION", REGION, 1);
	setenv("AWS_ENDPOINT_URL", s->endpoint, 1);
	unsetenv("AWS_DEFAULT_REGION");
	unsetenv("AWS_ENDPOINT_URL_S3");
	if (token)
		setenv("AWS_SESSION_TOKEN", token, 1);
	else
		unsetenv("AWS_SESSION_TOKEN");
}
