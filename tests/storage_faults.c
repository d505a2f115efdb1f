// SPDX-License-Identifier: Apache-2.0
/*
 * storage_faults.c - `faultline serve` behind a fault-injecting proxy
 * (testlib/faultproxy.c) in front of a real nginx (a raw memory file, and
 * a chunk-store image) and the real S3 test server: a Firecracker-style
 * client compares every byte it reads with the memory file.
 *
 * Transient faults (500 or 503 twice per range, S3's SlowDown, a reset in
 * the headers or the body, a short body, a 3 s stall) are retried within
 * the source's deadline and every byte is right; permanent ones (500 or
 * SlowDown for ever, an origin that answers nothing, one that died and
 * refuses connections) poison the client (SIGBUS) within a bounded time,
 * with a line from the daemon naming the URL and the cause, never a wrong
 * byte nor a hung client, and the daemon then serves the next client.
 * Every case asserts that the proxy really injected its faults.
 *
 * Decision: the permanent cases run the daemon with a 3 s deadline
 * (FAULTLINE_HTTP_DEADLINE) so that a silent origin fails in seconds, not
 * 120; the transient ones keep the default, so that what they prove holds
 * as shipped.  Nothing asserts a time: a hang is the client's alarm; that
 * a silent origin costs one deadline, not two, is asserted by counting the
 * requests the proxy saw.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/stat.h>

#include "faultline.h"
#include "author/create.h"
#include "format/image.h"
#include "tap.h"
#include "serve_util.h"
#include "http_util.h"
#include "s3srv.h"
#include "faultproxy.h"

#define SIZE		(4ull << 20)
#define DEADLINE_ENV	"FAULTLINE_HTTP_DEADLINE"
#define SHORT_DEADLINE	"3"
#define NGINX_POINTS	65	/* over_nginx()'s test points */
#define S3_POINTS	31	/* over_s3()'s */
#define DEEP		"snapshots/fleet-eu-west-3/2026-12-06/vm-000042"

static struct mem_file mem;

struct origin {
	const char *name;	/* for test names */
	struct faultproxy px;
	char spec[256];		/* what the daemon serves */
	char endpoint[64];	/* s3://: AWS_ENDPOINT_URL, the proxy */
	char named[256];	/* how its messages name it */
};

struct fault {
	const char *what;
	enum fp_fault f;
	int times, total, arg;
	bool retried;		/* a retry note is expected */
};

static int start(struct origin *o, struct serve *s, const char *deadline,
		 const char *const *extra)
{
	int ret;

	if (deadline)
		setenv(DEADLINE_ENV, deadline, 1);
	if (o->endpoint[0])
		setenv("AWS_ENDPOINT_URL", o->endpoint, 1);
	fp_set(&o->px, FP_PASS, 0, FP_FOREVER, 0);
	serve_init(s);
	ret = serve_start(s, o->spec, extra);
	unsetenv(DEADLINE_ENV);
	if (ret) {
		ok(0, "%s: daemon started", o->name);
		serve_log_dump(s, 0);
		serve_cleanup(s);
	}
	return ret;
}

/* One verifying session: its result (su_reap), and the client's pid. */
static int client(struct serve *s, pid_t *pid)
{
	struct su_client_args a = {
		.sock = s->sock, .mem = &mem, .nregions = 1,
		.sizes = { SIZE }, .page_size = 4096, .order = SU_FORWARD,
		.stop_fd = -1, .result_fd = -1,
	};
	pid_t p = su_spawn(su_client_main, &a);

	if (pid)
		*pid = p;
	return su_reap(p, (SU_CHILD_TIMEOUT + 10) * 1000);
}

static void transient(struct origin *o, const struct fault *f)
{
	const char *kw[] = { "try 2 of", NULL };
	char line[2048] = "";
	int f0 = tap_failures(), rc;
	struct serve s;
	long inj, req;

	if (start(o, &s, NULL, NULL))
		return;
	fp_set(&o->px, f->f, f->times, f->total, f->arg);
	rc = client(&s, NULL);
	inj = fp_injected(&o->px);
	req = fp_requests(&o->px);
	ok(rc == 0, "%s, %s: every byte right (client result %d)", o->name,
	   f->what, rc);
	ok(inj > 0, "%s, %s: the proxy injected them (%ld faults in %ld "
	   "requests)", o->name, f->what, inj, req);
	if (f->retried) {
		bool said = serve_log_find(&s, 0, 0, kw, 5000, line,
					   sizeof(line)) &&
			    strstr(line, o->named);

		ok(said, "%s, %s: the daemon says it retries, naming %s",
		   o->name, f->what, o->named);
		if (said)
			diag("%.*s", (int)strcspn(line, "\n"), line);
	}
	ok(serve_alive(&s), "%s, %s: the daemon is running", o->name,
	   f->what);
	if (tap_failures() > f0)
		serve_log_dump(&s, 0);
	serve_stop(&s);
	serve_cleanup(&s);
}

