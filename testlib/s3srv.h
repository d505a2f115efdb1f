/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3srv.h - the S3-compatible server of the s3:// tests (tests/s3/server.js
 * over the npm package @20minutes/s3rver that `make deps` installs into
 * build/s3rver) on 127.0.0.1, one key pair and one bucket, checking AWS
 * Signature V4; an access log of a line per request.
 */
#ifndef FAULTLINE_TESTLIB_S3SRV_H
#define FAULTLINE_TESTLIB_S3SRV_H

#define KEY_ID	"AKIAFLTEST0000000001"
#define SECRET	"fl-test-secret-9f3b2c7d0e6a"
#define TOKEN	"fl-test-session-token-51a8c0ffee"
#define REGION	"eu-west-3"
#define BUCKET	"snaps"

struct s3srv {
	int pid;
	int port;
	int stdin_w;
	char dir[128];		/* its objects */
	char log[128];		/* its stdout and stderr */
	char access[128];	/* a line per request (server.js) */
	char endpoint[64];
};

/*
 * Why the server cannot run here, or NULL: *component names what is
 * missing (for skip_all_missing()), the answer says where to get it.
 */
const char *s3srv_why_not(const char **component);

/* Start it with its files under tmp: 0, or -1 (its log in s->log). */
int s3srv_start(struct s3srv *s, const char *tmp);

void s3srv_stop(struct s3srv *s);

/* Upload file as BUCKET/key with a signed PUT (curl, not faultline). */
int s3srv_upload(const struct s3srv *s, const char *file, const char *key);

/*
 * The environment of an s3:// client of s: key pair with secret (and a
 * session token, or none), region, endpoint.
 */
void s3srv_env(const struct s3srv *s, const char *secret, const char *token);

#endif
