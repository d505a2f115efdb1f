// SPDX-License-Identifier: Apache-2.0
/*
 * s3.c - s3://BUCKET/KEY sources against a real S3-compatible server on
 * loopback that checks AWS Signature V4 (tests/s3/server.js, the npm
 * package @20minutes/s3rver that `make deps` installs into build/s3rver):
 * a raw memory file and its image (`faultline image create`), uploaded
 * with a signed PUT (curl --aws-sigv4), read whole through the library
 * and through `faultline serve` by Firecracker-style clients, with a
 * session token and with --cache; a wrong secret fails at open with the
 * server's 403, one line naming the object and SignatureDoesNotMatch,
 * after one request, and the daemon exits 1; missing credentials or
 * region name the variable; presigned URLs (made by tests/s3/presign.js)
 * read right, an expired one fails with AccessDenied; the secret and
 * the token are in no message, log line or `faultline status` output.
 *
 * A chunk store in the bucket (`image create --store s3://BUCKET/PREFIX`,
 * the image's index at PREFIX/images/NAME): two snapshots sharing all but
 * two chunks, the second uploading only those two and its index (PUTs
 * counted in the access log), a third of the same bytes no chunk at all;
 * every HEAD and PUT signed; the second served with --cache by a
 * Firecracker-style client, every byte right, its chunk GETs signed; a
 * wrong secret stops the create at its first HEAD with one line (403,
 * SignatureDoesNotMatch, no secret) and nothing put, no index; a missing
 * variable is named before any request.  `image inspect` of a diff in the
 * bucket shows its chain, `image verify` finds every chunk good, then
 * names the one whose object was replaced.  `image gc --store s3://`
 * keeps what the store's registry (PREFIX/registry/) names: given an
 * image it refuses, and the other image in the store still verifies; a
 * dry run deletes nothing; without its registry marker, and while a
 * create's lock is there, it refuses; an index removed by hand changes
 * nothing until `image delete` (refused for a registered diff's parent),
 * then gc deletes what no registered image references, its DELETEs
 * signed, its own lock gone, and the registered image still verifies.
 *
 * What the server does not check is checked here instead: its access log
 * shows every request of faultline signed (it would serve unsigned ones)
 * with host;range;x-amz-content-sha256;x-amz-date among the signed
 * headers, and every range "bytes=A-B" (it answers suffix ranges
 * wrongly); a listener of our own takes one request as it comes off the
 * wire and checks the Authorization header's credential scope and
 * signed headers, the payload hash (the empty body's: the server never
 * compares it) and the key's encoding, and answers 403 AccessDenied;
 * it takes a create's first PUT too, whose x-amz-content-sha256 must be
 * the SHA-256 of the body that came.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <regex.h>

#include "faultline.h"
#include "format/image.h"
#include "store/s3.h"
#include "source/source.h"
#include "tap.h"
#include "serve_util.h"
#include "s3srv.h"
#include "http_util.h"

#define SIZE	(16ull << 20)

static struct s3srv srv = { .pid = -1, .stdin_w = -1 };
static struct mem_file mem;
static char tmp[64];

static int upload(const char *file, const char *key)
{
	return s3srv_upload(&srv, file, key);
}

/* Lines of the access log (requests served so far), as nginx's. */
static long access_lines(void)
{
	struct nginx n = { .pid = -1 };

	snprintf(n.log, sizeof(n.log), "%s", srv.access);
	return nginx_requests(&n);
}

/* Does the SignedHeaders list sh name the headers faultline must sign? */
static bool signed_all(const char *sh, bool token)
{
	static const char *const want[] = { "host", "range",
		"x-amz-content-sha256", "x-amz-date", "x-amz-security-token" };
	char list[300];

	snprintf(list, sizeof(list), ";%s;", sh);
	for (size_t i = 0; i < sizeof(want) / sizeof(*want) - !token; i++) {
		char item[64];

		snprintf(item, sizeof(item), ";%s;", want[i]);
		if (!strstr(list, item))
			return false;
	}
	return true;
}

/*
 * Every request in the access log after line from: a GET of path, signed
 * (sigv4) over at least host;range;x-amz-content-sha256;x-amz-date (and
 * x-amz-security-token with the token), for "bytes=A-B".  The number of
 * such requests, or -1 (with a diag) at the first that is not so.
 */
static long requests_as_signed(long from, const char *path, bool token)
{
	FILE *f = fopen(srv.access, "r");
	char line[1024], m[16], p[512], st[8], range[64], auth[16], sh[256],
	     tok[8];
	long i = 0, n = 0;
	regex_t re;

	if (!f)
		return -1;
	regcomp(&re, "^bytes=[0-9]+-[0-9]+$", REG_EXTENDED | REG_NOSUB);
	while (fgets(line, sizeof(line), f)) {
		if (i++ < from)
			continue;
		if (sscanf(line, "%15s %511s %7s %63s %15s %255s %7s", m, p, st,
			   range, auth, sh, tok) != 7 || strcmp(m, "GET") ||
		    strcmp(p, path) || strcmp(auth, "sigv4") ||
		    !signed_all(sh, token) ||
		    regexec(&re, range, 0, NULL, 0) ||
		    strcmp(tok, token ? "token" : "-")) {
			diag("request not as faultline signs them: %s", line);
			n = -1;
			break;
		}
		n++;
	}
	regfree(&re);
	fclose(f);
	return n;
}

/* ---- the environment ------------------------------------------------------- */

static void env_set(const char *secret, const char *token)
{
	s3srv_env(&srv, secret, token);
}

/* Does s hold a secret of this test (the right one, a wrong one, a token)? */
static bool leaks(const char *s)
{
	return strstr(s, SECRET) || strstr(s, "wrong-" SECRET) ||
	       strstr(s, TOKEN);
}

static bool file_leaks(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	bool bad = false;

	while (f && fgets(line, sizeof(line), f))
		if (leaks(line)) {
			diag("%s: a secret in \"%.*s\"", path,
			     (int)strcspn(line, "\n"), line);
			bad = true;
		}
	if (f)
		fclose(f);
	return bad;
}

/* ---- the library ----------------------------------------------------------- */

static void count_note(void *arg, const char *line)
{
	(void)line;
	(*(int *)arg)++;
}

/*
 * Open spec and read all of it: 0 if every byte is right and the source's
 * name is spec's (without a query string) and holds no secret, or -errno.
 */
static int read_whole(const char *spec, int *notes)
{
	struct fl_source_opts o = { .note = count_note, .note_arg = notes };
	struct fl_source *s = NULL;
	uint8_t *buf;
	int ret = fl_source_open_ex(spec, &o, &s);

	if (ret < 0)
		return ret;
	buf = malloc(SIZE);
	if (fl_source_size(s) != SIZE || !buf)
		ret = -EINVAL;
	else
		ret = s->ops->read(s, buf, SIZE, 0);
	if (!ret && memcmp(buf, mem.map, SIZE))
		ret = -EBADMSG;
	if (!ret && (strncmp(s->desc, spec, strcspn(spec, "?")) ||
		     leaks(s->desc) || strstr(s->desc, "X-Amz-Signature")))
		ret = -EPROTO;
	free(buf);
	fl_source_put(s);
	return ret;
}