/*
 * A fault that does not pass (dead: the origin dies instead): the client
 * is poisoned (kill: killed, --on-source-error kill), the session's end
 * names the URL and cause; once the origin is well, the next client gets
 * every byte.
 */
static void permanent(struct origin *o, const struct fault *f, bool dead,
		      const char *cause, const char *const *extra)
{
	bool kill = extra && !strcmp(extra[0], "--on-source-error");
	const char *kw[] = { "source errors; the first", NULL };
	const char *killed[] = { "client killed by faultline", NULL };
	int f0 = tap_failures(), want = kill ? -SIGKILL : -SIGBUS;
	char line[2048] = "";
	struct serve s;
	bool named;
	pid_t pid;
	long inj;
	int rc;

	if (start(o, &s, SHORT_DEADLINE, extra))
		return;
	if (dead) {
		fp_kill(&o->px);
		ok(!port_open(o->px.port), "%s, %s: its port refuses "
		   "connections", o->name, f->what);
	} else {
		fp_set(&o->px, f->f, f->times, f->total, f->arg);
	}
	rc = client(&s, &pid);
	inj = dead ? 0 : fp_injected(&o->px);
	ok(rc == want, "%s, %s: the client is %s, never served a wrong "
	   "byte nor left hanging (result %d)", o->name, f->what,
	   kill ? "killed (--on-source-error kill)" : "poisoned (SIGBUS)",
	   rc);
	if (rc == -SIGALRM || rc == SU_TIMEOUT)
		diag("the client hung on a fault");
	if (!dead)
		ok(inj > 0, "%s, %s: the proxy injected them (%ld)", o->name,
		   f->what, inj);
	/*
	 * One fault, one run (64 KiB, no background, no readahead): its
	 * block asked once, not once more for the run's first page, which
	 * would wait out the deadline again.
	 */
	if (f->f == FP_SILENT)
		ok(fp_requests(&o->px) == 1, "%s, %s: one request for the "
		   "faulting run, not another for its first page (%ld)",
		   o->name, f->what, fp_requests(&o->px));
	named = serve_log_find(&s, 0, pid, kw, 10000, line, sizeof(line)) &&
		strstr(line, o->named) && strstr(line, cause);
	ok(named, "%s, %s: the session's end names %s and \"%s\"", o->name,
	   f->what, o->named, cause);
	diag("%.*s", (int)strcspn(line, "\n"), line);
	if (kill)
		ok(serve_log_find(&s, 0, pid, killed, 10000, NULL, 0),
		   "%s, %s: the log says faultline killed the client",
		   o->name, f->what);
	ok(serve_alive(&s), "%s, %s: the daemon is running", o->name,
	   f->what);
	if (dead && fp_revive(&o->px))
		BAIL("proxy: %s", strerror(errno));
	fp_set(&o->px, FP_PASS, 0, FP_FOREVER, 0);
	rc = client(&s, NULL);
	ok(rc == 0, "%s, %s, then well again: the next client gets every "
	   "byte right (result %d)", o->name, f->what, rc);
	if (tap_failures() > f0)
		serve_log_dump(&s, 0);
	serve_stop(&s);
	serve_cleanup(&s);
}

/* The origin answers 500 for ever from the start: one line, exit 1. */
static void at_open(struct origin *o)
{
	struct serve s;
	char line[2048];
	bool named = false;
	FILE *f;

	setenv(DEADLINE_ENV, SHORT_DEADLINE, 1);
	fp_set(&o->px, FP_STATUS, FP_FOREVER, FP_FOREVER, 500);
	serve_init(&s);
	if (!serve_start(&s, o->spec, NULL)) {
		ok(0, "%s, 500 at open: the daemon refuses to start", o->name);
		serve_stop(&s);
	} else {
		serve_wait(&s, 20000);
		ok(s.reaped && WIFEXITED(s.status) &&
		   WEXITSTATUS(s.status) == 1,
		   "%s, 500 at open: the daemon exits 1 (status 0x%x)",
		   o->name, s.status);
	}
	unsetenv(DEADLINE_ENV);
	f = fopen(s.log, "r");
	while (f && fgets(line, sizeof(line), f))
		named |= strstr(line, o->named) && strstr(line, "500");
	if (f)
		fclose(f);
	ok(named && fp_injected(&o->px) > 0, "%s, 500 at open: a line names "
	   "%s and the status (%ld injected)", o->name, o->named,
	   fp_injected(&o->px));
	if (!named)
		serve_log_dump(&s, 0);
	serve_cleanup(&s);
}

