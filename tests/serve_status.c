// SPDX-License-Identifier: Apache-2.0
/*
 * serve_status.c - watching a restore: `faultline status` (the table and
 * --json) while a Firecracker-style client is half restored, the control
 * socket refusing a non-owner (by its mode, then by SO_PEERCRED), GET
 * /metrics passing `promtool check metrics` and answering bad requests
 * with 400/404 without harm, a real Prometheus scraping the daemon and
 * answering a query for a faultline series, the control socket opened
 * again by the server the supervisor restarts, and removed on exit.
 *
 * Decisions: the client stops halfway on a pipe, so the session is alive
 * and partly restored for as long as the checks take, whatever the load
 * (--no-background: nothing restores the rest behind its back).  Every
 * wait is bounded only to stop a hang; nothing is timed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/time.h>

#include "http_util.h"
#include "serve_util.h"

#define MIB		(1ULL << 20)
#define FILE_SIZE	(64 * MIB)
#define CLIENT_SIZE	(32 * MIB)
#define TOUCHED		(8 * MIB)
#define WAIT_MS		60000	/* bounds that only stop a hang */

static struct mem_file mem;
static struct serve srv;
static char ctl_path[128];
static int metrics_port;

/* ---- the client: half restored, then held --------------------------------- */

struct held {
	pid_t pid;
	int go_w, ready_r;
};

static int held_client(int ready_w, int go_r)
{
	uint64_t size = CLIENT_SIZE, bad;
	struct fc_client c;
	char b = 'r';

	if (fc_client_map(&c, 1, &size, FC_PAGE_4K) ||
	    fc_client_connect(&c, srv.sock))
		return 10;
	if (su_verify(&mem, c.regions[0].addr, 0, TOUCHED, 4096, SU_FORWARD,
		      &bad))
		return 11;
	if (write(ready_w, &b, 1) != 1 || read(go_r, &b, 1) != 1)
		return 12;
	if (su_verify_client(&mem, &c, SU_FORWARD, "held"))
		return 13;
	fc_client_close(&c);
	return 0;
}

static int held_start(struct held *h)
{
	int ready[2], go[2];
	char b;

	if (pipe(ready) || pipe(go))
		return -1;
	fflush(stdout);
	h->pid = fork();
	if (h->pid == 0) {
		alarm(SU_CHILD_TIMEOUT * 4);
		close(ready[0]);
		close(go[1]);
		_exit(held_client(ready[1], go[0]));
	}
	close(ready[1]);
	close(go[0]);
	h->go_w = go[1];
	h->ready_r = ready[0];
	return read(h->ready_r, &b, 1) == 1 ? 0 : -1;
}

static int held_finish(struct held *h)
{
	char b = 'g';
	int ret;

	if (write(h->go_w, &b, 1) != 1)
		diag("cannot release the client");
	ret = su_reap(h->pid, SU_CHILD_TIMEOUT * 1000);
	close(h->go_w);
	close(h->ready_r);
	return ret;
}

/* ---- running faultline status ---------------------------------------------- */

/*
 * Run `faultline status --socket SOCK [--json]` (as uid if uid > 0): its
 * exit status, its output (stdout and stderr) in out.
 */
static int run_status(uid_t uid, bool json, char *out, size_t len)
{
	int p[2], status;
	size_t n = 0;
	ssize_t r;

	if (pipe(p))
		return -1;
	fflush(stdout);
	pid_t pid = fork();

	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		if (uid > 0 && (setgid(uid) || setuid(uid)))
			_exit(99);
		execl(serve_bin(), serve_bin(), "status", "--socket", srv.sock,
		      json ? "--json" : (char *)NULL, (char *)NULL);
		_exit(98);
	}
	close(p[1]);
	while (n + 1 < len && (r = read(p[0], out + n, len - n - 1)) > 0)
		n += (size_t)r;
	out[n] = 0;
	close(p[0]);
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static char out[1 << 20];

/* The status document, retried while no server answers (a restart). */
static json_object *status_doc(void)
{
	uint64_t t0 = su_now_ms();

	do {
		if (run_status(0, true, out, sizeof(out)) == 0)
			return json_tokener_parse(out);
		su_sleep_ms(50);
	} while (su_now_ms() - t0 < WAIT_MS);
	diag("faultline status --json: %s", out);
	return NULL;
}