static int test_library(void)
{
	long from = access_lines();
	int notes = 0, ret;

	env_set(SECRET, NULL);
	ret = read_whole("s3://" BUCKET "/raw.mem", &notes);
	ok(ret == 0, "library: every byte of s3://%s/raw.mem (%d%s%s)", BUCKET,
	   ret, ret ? ": " : "", ret ? fl_last_error() : "");
	ok(requests_as_signed(from, "/" BUCKET "/raw.mem", false) > 1,
	   "... every request signed over host;range;x-amz-content-sha256;"
	   "x-amz-date, for bytes=A-B (no suffix range)");
	from = access_lines();
	ret = read_whole("s3://" BUCKET "/img/snap.img", &notes);
	ok(ret == 0, "library: every byte of the image at s3://%s/img/snap.img "
	   "(%d%s%s)", BUCKET, ret, ret ? ": " : "",
	   ret ? fl_last_error() : "");
	ok(requests_as_signed(from, "/" BUCKET "/img/snap.img", false) > 1,
	   "... every request signed so");

	from = access_lines();
	env_set(SECRET, TOKEN);
	ret = read_whole("s3://" BUCKET "/raw.mem", &notes);
	ok(ret == 0, "library: with AWS_SESSION_TOKEN (%d%s%s)", ret,
	   ret ? ": " : "", ret ? fl_last_error() : "");
	ok(requests_as_signed(from, "/" BUCKET "/raw.mem", true) > 1,
	   "... every request carried x-amz-security-token, signed");
	is_int(notes, 0, "no request was retried");

	/* a wrong secret: the server's 403, once, and one line */
	from = access_lines();
	env_set("wrong-" SECRET, NULL);
	ret = read_whole("s3://" BUCKET "/raw.mem", &notes);
	const char *e = fl_last_error();

	ok(ret == -EIO && strstr(e, "s3://" BUCKET "/raw.mem") &&
	   strstr(e, "403") && strstr(e, "SignatureDoesNotMatch") &&
	   !strchr(e, '\n'), "wrong secret: -EIO, \"%s\"", e);
	ok(!leaks(e), "... the message holds no secret");
	is_int(access_lines() - from, 1, "... after one request (a 403 is "
	       "not retried)");
	is_int(notes, 0, "... and no retry was announced");

	/* the missing variables, each named */
	static const char *const vars[] = { "AWS_ACCESS_KEY_ID",
					    "AWS_SECRET_ACCESS_KEY",
					    "AWS_REGION" };
	for (size_t i = 0; i < sizeof(vars) / sizeof(*vars); i++) {
		env_set(SECRET, NULL);
		unsetenv(vars[i]);
		from = access_lines();
		ret = read_whole("s3://" BUCKET "/raw.mem", &notes);
		e = fl_last_error();
		ok(ret == -EINVAL && strstr(e, vars[i]) &&
		   strstr(e, "s3://" BUCKET "/raw.mem"),
		   "%s unset: -EINVAL, \"%s\"", vars[i], e);
		is_int(access_lines() - from, 0, "... and no request made");
	}
	env_set(SECRET, NULL);
	unsetenv("AWS_REGION");
	setenv("AWS_DEFAULT_REGION", REGION, 1);
	ret = read_whole("s3://" BUCKET "/raw.mem", &notes);
	ok(ret == 0, "AWS_DEFAULT_REGION stands in for AWS_REGION (%d)", ret);

	env_set(SECRET, NULL);
	ret = read_whole("s3://" BUCKET "/absent.mem", &notes);
	e = fl_last_error();
	ok(ret == -EIO && strstr(e, "404") && strstr(e, "NoSuchKey"),
	   "a missing key: \"%s\"", e);
	return 0;
}

/* Presigned URLs (no credentials in the environment) read as before. */
static int test_presigned(void)
{
	char cmd[512], url[1024] = "";
	int notes = 0, ret;
	FILE *p;

	for (int expired = 0; expired < 2; expired++) {
		snprintf(cmd, sizeof(cmd), "FL_S3_SECRET='%s' node "
			 "tests/s3/presign.js '%s/%s/raw.mem' %s %s 60 %s",
			 SECRET, srv.endpoint, BUCKET, KEY_ID, REGION,
			 expired ? "120" : "0");
		p = popen(cmd, "r");
		url[0] = 0;
		if (!p || !fgets(url, sizeof(url), p)) {
			ok(0, "presign.js made a URL");
			if (p)
				pclose(p);
			return 0;
		}
		pclose(p);
		url[strcspn(url, "\n")] = 0;
		unsetenv("AWS_ACCESS_KEY_ID");
		unsetenv("AWS_SECRET_ACCESS_KEY");
		ret = read_whole(url, &notes);
		if (!expired) {
			ok(ret == 0, "a presigned URL: every byte (%d%s%s)",
			   ret, ret ? ": " : "", ret ? fl_last_error() : "");
			continue;
		}
		const char *e = fl_last_error();

		ok(ret == -EIO && strstr(e, "403") &&
		   strstr(e, "AccessDenied") && strstr(e, "raw.mem?...") &&
		   !strstr(e, "X-Amz-Signature"),
		   "an expired presigned URL: \"%s\"", e);
	}
	return 0;
}

/* ok() that got equals want, showing both otherwise. */
static void is_text(const char *got, const char *want, const char *name)
{
	if (!ok(!strcmp(got, want), "%s", name))
		diag("got \"%s\", want \"%s\"", got, want);
}

/* ---- one request off the wire ---------------------------------------------- */

struct capture {
	int fd;
	char req[8192];		/* the head, then the body (Content-Length) */
	size_t len;
};

static void *capture_one(void *arg)
{
	static const char body[] =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>"
		"AccessDenied</Code><Message>Access Denied</Message></Error>";
	struct capture *c = arg;
	char resp[512];
	size_t n = 0;
	ssize_t r;
	int fd = accept(c->fd, NULL, NULL);

	if (fd < 0)
		return NULL;
	while (n + 1 < sizeof(c->req) &&
	       (r = read(fd, c->req + n, sizeof(c->req) - 1 - n)) > 0) {
		const char *end, *cl;

		n += (size_t)r;
		c->req[n] = 0;
		end = strstr(c->req, "\r\n\r\n");
		cl = strcasestr(c->req, "\r\nContent-Length:");
		/* all of the head, and of a body as long as it says */
		if (end && (!cl || cl > end ||
			    n >= (size_t)(end + 4 - c->req) +
				 strtoul(cl + 17, NULL, 10)))
			break;
	}
	c->len = n;
	snprintf(resp, sizeof(resp), "HTTP/1.1 403 Forbidden\r\n"
		 "Content-Type: application/xml\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n%s", sizeof(body) - 1, body);
	if (write(fd, resp, strlen(resp)) < 0)
		diag("capture: write: %s", strerror(errno));
	close(fd);
	return NULL;
}

/* A listener of loopback for capture_one(), its URL in ep. */
static void capture_listen(struct capture *c, char *ep, size_t n)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);

	memset(c, 0, sizeof(*c));
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (c->fd < 0 || bind(c->fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(c->fd, 4) ||
	    getsockname(c->fd, (struct sockaddr *)&a, &alen))
		BAIL("listener: %s", strerror(errno));
	snprintf(ep, n, "http://127.0.0.1:%d/", ntohs(a.sin_port));
}