/* A deadline that is not one: the daemon refuses it in one line. */
static void bad_deadline(struct origin *o)
{
	struct serve s;

	setenv(DEADLINE_ENV, "5s", 1);
	fp_set(&o->px, FP_PASS, 0, FP_FOREVER, 0);
	serve_init(&s);
	if (!serve_start(&s, o->spec, NULL)) {
		ok(0, DEADLINE_ENV "=5s: the daemon refuses to start");
		serve_stop(&s);
	} else {
		serve_wait(&s, 20000);
		ok(s.reaped && WIFEXITED(s.status) &&
		   WEXITSTATUS(s.status) == 1 &&
		   su_file_has(s.log, DEADLINE_ENV "=5s: not a number of "
			       "seconds"),
		   DEADLINE_ENV "=5s: the daemon exits 1 with a line naming "
		   "it (status 0x%x)", s.status);
	}
	unsetenv(DEADLINE_ENV);
	if (!s.reaped || !WIFEXITED(s.status))
		serve_log_dump(&s, 0);
	serve_cleanup(&s);
}

static const struct fault transients[] = {
	{ "503 twice per range", FP_STATUS, 2, FP_FOREVER, 503, true },
	{ "500 once per range", FP_STATUS, 1, FP_FOREVER, 500, true },
	{ "a reset in the headers", FP_RESET_HEADERS, 1, FP_FOREVER, 0, true },
	{ "a reset mid-body", FP_RESET_BODY, 1, FP_FOREVER, 0, true },
	{ "a short body", FP_SHORT_BODY, 1, FP_FOREVER, 0, true },
	{ "a 3 s stall mid-body", FP_STALL, 1, 1, 3000, false },
};

static const struct fault forever500 = {
	"500 for ever", FP_STATUS, FP_FOREVER, FP_FOREVER, 500, false };
static const struct fault silent = {
	"an origin that answers nothing", FP_SILENT, FP_FOREVER, FP_FOREVER,
	0, false };
static const struct fault dies = { "the origin dies", FP_PASS, 0, 0, 0,
				   false };

static void over_nginx(void)
{
	static const char *const killing[] = { "--on-source-error", "kill",
						NULL };
	static const char *const one_run[] = { "--chunk", "64K",
		"--no-background", "--no-prefetch", NULL };
	static struct nginx ngx;
	struct image_create_opts io = { 0 };
	struct image_info in;
	struct origin raw = { .name = "http raw" };
	struct origin st = { .name = "http chunk store" };
	char img[256], store[256], cmd[1024];

	if (!nginx_binary()) {	/* the S3 cases need no nginx */
		skip_missing(NGINX_POINTS, "nginx", "not installed (apt-get "
			     "install nginx-light)");
		return;
	}
	if (nginx_setup(&ngx))
		BAIL("nginx setup: %s", strerror(errno));
	/* a store as deep as a fleet's: its messages must still say why */
	snprintf(cmd, sizeof(cmd), "cp %s %s/mem.raw && chmod 644 %s/mem.raw "
		 "&& mkdir -p %s/" DEEP "/images", mem.path, ngx.www, ngx.www,
		 ngx.www);
	snprintf(img, sizeof(img), "%s/" DEEP "/images/snap.fli", ngx.www);
	snprintf(store, sizeof(store), "%s/" DEEP "/store", ngx.www);
	io.store = store;
	if (system(cmd) != 0 || image_create(mem.path, img, &io, &in) < 0)
		BAIL("files: %s", fl_last_error());
	if (nginx_start(&ngx))
		BAIL("nginx did not start");
	if (fp_start(&raw.px, ngx.port) || fp_start(&st.px, ngx.port))
		BAIL("proxy: %s", strerror(errno));
	snprintf(raw.spec, sizeof(raw.spec), "http://127.0.0.1:%d/mem.raw",
		 raw.px.port);
	snprintf(raw.named, sizeof(raw.named), "%s", raw.spec);
	snprintf(st.spec, sizeof(st.spec),
		 "http://127.0.0.1:%d/" DEEP "/images/snap.fli", st.px.port);
	snprintf(st.named, sizeof(st.named), "127.0.0.1:%d/" DEEP "/store",
		 st.px.port);

	for (size_t i = 0; i < sizeof(transients) / sizeof(*transients); i++)
		transient(&raw, &transients[i]);
	permanent(&raw, &forever500, false, "HTTP status 500", NULL);
	permanent(&raw, &forever500, false, "HTTP status 500", killing);
	permanent(&raw, &silent, false, "not read within " SHORT_DEADLINE " s",
		  one_run);
	permanent(&raw, &dies, true, "onnect", NULL);
	at_open(&raw);
	bad_deadline(&raw);

	transient(&st, &transients[0]);
	transient(&st, &transients[3]);
	transient(&st, &transients[4]);
	permanent(&st, &forever500, false, "HTTP status 500", NULL);

	fp_stop(&raw.px);
	fp_stop(&st.px);
	nginx_kill(&ngx);
	nginx_cleanup(&ngx);
}