/* The session of client pid in a status document, or NULL. */
static json_object *find_session(json_object *st, pid_t pid)
{
	json_object *ss, *s, *p;

	if (!st || !json_object_object_get_ex(st, "sessions", &ss))
		return NULL;
	for (size_t i = 0; i < json_object_array_length(ss); i++) {
		s = json_object_array_get_idx(ss, i);
		if (json_object_object_get_ex(s, "pid", &p) && p &&
		    json_object_get_int(p) == pid)
			return s;
	}
	return NULL;
}

static json_object *get(json_object *o, const char *k)
{
	json_object *v;

	return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static int64_t num(json_object *o, const char *k)
{
	json_object *v = get(o, k);

	return v ? json_object_get_int64(v) : -1;
}

static const char *text(json_object *o, const char *k)
{
	json_object *v = get(o, k);

	return v ? json_object_get_string(v) : "";
}

/* ---- HTTP ------------------------------------------------------------------ */

/* Send req to 127.0.0.1:port, read the whole answer: its length, or -1. */
static ssize_t http_raw(int port, const char *req, char *buf, size_t len)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { .tv_sec = 30 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	size_t n = 0;
	ssize_t r;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) {
		close(fd);
		return -1;
	}
	while (n + 1 < len && (r = recv(fd, buf + n, len - n - 1, 0)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(fd);
	return (ssize_t)n;
}

/* The status code of an HTTP answer, or -1. */
static int http_code(const char *ans)
{
	int code;

	return sscanf(ans, "HTTP/1.1 %d", &code) == 1 ? code : -1;
}

/* The body of an HTTP answer (after the empty line), or "". */
static const char *http_body(const char *ans)
{
	const char *b = strstr(ans, "\r\n\r\n");

	return b ? b + 4 : "";
}

/* ---- the checks ------------------------------------------------------------ */

static void check_status(pid_t client)
{
	char want[64];
	json_object *st = status_doc(), *s = find_session(st, client);

	ok(s != NULL, "status --json: the client's session is listed");
	json_object *regs = get(s, "regions"), *lat = get(s, "latency");
	int64_t restored = num(s, "bytes_restored");

	ok(!strcmp(text(s, "state"), "serving"), "status: serving");
	is_int(num(s, "bytes"), CLIENT_SIZE, "status: its bytes in all");
	ok(regs && json_object_array_length(regs) == 1 &&
	   num(json_object_array_get_idx(regs, 0), "len") == CLIENT_SIZE,
	   "status: its one region and its size");
	ok(restored >= (int64_t)TOUCHED && restored < (int64_t)CLIENT_SIZE,
	   "status: bytes restored between what it touched and the whole "
	   "(%lld)", (long long)restored);
	ok(num(s, "faults") >= 1, "status: faults counted (%lld)",
	   (long long)num(s, "faults"));
	ok(num(lat, "count") >= 1 && num(lat, "p50_le_ns") > 0 &&
	   num(lat, "p50_le_ns") <= num(lat, "p99_le_ns") &&
	   num(lat, "p99_le_ns") <= num(lat, "max_ns") &&
	   num(lat, "mean_ns") <= num(lat, "max_ns"),
	   "status: latency bounds ordered and within the measured max");
	is_int(num(s, "source_errors"), 0, "status: no source errors");
	is_int(num(s, "pages_poisoned"), 0, "status: no poisoned pages");
	ok(!strcmp(text(s, "background"), "off"),
	   "status: background restore off (--no-background): %s",
	   text(s, "background"));
	ok(num(s, "age_ms") >= 0 && !strcmp(text(get(st, "source"), "name"),
					     mem.path),
	   "status: an age, and the source named");
	json_object_put(st);

	ok(run_status(0, false, out, sizeof(out)) == 0, "status: exit 0");
	snprintf(want, sizeof(want), "(pid %d uid 0): serving", (int)client);
	ok(strstr(out, want) && strstr(out, "p50 ≤ ") &&
	   strstr(out, "(bucket bounds)") && strstr(out, "restored "),
	   "status: the table names the client, its restore and latency "
	   "bounds as bounds");
	if (!strstr(out, want))
		diag("%s", out);
}

static void check_refused(void)
{
	struct passwd *pw = getpwnam("nobody");
	uid_t nobody = pw ? pw->pw_uid : 65534;

	ok(run_status(nobody, false, out, sizeof(out)) != 0 &&
	   strstr(out, "permission denied"),
	   "non-owner: kept out by the control socket's mode");
	/* With the modes opened, SO_PEERCRED still refuses. */
	chmod(srv.dir, 0711);
	chmod(ctl_path, 0666);
	ok(run_status(nobody, false, out, sizeof(out)) != 0 &&
	   strstr(out, "root or uid"),
	   "non-owner: refused by the daemon's credential check");
	if (!strstr(out, "root or uid"))
		diag("%s", out);
	chmod(ctl_path, 0600);
	chmod(srv.dir, 0700);
}

static char ans[4 << 20];

static void check_metrics(pid_t client)
{
	char path[200], cmd[480], want[96];
	FILE *f;

	ok(http_raw(metrics_port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
		    ans, sizeof(ans)) > 0 && http_code(ans) == 200,
	   "metrics: GET /metrics is 200");
	snprintf(want, sizeof(want), "faultline_session_faults_total"
		 "{session=\"");
	ok(strstr(ans, want) != NULL, "metrics: a per-session fault counter");
	snprintf(want, sizeof(want), ",pid=\"%d\"}", (int)client);
	ok(strstr(ans, want) != NULL, "metrics: labelled with the client pid");
	ok(strstr(ans, "faultline_fault_latency_seconds_bucket{le=\"0.000001023\"}") &&
	   strstr(ans, "# TYPE faultline_fault_latency_seconds histogram"),
	   "metrics: the latency histogram with its real bucket bounds");
	snprintf(path, sizeof(path), "%s/metrics.txt", srv.dir);
	f = fopen(path, "w");
	if (f) {
		fputs(http_body(ans), f);
		fclose(f);
	}
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s > %s.out 2>&1",
		 path, path);
	if (system("command -v promtool >/dev/null 2>&1") != 0) {
		skip_missing(1, "promtool", "not on PATH (apt-get install "
			     "prometheus)");
	} else {
		int rc = system(cmd);

		if (!ok(rc == 0, "metrics: promtool check metrics passes")) {
			snprintf(path + strlen(path), 8, ".out");
			serve_log_dump_file(path);
		}
	}
	ok(http_raw(metrics_port, "GARBAGE\r\n\r\n", ans, sizeof(ans)) > 0 &&
	   http_code(ans) == 400, "metrics: a malformed request is 400");
	ok(http_raw(metrics_port, "GET /nope HTTP/1.1\r\n\r\n", ans,
		    sizeof(ans)) > 0 && http_code(ans) == 404,
	   "metrics: another path is 404");
	ok(http_raw(metrics_port, "POST /metrics HTTP/1.1\r\n\r\n", ans,
		    sizeof(ans)) > 0 && http_code(ans) == 405,
	   "metrics: another method is 405");
	ok(serve_alive(&srv) && run_status(0, false, out, sizeof(out)) == 0,
	   "metrics: the daemon serves on after bad requests");
}

/* ---- a real Prometheus ----------------------------------------------------- */

struct prom {
	pid_t pid;
	int port;
	char dir[160];
};

static int prom_start(struct prom *p)
{
	char cfg[200], data[200], listen[64], logp[200];
	FILE *f;

	p->port = free_port();
	snprintf(p->dir, sizeof(p->dir), "%s/prometheus", srv.dir);
	snprintf(cfg, sizeof(cfg), "%s/prometheus.yml", p->dir);
	snprintf(data, sizeof(data), "--storage.tsdb.path=%s/data", p->dir);
	snprintf(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%d",
		 p->port);
	snprintf(logp, sizeof(logp), "%s/log", p->dir);
	if (mkdir(p->dir, 0700) < 0 || !(f = fopen(cfg, "w")))
		return -1;
	fprintf(f, "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
		"scrape_configs:\n  - job_name: faultline\n"
		"    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
		metrics_port);
	fclose(f);
	snprintf(cfg, sizeof(cfg), "--config.file=%s/prometheus.yml", p->dir);
	fflush(stdout);
	p->pid = fork();
	if (p->pid == 0) {
		int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execlp("prometheus", "prometheus", cfg, data, listen,
		       (char *)NULL);
		_exit(127);
	}
	return p->pid > 0 ? 0 : -1;
}

/* Query Prometheus for series until one names client pid: 1 if found. */
static int prom_query(struct prom *p, const char *series, pid_t client)
{
	char req[256], want[32];
	uint64_t t0 = su_now_ms();

	snprintf(req, sizeof(req), "GET /api/v1/query?query=%s HTTP/1.1\r\n"
		 "Host: 127.0.0.1\r\nConnection: close\r\n\r\n", series);
	snprintf(want, sizeof(want), "%d", (int)client);
	while (su_now_ms() - t0 < WAIT_MS) {
		if (http_raw(p->port, req, ans, sizeof(ans)) > 0 &&
		    http_code(ans) == 200) {
			json_object *o = json_tokener_parse(http_body(ans));
			json_object *r = get(get(o, "data"), "result");
			bool found = false;

			for (size_t i = 0; r && i < json_object_array_length(r); i++) {
				json_object *m = get(json_object_array_get_idx(r, i),
						     "metric");

				found |= !strcmp(text(m, "pid"), want) &&
					 !strcmp(text(m, "job"), "faultline");
			}
			json_object_put(o);
			if (found)
				return 1;
		}
		su_sleep_ms(200);
	}
	diag("last answer: %.300s", ans);
	return 0;
}

static void check_prometheus(pid_t client)
{
	struct prom p;
	char logp[200];

	if (system("command -v prometheus >/dev/null 2>&1") != 0) {
		skip_missing(2, "prometheus", "not on PATH (apt-get install "
			     "prometheus)");
		return;
	}
	if (!ok(prom_start(&p) == 0, "prometheus: started on loopback")) {
		skip(1, "no prometheus");
		return;
	}
	if (!ok(prom_query(&p, "faultline_session_faults_total", client),
		"prometheus: scraped the daemon; its query API has the "
		"client's faultline_session_faults_total")) {
		snprintf(logp, sizeof(logp), "%s/log", p.dir);
		serve_log_dump_file(logp);
	}
	kill(p.pid, SIGTERM);
	if (su_reap(p.pid, WAIT_MS) == SU_TIMEOUT)
		diag("prometheus did not stop: killed");
}

/* ---- the supervisor restarting the server ---------------------------------- */

static void check_restart(pid_t client)
{
	pid_t old = serve_server_pid(&srv), now;
	json_object *st;

	ok(old > 0 && serve_kill_server(&srv, SIGKILL) == 0,
	   "restart: server killed");
	now = serve_server_wait(&srv, old, WAIT_MS);
	ok(now > 0, "restart: the supervisor started another server");
	st = status_doc();
	ok(find_session(st, client) != NULL && num(st, "server_pid") == now,
	   "restart: the new server answers status, the session taken over");
	json_object_put(st);
	ok(http_raw(metrics_port, "GET /metrics HTTP/1.0\r\n\r\n", ans,
		    sizeof(ans)) > 0 && http_code(ans) == 200,
	   "restart: the new server serves /metrics");
}

int main(void)
{
	static char port[32];
	const char *extra[] = { "--no-background", "--metrics", port, NULL };
	struct held h;
	long mark;

	su_catch_fatal();
	serve_init(&srv);
	if (mem_file_create(&mem, FILE_SIZE, 0x5747))
		BAIL("memory file");
	metrics_port = free_port();
	snprintf(port, sizeof(port), "127.0.0.1:%d", metrics_port);
	snprintf(ctl_path, sizeof(ctl_path), "%s.ctl", srv.sock);
	if (serve_start(&srv, mem.path, extra))
		BAIL("daemon did not start");
	uint64_t t0 = su_now_ms();

	while (!su_listening(ctl_path) && su_now_ms() - t0 < WAIT_MS)
		su_sleep_ms(20);
	struct stat sb;

	ok(stat(ctl_path, &sb) == 0 && S_ISSOCK(sb.st_mode) &&
	   (sb.st_mode & 0777) == 0600,
	   "the control socket is beside the listening one, mode 0600");
	mark = serve_log_mark(&srv);
	if (held_start(&h))
		BAIL("client did not start");
	check_status(h.pid);
	check_refused();
	check_metrics(h.pid);
	check_prometheus(h.pid);
	check_restart(h.pid);
	is_int(held_finish(&h), 0, "the client verified every byte");

	const char *kw[] = { "ended", NULL };
	char line[512];

	ok(serve_log_find(&srv, mark, 0, kw, WAIT_MS, line, sizeof(line)) &&
	   strstr(line, "p50 ≤ ") && strstr(line, "(bucket bounds)"),
	   "log: the session's end labels latency percentiles as bounds");
	diag("%s", line);
	is_int(serve_stop(&srv) == 0 ? 0 : 1, 0, "daemon stopped cleanly");
	ok(access(ctl_path, F_OK) < 0, "the control socket is removed on exit");
	mem_file_destroy(&mem);
	serve_cleanup(&srv);
	return done_testing();
}