/* The value of header name in the captured request, or "". */
static const char *header(const char *req, const char *name, char *out,
			  size_t n)
{
	const char *p = req;

	out[0] = 0;
	while ((p = strstr(p, "\r\n"))) {
		p += 2;
		if (!strncasecmp(p, name, strlen(name)) &&
		    p[strlen(name)] == ':') {
			const char *v = p + strlen(name) + 1;

			v += strspn(v, " ");
			snprintf(out, n, "%.*s", (int)strcspn(v, "\r\n"), v);
			break;
		}
	}
	return out;
}

static int test_wire(void)
{
	struct capture c;
	char ep[64], v[1024], want[512], day[16];
	struct fl_source *s = NULL;
	regex_t re;
	pthread_t t;
	int ret;

	capture_listen(&c, ep, sizeof(ep));
	env_set(SECRET, TOKEN);
	setenv("AWS_ENDPOINT_URL", ep, 1);
	pthread_create(&t, NULL, capture_one, &c);
	ret = fl_source_open("s3://wire-bucket/dir/a b+c%.mem", &s);
	pthread_join(t, NULL);
	close(c.fd);
	const char *e = fl_last_error();

	ok(ret == -EIO && strstr(e, "s3://wire-bucket/dir/a b+c%.mem") &&
	   strstr(e, "403") && strstr(e, "AccessDenied") && !leaks(e),
	   "wire: 403 AccessDenied from a listener: \"%s\"", e);
	ok(!strncmp(c.req, "GET /wire-bucket/dir/a%20b%2Bc%25.mem HTTP/1.1\r\n",
		    48), "wire: path-style at AWS_ENDPOINT_URL, the key "
	   "percent-encoded once: \"%.*s\"", (int)strcspn(c.req, "\r"), c.req);
	header(c.req, "X-Amz-Date", v, sizeof(v));
	snprintf(day, sizeof(day), "%.8s", v);
	ok(strlen(v) == 16 && v[8] == 'T' && v[15] == 'Z',
	   "wire: X-Amz-Date %s", v);
	header(c.req, "Authorization", v, sizeof(v));
	snprintf(want, sizeof(want), "AWS4-HMAC-SHA256 Credential=%s/%s/%s/"
		 "s3/aws4_request, SignedHeaders=host;range;"
		 "x-amz-content-sha256;x-amz-date;x-amz-security-token, "
		 "Signature=", KEY_ID, day, REGION);
	regcomp(&re, "^[0-9a-f]{64}$", REG_EXTENDED | REG_NOSUB);
	ok(!strncmp(v, want, strlen(want)) &&
	   !regexec(&re, v + strlen(want), 0, NULL, 0),
	   "wire: Authorization: AWS4-HMAC-SHA256, the credential scope "
	   "(key id, day, region, s3), host;range;x-amz-content-sha256;"
	   "x-amz-date;x-amz-security-token signed: \"%s\"", v);
	regfree(&re);
	ok(!strstr(c.req, SECRET), "wire: the secret itself is not sent");
	is_text(header(c.req, "x-amz-content-sha256", v, sizeof(v)),
	       S3_EMPTY_SHA256, "wire: x-amz-content-sha256 is the empty "
	       "body's hash (a GET has none; the server never compares)");
	is_text(header(c.req, "x-amz-security-token", v, sizeof(v)), TOKEN,
	       "wire: x-amz-security-token is AWS_SESSION_TOKEN");
	is_text(header(c.req, "Range", v, sizeof(v)), "bytes=0-4095",
	       "wire: Range bytes=0-4095 (the open's probe; never a suffix)");
	env_set(SECRET, NULL);
	return 0;
}

/*
 * A create's first request, its lock's PUT, as it comes off the wire: the
 * payload hash is the SHA-256 of the body sent (the server never
 * compares them), signed with Content-Type; the listener's 403 stops it.
 */
static int test_wire_put(void)
{
	const char *raw = mem.path;
	struct capture c;
	char ep[64], v[1024], cmd[1024], hex[IMAGE_HASH_HEX];
	uint8_t sha[IMAGE_HASH_LEN];
	pthread_t t;
	int st;

	capture_listen(&c, ep, sizeof(ep));
	env_set(SECRET, NULL);
	setenv("AWS_ENDPOINT_URL", ep, 1);
	pthread_create(&t, NULL, capture_one, &c);
	snprintf(cmd, sizeof(cmd), "'%s' image create '%s' "
		 "s3://wire-bucket/p/images/x.fli --store s3://wire-bucket/p "
		 ">/dev/null 2>&1", serve_bin(), raw);
	st = system(cmd);
	pthread_join(t, NULL);
	close(c.fd);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 1, "wire PUT: the listener's "
	   "403 stops the create (exit 0x%x)", st);
	ok(!strncmp(c.req, "PUT /wire-bucket/p/locks/create-", 32),
	   "wire PUT: its first request is its lock's PUT: \"%.*s\"",
	   (int)strcspn(c.req, "\r"), c.req);
	const char *body = strstr(c.req, "\r\n\r\n");
	size_t blen = body ? c.len - (size_t)(body + 4 - c.req) : 0;

	ok(body && blen > 0 && image_sha256(body + 4, blen, sha) == 0,
	   "wire PUT: a body of %zu bytes came", blen);
	image_hash_hex(sha, hex);
	is_text(header(c.req, "x-amz-content-sha256", v, sizeof(v)), hex,
		"wire PUT: x-amz-content-sha256 is the SHA-256 of the body "
		"that came");
	snprintf(cmd, sizeof(cmd), "%zu", blen);
	is_text(header(c.req, "Content-Length", v, sizeof(v)), cmd,
		"wire PUT: Content-Length is the body's");
	header(c.req, "Authorization", v, sizeof(v));
	ok(strstr(v, "SignedHeaders=content-type;host;if-none-match;"
		  "x-amz-content-sha256;x-amz-date,") != NULL, "wire PUT: "
	   "signed over content-type, host, If-None-Match, the payload hash "
	   "and the date: \"%s\"", v);
	unsetenv("AWS_ENDPOINT_URL");
	return 0;
}

/* ---- specs and URLs ---------------------------------------------------------- */