static void over_s3(void)
{
	static const struct fault slowdown2 = {
		"SlowDown twice per range", FP_SLOWDOWN, 2, FP_FOREVER, 0,
		true };
	static const struct fault slowdown = {
		"SlowDown for ever", FP_SLOWDOWN, FP_FOREVER, FP_FOREVER, 0,
		false };
	const char *component, *why = s3srv_why_not(&component);
	struct origin o = { .name = "s3" };
	struct origin st = { .name = "s3 chunk store" };
	static struct s3srv srv;
	char tmp[64], cmd[1024];
	int rc;

	if (why) {
		skip_missing(S3_POINTS, component, why);
		return;
	}
	snprintf(tmp, sizeof(tmp), "/tmp/fl-sfaults-%d", (int)getpid());
	if (mkdir(tmp, 0700) < 0)
		BAIL("mkdir %s: %s", tmp, strerror(errno));
	if (s3srv_start(&srv, tmp)) {
		serve_log_dump_file(srv.log);
		BAIL("the S3 test server did not start");
	}
	if (s3srv_upload(&srv, mem.path, "raw.mem"))
		BAIL("upload to the S3 test server");
	if (fp_start(&o.px, srv.port) || fp_start(&st.px, srv.port))
		BAIL("proxy: %s", strerror(errno));
	s3srv_env(&srv, SECRET, NULL);
	snprintf(o.endpoint, sizeof(o.endpoint), "http://127.0.0.1:%d",
		 o.px.port);
	snprintf(o.spec, sizeof(o.spec), "s3://" BUCKET "/raw.mem");
	snprintf(o.named, sizeof(o.named), "%s", o.spec);

	transient(&o, &slowdown2);
	transient(&o, &transients[3]);
	transient(&o, &transients[2]);
	permanent(&o, &slowdown, false, "SlowDown", NULL);

	/* a chunk store in the bucket, written through SlowDown too */
	snprintf(st.endpoint, sizeof(st.endpoint), "http://127.0.0.1:%d",
		 st.px.port);
	snprintf(st.spec, sizeof(st.spec), "s3://" BUCKET "/st/images/snap.fli");
	snprintf(st.named, sizeof(st.named), "s3://" BUCKET "/st");
	setenv("AWS_ENDPOINT_URL", st.endpoint, 1);
	fp_set(&st.px, FP_SLOWDOWN, 1, FP_FOREVER, 0);
	snprintf(cmd, sizeof(cmd), "'%s' image create '%s' '%s' --store "
		 "s3://" BUCKET "/st >/dev/null 2>&1", serve_bin(), mem.path,
		 st.spec);
	rc = system(cmd);
	ok(rc == 0 && fp_injected(&st.px) > 0, "s3 chunk store: image create "
	   "--store s3:// through SlowDown once per request (exit status "
	   "0x%x, %ld faults in %ld requests)", rc, fp_injected(&st.px),
	   fp_requests(&st.px));
	transient(&st, &slowdown2);
	transient(&st, &transients[4]);
	permanent(&st, &slowdown, false, "SlowDown", NULL);

	fp_stop(&o.px);
	fp_stop(&st.px);
	s3srv_stop(&srv);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		diag("could not remove %s", tmp);
}

int main(void)
{
	if (mem_file_create(&mem, SIZE, 0xfa17))
		BAIL("memory file: %s", strerror(errno));
	over_nginx();
	over_s3();
	mem_file_destroy(&mem);
	return done_testing();
}