static int test_urls(void)
{
	static const struct {
		const char *spec, *endpoint, *url;
	} cases[] = {
		{ "s3://my-bucket/k/x.img", NULL,
		  "https://my-bucket.s3." REGION ".amazonaws.com/k/x.img" },
		{ "s3://my.bucket/k", NULL,
		  "https://s3." REGION ".amazonaws.com/my.bucket/k" },
		{ "s3://b/k~_-.x", "https://store.example:9000//",
		  "https://store.example:9000/b/k~_-.x" },
	};
	struct s3_target t;

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		env_set(SECRET, NULL);
		unsetenv("AWS_ENDPOINT_URL");
		if (cases[i].endpoint)
			setenv("AWS_ENDPOINT_URL_S3", cases[i].endpoint, 1);
		setenv("AWS_ENDPOINT_URL", "http://not-this.invalid", 1);
		if (!cases[i].endpoint)
			unsetenv("AWS_ENDPOINT_URL");
		int ret = s3_target_get(cases[i].spec, &t);

		ok(ret == 0 && !strcmp(t.url, cases[i].url) &&
		   !strcmp(t.sigv4, "aws:amz:" REGION ":s3"),
		   "%s -> %s", cases[i].spec, ret ? fl_last_error() : t.url);
		if (!ret)
			s3_target_free(&t);
	}
	static const char *const bad[] = { "s3://bucket", "s3://bucket/",
					   "s3:///key", "s3://bu cket/k",
					   "s3://b/k\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		ok(source_check_spec(bad[i]) == -EINVAL,
		   "refused: \"%.*s\"%s", (int)strcspn(bad[i], "\n"), bad[i],
		   strchr(bad[i], '\n') ? " with a newline" : "");
	env_set(SECRET, NULL);
	setenv("AWS_SESSION_TOKEN", "a\r\nX-Injected: 1", 1);
	ok(s3_target_get("s3://b/k", &t) == -EINVAL &&
	   strstr(fl_last_error(), "AWS_SESSION_TOKEN"),
	   "a token with CR LF is refused: %s", fl_last_error());
	env_set(SECRET, NULL);
	setenv("AWS_REGION", "eu-west-3:x", 1);
	ok(s3_target_get("s3://b/k", &t) == -EINVAL &&
	   strstr(fl_last_error(), "AWS_REGION"),
	   "a region with ':' is refused: %s", fl_last_error());

	char code[32];

	ok(s3_error_code("<Error><Code>NoSuchKey</Code>", 29, code,
			 sizeof(code)) && !strcmp(code, "NoSuchKey"),
	   "error code parsed: %s", code);
	ok(!s3_error_code("<Error><Code>No Such</Code>", 27, code,
			  sizeof(code)) && !code[0],
	   "a code with a space is not taken");
	ok(!s3_error_code("<Error><Code>NoSuchKey</Cod", 27, code,
			  sizeof(code)), "nor one cut short");
	ok(!s3_error_code("<Code>X</Code>", 14, code, sizeof(code)),
	   "nor one outside <Error>");
	return 0;
}

/* ---- the daemon ------------------------------------------------------------ */

/* `faultline status [--json]` for s: its output (stdout and stderr). */
static void run_status(const struct serve *s, bool json, char *out,
		       size_t len)
{
	char cmd[512];
	FILE *p;
	size_t n;

	snprintf(cmd, sizeof(cmd), "'%s' status --socket '%s' %s 2>&1",
		 serve_bin(), s->sock, json ? "--json" : "");
	p = popen(cmd, "r");
	n = p ? fread(out, 1, len - 1, p) : 0;
	out[n] = 0;
	if (p)
		pclose(p);
}

static void restore(const char *what, const char *spec,
		    const char *const *extra)
{
	struct su_client_args a = {
		.mem = &mem, .nregions = 2, .sizes = { SIZE / 2, SIZE / 2 },
		.page_size = 4096, .order = SU_FORWARD, .stop_fd = -1,
		.result_fd = -1,
	};
	static char out[1 << 16];
	struct serve s;

	serve_init(&s);
	if (serve_start(&s, spec, extra)) {
		ok(0, "%s: daemon started", what);
		serve_cleanup(&s);
		return;
	}
	a.sock = s.sock;
	int r = su_reap(su_spawn(su_client_main, &a), 30000);

	ok(r == 0, "%s: every byte right (client result %d)", what, r);
	run_status(&s, false, out, sizeof(out));
	ok(strstr(out, spec) && !leaks(out),
	   "%s: faultline status names %s, and no secret", what, spec);
	if (!strstr(out, spec))
		diag("%s", out);
	run_status(&s, true, out, sizeof(out));
	ok(strstr(out, spec) && !leaks(out),
	   "%s: faultline status --json names it, and no secret", what);
	serve_stop(&s);
	ok(!file_leaks(s.log), "%s: no secret in the daemon's log", what);
	if (r)
		serve_log_dump(&s, 0);
	serve_cleanup(&s);
}

/* The daemon refuses spec at start: exit 1, a line holding every kw. */
static void refused(const char *what, const char *spec,
		    const char *const *kw)
{
	char line[1024] = "";
	struct serve s;
	bool all = false;

	serve_init(&s);
	if (!serve_start(&s, spec, NULL)) {
		ok(0, "%s: the daemon refuses to start", what);
		serve_stop(&s);
		serve_cleanup(&s);
		return;
	}
	serve_wait(&s, 5000);
	ok(s.reaped && WIFEXITED(s.status) && WEXITSTATUS(s.status) == 1,
	   "%s: the daemon exits 1 at start (status 0x%x)", what, s.status);
	FILE *f = fopen(s.log, "r");

	while (f && fgets(line, sizeof(line), f)) {
		all = true;
		for (int i = 0; kw[i]; i++)
			all &= strstr(line, kw[i]) != NULL;
		if (all)
			break;
	}
	if (f)
		fclose(f);
	line[strcspn(line, "\n")] = 0;
	ok(all, "%s: one line says so: \"%s\"", what, line);
	ok(!file_leaks(s.log), "%s: no secret in the daemon's log", what);
	serve_cleanup(&s);
}

static int test_daemon(void)
{
	char cache[128];
	const char *const cached[] = { "--cache", cache, NULL };

	snprintf(cache, sizeof(cache), "%s/cache", tmp);
	env_set(SECRET, TOKEN);
	restore("serve s3:// raw", "s3://" BUCKET "/raw.mem", NULL);
	restore("serve s3:// image", "s3://" BUCKET "/img/snap.img", NULL);
	restore("serve s3:// raw, cold cache", "s3://" BUCKET "/raw.mem",
		cached);
	long from = access_lines();

	restore("serve s3:// raw, warm cache", "s3://" BUCKET "/raw.mem",
		cached);
	ok(access_lines() - from <= 1, "warm cache: at most the open's "
	   "probe reached the server (%ld requests)", access_lines() - from);

	env_set("wrong-" SECRET, NULL);
	refused("wrong secret", "s3://" BUCKET "/raw.mem",
		(const char *[]){ "SignatureDoesNotMatch",
				  "s3://" BUCKET "/raw.mem", "403", NULL });
	env_set(SECRET, NULL);
	unsetenv("AWS_REGION");
	refused("no AWS_REGION", "s3://" BUCKET "/raw.mem",
		(const char *[]){ "AWS_REGION", "s3://" BUCKET "/raw.mem",
				  NULL });
	env_set(SECRET, NULL);
	return 0;
}

/* ---- a chunk store in the bucket ------------------------------------------- */

#define STORE	"s3://" BUCKET "/fleet"

/*
 * `faultline image create RAW IMG --store STORE [extra]`: its exit status,
 * its output (stdout and stderr) in out.
 */
static int create(const char *raw, const char *img, const char *extra,
		  char *out, size_t len)
{
	char cmd[1024];
	size_t n = 0;
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "'%s' image create '%s' '%s' --store "
		 STORE " %s 2>&1", serve_bin(), raw, img, extra);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	n = fread(out, 1, len - 1, p);
	out[n] = 0;
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * Requests in the access log after line from with method m (NULL: any)
 * whose path starts with prefix; *unsigned_ counts those not signed by
 * header (sigv4) over host;x-amz-content-sha256;x-amz-date.
 */
static long count_requests(long from, const char *m, const char *prefix,
			   long *unsigned_)
{
	FILE *f = fopen(srv.access, "r");
	char line[1024], mm[16], p[512], st[8], range[64], auth[16], sh[256];
	long i = 0, n = 0;

	*unsigned_ = 0;
	while (f && fgets(line, sizeof(line), f)) {
		if (i++ < from ||
		    sscanf(line, "%15s %511s %7s %63s %15s %255s", mm, p, st,
			   range, auth, sh) != 6 ||
		    (m && strcmp(mm, m)) || strncmp(p, prefix, strlen(prefix)))
			continue;
		n++;
		if (strcmp(auth, "sigv4") || !strstr(sh, "host;") ||
		    !strstr(sh, "x-amz-content-sha256;x-amz-date")) {
			diag("not signed so: %s", line);
			(*unsigned_)++;
		}
	}
	if (f)
		fclose(f);
	return n;
}

/* Is the object key in the server's directory (s3rver's layout)? */
static bool stored(const char *key)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s/%s._S3rver_object", srv.dir,
		 BUCKET, key);
	return access(path, F_OK) == 0;
}

/* `faultline image SUB ARGS`: its exit status and output (both). */
static int image_cmd(const char *args, char *out, size_t n)
{
	char cmd[1024];
	FILE *p;
	size_t got;

	snprintf(cmd, sizeof(cmd), "'%s' image %s 2>&1", serve_bin(), args);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	got = fread(out, 1, n - 1, p);
	out[got] = 0;
	int st = pclose(p);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * inspect and verify of images in the bucket: the diff's chain, every
 * chunk of a.fli good; then one of its objects replaced by other bytes
 * (a.mem is the raw memory, its chunk 3 changed): verify names it.
 */
static void check_remote(const char *raw)
{
	static char out[8192];
	uint8_t sha[IMAGE_HASH_LEN], *chunk = malloc(512 << 10);
	char hex[IMAGE_HASH_HEX], key[256], junk[128];
	int fd = open(raw, O_RDONLY), st;

	st = image_cmd("inspect " STORE "/images/d.fli", out, sizeof(out));
	ok(st == 0 && strstr(out, "parent:      ") && strstr(out, "(a.fli)") &&
	   strstr(out, "chain:       2 images"), "inspect s3://: the diff "
	   "and its chain (exit %d)", st);
	if (st)
		diag("%s", out);
	st = image_cmd("verify " STORE "/images/a.fli", out, sizeof(out));
	ok(st == 0 && strstr(out, "all chunks good"), "verify s3://: every "
	   "chunk of a.fli good (exit %d)", st);
	ok(chunk && fd >= 0 && pread(fd, chunk, 512 << 10, 3 * (512 << 10)) ==
	   512 << 10 && image_sha256(chunk, 512 << 10, sha) == 0,
	   "the hash of a.fli's chunk 3");
	image_hash_hex(sha, hex);
	snprintf(key, sizeof(key), "fleet/chunks/%.2s/%s", hex, hex);
	snprintf(junk, sizeof(junk), "%s/junk", tmp);
	int jfd = open(junk, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ok(jfd >= 0 && write(jfd, "not that chunk", 14) == 14 &&
	   upload(junk, key) == 0, "... its object replaced by 14 bytes");
	st = image_cmd("verify " STORE "/images/a.fli", out, sizeof(out));
	ok(st == 1 && strstr(out, hex) && strstr(out, "1 bad chunk"),
	   "verify s3://: the replaced object named, 1 bad chunk (exit %d)",
	   st);
	if (st != 1)
		diag("%s", out);
	if (jfd >= 0)
		close(jfd);
	if (fd >= 0)
		close(fd);
	unlink(junk);
	free(chunk);
}

/* Delete the object key as a user would (signed with curl). */
static int remove_key(const char *key)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "curl -sSf -o /dev/null --aws-sigv4 "
		 "aws:amz:%s:s3 -u '%s:%s' -X DELETE -H "
		 "'x-amz-content-sha256: " S3_EMPTY_SHA256 "' '%s/%s/%s'",
		 REGION, KEY_ID, SECRET, srv.endpoint, BUCKET, key);
	return system(cmd);
}

/* Objects under fleet/locks/ in the server's directory. */
static int locks_left(void)
{
	char cmd[600], out[64] = "";
	FILE *p;

	snprintf(cmd, sizeof(cmd), "ls '%s/%s/fleet/locks' 2>/dev/null | "
		 "grep -c _S3rver_object", srv.dir, BUCKET);
	p = popen(cmd, "r");
	if (p && !fgets(out, sizeof(out), p))
		out[0] = 0;
	if (p)
		pclose(p);
	return atoi(out);
}

/* The key of chunk i (512 KiB) of the memory file fd in the store. */
static bool chunk_key(int fd, int i, char *key, size_t n)
{
	uint8_t sha[IMAGE_HASH_LEN], *chunk = malloc(512 << 10);
	char hex[IMAGE_HASH_HEX];
	bool got = chunk && fd >= 0 &&
		   pread(fd, chunk, 512 << 10, (off_t)i * (512 << 10)) ==
		   512 << 10 && image_sha256(chunk, 512 << 10, sha) == 0;

	image_hash_hex(sha, hex);
	snprintf(key, n, "fleet/chunks/%.2s/%s", hex, hex);
	free(chunk);
	return got;
}

/* Is s one line, ending in its newline? */
static bool one_line(const char *s)
{
	const char *nl = strchr(s, '\n');

	return nl && !nl[1];
}

/* The content id `image inspect` prints for spec, into id. */
static bool inspect_id(const char *spec, char id[IMAGE_ID_HEX])
{
	static char out[8192];
	char args[512];
	const char *at;

	snprintf(args, sizeof(args), "inspect %s", spec);
	if (image_cmd(args, out, sizeof(out)) != 0 ||
	    !(at = strstr(out, "id:          ")))
		return false;
	snprintf(id, IMAGE_ID_HEX, "%.*s", IMAGE_ID_HEX - 1, at + 13);
	return strlen(id) == IMAGE_ID_HEX - 1;
}

/*
 * gc of the store in the bucket, by its registry (a.fli, b.fli = b2.fli,
 * and d.fli over a.fli, each registered by its create).  First a.fli
 * made whole again (its chunk 3 object, replaced above, removed and
 * created again).  Given an image, gc refuses and deletes nothing (it
 * used to delete every chunk of a.fli that b.fli did not use): a.fli
 * still verifies.  A dry run deletes nothing; a store whose registry
 * marker is gone makes gc refuse until an image is registered; a
 * create's lock makes it refuse.  a.fli's index removed by hand keeps
 * its chunks; a.fli cannot be deleted while d.fli names it; d.fli
 * deleted, then a.fli by its content id, gc deletes what only they had
 * (a.fli's chunk 17 among them), its DELETEs signed, its own lock gone,
 * and b.fli still verifies.
 */
static void check_gc(const char *raw)
{
	static char out[8192];
	char key[256], lock[128], id[IMAGE_ID_HEX], args[512];
	const char *chunks = "/" BUCKET "/fleet/chunks/";
	int fd = open(raw, O_RDONLY), st;
	long from, uns;

	ok(chunk_key(fd, 3, key, sizeof(key)),
	   "gc: the key of a.fli's chunk 3, replaced above");
	st = remove_key(key) == 0 ? create(raw, STORE "/images/a.fli", "", out,
					   sizeof(out)) : -1;
	ok(st == 0 && strstr(out, "new chunks:  1 of 32 stored"),
	   "... removed, and a.fli created again: that chunk put back "
	   "(exit %d)", st);
	ok(chunk_key(fd, 17, key, sizeof(key)),
	   "gc: the key of a.fli's chunk 17 (a.fli's alone)");
	ok(stored(key), "... its object is in the bucket");

	/* the reproduction: gc given b.fli must not take a.fli's chunks */
	from = access_lines();
	st = image_cmd("gc --store " STORE " " STORE "/images/b.fli", out,
		       sizeof(out));
	ok(st == 2 && strstr(out, "gc takes no images") && one_line(out),
	   "gc given b.fli: refused in one line, gc keeps what the registry "
	   "names (exit %d)", st);
	if (st != 2)
		diag("%s", out);
	is_int(count_requests(from, "DELETE", chunks, &uns), 0,
	       "... no chunk DELETE");
	st = image_cmd("verify " STORE "/images/a.fli", out, sizeof(out));
	ok(st == 0 && strstr(out, "all chunks good") && stored(key),
	   "... and a.fli, in the same store, still verifies (exit %d)", st);
	if (st)
		diag("%s", out);

	st = image_cmd("gc --store " STORE " --dry-run", out, sizeof(out));
	ok(st == 0 && strstr(out, "3 images registered") &&
	   strstr(out, "0 would be deleted"),
	   "gc --dry-run: a.fli, b.fli and d.fli registered, nothing to "
	   "delete (exit %d)", st);
	if (st || !strstr(out, "3 images"))
		diag("%s", out);

	/* a store from before the registry: its marker gone */
	from = access_lines();
	st = remove_key("fleet/registry/.active") == 0 ?
	     image_cmd("gc --store " STORE, out, sizeof(out)) : -1;
	ok(st == 1 && strstr(out, "no registry") &&
	   strstr(out, "image register") && one_line(out) && stored(key),
	   "gc of a store without its registry marker: refused in one line "
	   "(exit %d)", st);
	is_int(count_requests(from, "DELETE", chunks, &uns), 0,
	       "... no chunk DELETE");
	st = image_cmd("register --store " STORE " " STORE "/images/b.fli",
		       out, sizeof(out));
	ok(st == 0 && strstr(out, "registered already") &&
	   stored("fleet/registry/.active"),
	   "image register b.fli: the registry on again (exit %d)", st);

	snprintf(lock, sizeof(lock), "%s/lock", tmp);
	int lfd = open(lock, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ok(lfd >= 0 && write(lfd, "a create\n", 9) == 9 &&
	   upload(lock, "fleet/locks/create-0123456789abcdef") == 0,
	   "gc: a create's lock in the bucket");
	from = access_lines();
	st = image_cmd("gc --store " STORE, out, sizeof(out));
	ok(st == 1 && strstr(out, "locks/create-0123456789abcdef") &&
	   strstr(out, "nothing deleted") && stored(key),
	   "gc: refused while a create holds its lock, nothing deleted "
	   "(exit %d)", st);
	if (st != 1)
		diag("%s", out);
	is_int(count_requests(from, "DELETE", chunks, &uns), 0,
	       "... no chunk DELETE");
	ok(remove_key("fleet/locks/create-0123456789abcdef") == 0,
	   "... the create's lock taken away");

	/* a.fli's index removed by hand: nothing changes until delete */
	ok(inspect_id(STORE "/images/a.fli", id) &&
	   remove_key("fleet/images/a.fli") == 0, "a.fli's index (%s) "
	   "removed by hand", id);
	st = image_cmd("gc --store " STORE, out, sizeof(out));
	ok(st == 0 && strstr(out, " 0 deleted") && stored(key),
	   "... gc deletes nothing: a.fli is registered (exit %d)", st);
	snprintf(args, sizeof(args), "delete --store " STORE " %s", id);
	st = image_cmd(args, out, sizeof(out));
	ok(st == 1 && strstr(out, "is the parent of") &&
	   strstr(out, "nothing deleted"),
	   "image delete a.fli while d.fli names it: refused (exit %d)", st);
	st = image_cmd("delete --store " STORE " " STORE "/images/d.fli", out,
		       sizeof(out));
	ok(st == 0 && strstr(out, "deleted from the registry"),
	   "image delete d.fli (exit %d)", st);
	st = image_cmd(args, out, sizeof(out));
	ok(st == 0 && strstr(out, id), "image delete a.fli by its content "
	   "id (exit %d)", st);

	from = access_lines();
	st = image_cmd("gc --store " STORE, out, sizeof(out));
	ok(st == 0 && strstr(out, "1 image registered") &&
	   strstr(out, " deleted (") && !stored(key),
	   "gc: the chunks only a.fli and d.fli held deleted (exit %d)", st);
	diag("%.*s", (int)strcspn(out, "\n"), out);
	long n = count_requests(from, "DELETE", chunks, &uns);

	ok(n >= 4 && !uns, "... %ld signed DELETEs of chunks", n);
	is_int(locks_left(), 0, "... and its own lock taken away");
	st = image_cmd("verify " STORE "/images/b.fli", out, sizeof(out));
	ok(st == 0 && strstr(out, "all chunks good"), "gc: b.fli, "
	   "registered, verifies (exit %d)", st);
	if (lfd >= 0)
		close(lfd);
	if (fd >= 0)
		close(fd);
	unlink(lock);
}

/* The store's cases share two variants of the memory, a diff, a cache. */
static struct {
	char a[128], c[128], d[128], cache[128];
} sv;

/* Snapshots into an s3:// store: each uploads only its new chunks. */
static int test_store_upload(void)
{
	static char out[8192];
	const char *chunks = "/" BUCKET "/fleet/chunks/";
	char cmd[1024];
	long from, uns, n;
	int st, fd;

	/* a: the memory with chunks 3 and 17 (of 32) changed; c: chunk 9 */
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && cp '%s' '%s'", mem.path,
		 sv.a, mem.path, sv.c);
	ok(system(cmd) == 0, "store: two variants of the memory");
	fd = open(sv.a, O_WRONLY);
	ok(fd >= 0 && pwrite(fd, "changed", 7, 3 * (512 << 10) + 100) == 7 &&
	   pwrite(fd, "changed", 7, 17 * (512 << 10)) == 7, "store: a.mem");
	close(fd);
	fd = open(sv.c, O_WRONLY);
	ok(fd >= 0 && pwrite(fd, "other", 5, 9 * (512 << 10) + 7) == 5,
	   "store: c.mem");
	close(fd);
	env_set(SECRET, NULL);

	from = access_lines();
	st = create(sv.a, STORE "/images/a.fli", "", out, sizeof(out));
	ok(st == 0 && strstr(out, "new chunks:  32 of 32 stored"),
	   "store: the first snapshot uploads its 32 chunks (exit %d)", st);
	if (st)
		diag("%s", out);
	is_int(count_requests(from, "PUT", chunks, &uns), 32,
	       "... 32 PUTs of chunks in the access log");
	is_int(uns, 0, "... every one signed");
	ok(stored("fleet/images/a.fli"), "... and its index at "
	   "fleet/images/a.fli");

	from = access_lines();
	st = create(mem.path, STORE "/images/b.fli", "", out, sizeof(out));
	ok(st == 0 && strstr(out, "new chunks:  2 of 32 stored, ") &&
	   strstr(out, " bytes uploaded to " STORE "\n"),
	   "store: the second snapshot uploads only its 2 new chunks "
	   "(exit %d)", st);
	if (st || !strstr(out, "new chunks:  2 of"))
		diag("%s", out);
	is_int(count_requests(from, "PUT", chunks, &uns), 2,
	       "... 2 PUTs of chunks in the access log");
	is_int(count_requests(from, "PUT", "/" BUCKET "/fleet/images/b.fli",
			      &uns), 1, "... and 1 of its index");
	n = count_requests(from, "HEAD", chunks, &uns);
	ok(n == 32 && !uns, "... after a signed HEAD of each of its 32 "
	   "chunks (%ld)", n);

	from = access_lines();
	st = create(mem.path, STORE "/images/b2.fli", "", out, sizeof(out));
	ok(st == 0 && strstr(out, "new chunks:  0 of 32 stored"),
	   "store: the same bytes again upload no chunk (exit %d)", st);
	is_int(count_requests(from, "PUT", chunks, &uns), 0,
	       "... no PUT of a chunk");
	return 0;
}

/* Served from the store, cold and warm cache; a diff over its parent. */
static int test_store_serve(void)
{
	static char out[8192];
	const char *const cached[] = { "--cache", sv.cache, NULL };
	const char *chunks = "/" BUCKET "/fleet/chunks/";
	long from, uns, n;
	int st, fd;

	/* served: its store found from its key, every GET signed */
	env_set(SECRET, TOKEN);
	from = access_lines();
	restore("serve s3:// store image, cold cache",
		STORE "/images/b.fli", cached);
	n = count_requests(from, "GET", chunks, &uns);
	ok(n > 0 && n <= 32 && !uns, "... %ld chunk GETs, every one signed",
	   n);
	from = access_lines();
	restore("serve s3:// store image, warm cache",
		STORE "/images/b.fli", cached);
	is_int(count_requests(from, "GET", chunks, &uns), 0,
	       "... warm cache: no chunk fetched again");

	/*
	 * A diff over a (in the bucket): the two pages a changed, as the
	 * memory has them; served over its parent, it is the memory.
	 */
	fd = open(sv.d, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ok(fd >= 0 && ftruncate(fd, (off_t)SIZE) == 0 &&
	   pwrite(fd, mem.map + 384 * 4096, 4096, 384 * 4096) == 4096 &&
	   pwrite(fd, mem.map + 2176 * 4096, 4096, 2176 * 4096) == 4096,
	   "store: a diff of two pages");
	close(fd);
	from = access_lines();
	st = create(sv.d, STORE "/images/d.fli", "--parent " STORE "/images/a.fli",
		    out, sizeof(out));
	ok(st == 0 && strstr(out, "parent:      ") && strstr(out, "(a.fli)") &&
	   strstr(out, "new chunks:  2 of 2 stored"),
	   "store: a diff with --parent s3://: its 2 chunks (exit %d)", st);
	if (st)
		diag("%s", out);
	is_int(count_requests(from, "PUT", chunks, &uns), 2,
	       "... 2 PUTs of chunks");
	restore("serve s3:// diff over its s3:// parent", STORE "/images/d.fli",
		cached);
	return 0;
}

/* Refused: a wrong secret, no secret, a local image with an s3:// store. */
static int test_store_refused(void)
{
	static char out[8192];
	const char *chunks = "/" BUCKET "/fleet/chunks/";
	long from, uns;
	int st;

	/* a wrong secret: its lock's PUT gets 403, one line, nothing put */
	env_set("wrong-" SECRET, NULL);
	from = access_lines();
	st = create(sv.c, STORE "/images/c.fli", "", out, sizeof(out));
	out[strcspn(out, "\n")] = 0;
	ok(st == 1 && strstr(out, "403") &&
	   strstr(out, "SignatureDoesNotMatch") &&
	   strstr(out, STORE "/locks/create-"),
	   "store: wrong secret: exit %d, \"%s\"", st, out);
	ok(!leaks(out), "... the message holds no secret");
	is_int(count_requests(from, "PUT", "/", &uns), 1, "... one PUT, "
	       "its lock's, refused");
	is_int(count_requests(from, NULL, chunks, &uns), 0, "... no chunk "
	       "asked for or put");
	ok(!stored("fleet/images/c.fli"), "... and no index");

	env_set(SECRET, NULL);
	unsetenv("AWS_SECRET_ACCESS_KEY");
	from = access_lines();
	st = create(sv.c, STORE "/images/c.fli", "", out, sizeof(out));
	ok(st == 1 && strstr(out, "AWS_SECRET_ACCESS_KEY is not set"),
	   "store: no secret: exit %d, \"%.*s\"", st,
	   (int)strcspn(out, "\n"), out);
	is_int(access_lines() - from, 0, "... and no request made");

	env_set(SECRET, NULL);
	st = create(sv.c, "/tmp/local.fli", "", out, sizeof(out));
	ok(st == 2 && strstr(out, "s3://BUCKET/PREFIX/images/NAME"),
	   "store: a local image with an s3:// store is refused (exit %d)",
	   st);
	return 0;
}

/* The store's images read remotely, then its garbage collected. */
static int test_store_gc(void)
{
	check_remote(sv.a);
	check_gc(sv.a);
	unlink(sv.a);
	unlink(sv.c);
	unlink(sv.d);
	return 0;
}

/* ---- leases of the store's locks ------------------------------------------- */

#define LSTORE	"s3://" BUCKET "/lease"
#define LEASE	3	/* s: FAULTLINE_S3_LOCK_LEASE of the creates below */
#define LEASE_S	"3"

/* `exec faultline image ARGS` in the background, output to out: its pid. */
static pid_t image_bg(const char *args, const char *out)
{
	char cmd[1024];
	pid_t pid;

	snprintf(cmd, sizeof(cmd), "exec '%s' image %s", serve_bin(), args);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("FAULTLINE_S3_LOCK_LEASE", LEASE_S, 1);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Wait (up to 30 s) for the first chunk PUT under lease/ after line from. */
static bool chunk_put_seen(long from)
{
	long uns;

	for (int i = 0; i < 15000; i++) {
		if (count_requests(from, "PUT", "/" BUCKET "/lease/chunks/",
				   &uns) > 0)
			return true;
		usleep(2000);
	}
	return false;
}

/* Lock objects under lease/locks/ in the server's directory. */
static int lease_locks(void)
{
	char cmd[600], out[64] = "";
	FILE *p;

	snprintf(cmd, sizeof(cmd), "ls '%s/%s/lease/locks' 2>/dev/null | "
		 "grep -c '_S3rver_object$'", srv.dir, BUCKET);
	p = popen(cmd, "r");
	if (p && !fgets(out, sizeof(out), p))
		out[0] = 0;
	if (p)
		pclose(p);
	return atoi(out);
}

/*
 * gc of the lease store (keeping keep.fli) until it goes on, once a
 * second for up to 60 s: its exit status, its output in out, the number
 * of runs in *runs.
 */
static int gc_until_taken(char *out, size_t n, int *runs)
{
	int st = -1;

	for (*runs = 0; *runs < 60; (*runs)++) {
		if (*runs)
			sleep(1);
		st = image_cmd("gc --store " LSTORE, out, n);
		if (st != 1 || !strstr(out, " is held ("))
			break;
	}
	return st;
}

/* The whole file at path, NUL-terminated, into out. */
static void slurp(const char *path, char *out, size_t n)
{
	FILE *f = fopen(path, "r");
	size_t got = f ? fread(out, 1, n - 1, f) : 0;

	out[got] = 0;
	if (f)
		fclose(f);
}

static int lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/*
 * A create killed mid-upload leaves its lock: gc refuses while its lease
 * runs, naming when it ends, then takes it over after it (one line) and
 * sweeps.  A create paused (SIGSTOP) past its lease is taken over by gc;
 * woken up (SIGCONT), it stops with one line and puts no index.
 */
static int check_leases(void)
{
	static char out[8192];
	struct mem_file big;
	char log[128], args[512];
	uint64_t t0;
	long from, uns;
	int st, runs;
	pid_t pid;

	snprintf(log, sizeof(log), "%s/create.out", tmp);
	env_set(SECRET, NULL);
	snprintf(args, sizeof(args), "create '%s' " LSTORE "/images/keep.fli "
		 "--store " LSTORE, mem.path);
	st = image_cmd(args, out, sizeof(out));
	ok(st == 0, "lease: a kept image in s3://.../lease (exit %d)", st);
	if (st)
		diag("%s", out);

	/* killed mid-upload */
	if (mem_file_create(&big, 32ull << 20, 0x1ea5e))
		BAIL("setup: %s", strerror(errno));
	snprintf(args, sizeof(args), "create '%s' " LSTORE "/images/killed.fli "
		 "--store " LSTORE, big.path);
	from = access_lines();
	pid = image_bg(args, log);
	ok(chunk_put_seen(from), "lease: a create (lease %d s) uploading", LEASE);
	kill(pid, SIGKILL);
	t0 = su_now_ms();
	su_reap(pid, 5000);
	ok(!stored("lease/images/killed.fli") && lease_locks() == 1,
	   "... SIGKILLed: no index, its lock left in the bucket");
	st = image_cmd("gc --store " LSTORE, out, sizeof(out));
	/* refused unless the lease ran out meanwhile (a slow machine) */
	ok((st == 1 && strstr(out, "locks/create-") &&
	    strstr(out, "taken over in ") && strstr(out, "nothing deleted")) ||
	   (st == 0 && su_now_ms() - t0 >= LEASE * 1000),
	   "gc right after: refused while its lease runs (exit %d): %.*s", st,
	   (int)strcspn(out, "\n"), out);
	from = access_lines();
	st = gc_until_taken(out, sizeof(out), &runs);
	ok(st == 0 && strstr(out, "locks/create-") &&
	   strstr(out, ": taken over: not renewed for ") &&
	   strstr(out, "by the store's clock, past its lease of 3 s (host "),
	   "gc takes the dead create's lock over after its lease, one line "
	   "(exit %d, %d refusals)", st, runs);
	diag("%.*s", (int)strcspn(out, "\n"), out);
	ok(su_now_ms() - t0 >= (LEASE - 1) * 1000, "... not before its lease "
	   "ran out (%llu ms after the kill)",
	   (unsigned long long)(su_now_ms() - t0));
	ok(count_requests(from, "DELETE", "/" BUCKET "/lease/chunks/", &uns) >
	   0 && lease_locks() == 0, "... swept the dead create's chunks, no "
	   "lock left");
	mem_file_destroy(&big);

	/* paused past its lease */
	if (mem_file_create(&big, 32ull << 20, 0x9a05e))
		BAIL("setup: %s", strerror(errno));
	snprintf(args, sizeof(args), "create '%s' " LSTORE "/images/paused.fli "
		 "--store " LSTORE, big.path);
	from = access_lines();
	pid = image_bg(args, log);
	ok(chunk_put_seen(from), "lease: another create uploading");
	kill(pid, SIGSTOP);
	ok(!stored("lease/images/paused.fli"), "... SIGSTOPped before its "
	   "index");
	st = gc_until_taken(out, sizeof(out), &runs);
	ok(st == 0 && strstr(out, ": taken over: not renewed for "),
	   "gc takes the paused create's lock over (exit %d, %d refusals)",
	   st, runs);
	kill(pid, SIGCONT);
	st = su_reap(pid, 60000);
	slurp(log, out, sizeof(out));
	ok(st == 1 && lines(out) == 1 && strstr(out, "locks/create-") &&
	   (strstr(out, "taken over") || strstr(out, "lease")),
	   "... SIGCONT: the create stops, one line (exit %d): %s", st, out);
	ok(!stored("lease/images/paused.fli"), "... and puts no index");
	is_int(lease_locks(), 0, "... nor leaves a lock");
	st = image_cmd("verify " LSTORE "/images/keep.fli", out, sizeof(out));
	ok(st == 0, "the kept image verifies (exit %d)", st);
	mem_file_destroy(&big);
	unlink(log);
	return 0;
}

static const struct tap_case cases[] = {
	{ "URLs", test_urls },
	{ "the wire", test_wire },
	{ "the wire of a PUT", test_wire_put },
	{ "the library", test_library },
	{ "presigned URLs", test_presigned },
	{ "the daemon", test_daemon },
	{ "a store: uploads", test_store_upload },
	{ "a store: served", test_store_serve },
	{ "a store: refused", test_store_refused },
	{ "a store: remote reads and gc", test_store_gc },
	{ "leases", check_leases },
};

int main(void)
{
	char img[128], cmd[512];
	const char *component, *why = s3srv_why_not(&component);
	int ret;

	if (why)
		skip_all_missing(component, why);
	snprintf(tmp, sizeof(tmp), "/tmp/fl-s3-%d", (int)getpid());
	if (mkdir(tmp, 0700) || mem_file_create(&mem, SIZE, 0x53))
		BAIL("setup: %s", strerror(errno));
	if (s3srv_start(&srv, tmp)) {
		serve_log_dump_file(srv.log);
		BAIL("the S3 test server did not start");
	}
	snprintf(sv.a, sizeof(sv.a), "%s/a.mem", tmp);
	snprintf(sv.c, sizeof(sv.c), "%s/c.mem", tmp);
	snprintf(sv.d, sizeof(sv.d), "%s/d.mem", tmp);
	snprintf(sv.cache, sizeof(sv.cache), "%s/store-cache", tmp);
	ok(1, "S3 test server on 127.0.0.1:%d", srv.port);
	snprintf(img, sizeof(img), "%s/snap.img", tmp);
	snprintf(cmd, sizeof(cmd), "'%s' image create '%s' '%s' >/dev/null",
		 serve_bin(), mem.path, img);
	ok(system(cmd) == 0, "faultline image create");
	ok(upload(mem.path, "raw.mem") == 0 &&
	   upload(img, "img/snap.img") == 0,
	   "both uploaded with a signed PUT");

	TAP_RUN(cases);

	s3srv_stop(&srv);
	mem_file_destroy(&mem);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	ret = system(cmd);
	(void)ret;
	return done_testing();
}
