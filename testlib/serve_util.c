// SPDX-License-Identifier: Apache-2.0
/*
 * serve_util.c - the faultline serve test helpers declared in serve_util.h.
 */
#define _GNU_SOURCE
#include "hugetlb.h"
#include "kernel/proc.h"
#include "serve_util.h"

uint64_t su_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void su_sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

void serve_init(struct serve *s)
{
	memset(s, 0, sizeof(*s));
	s->listen_fd = -1;
	snprintf(s->dir, sizeof(s->dir), "/tmp/fl-serve-XXXXXX");
	if (!mkdtemp(s->dir))
		BAIL("mkdtemp: %s", strerror(errno));
	snprintf(s->sock, sizeof(s->sock), "%s/fl.sock", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/stderr.log", s->dir);
}

const char *serve_bin(void)
{
	const char *b = getenv("FAULTLINE_BIN");

	return b && *b ? b : "build/faultline";
}

int su_listening(const char *path)
{
	return proc_unix_listening(path) == 1;
}

int serve_wait_supervisor_listens(struct serve *s, unsigned int timeout_ms)
{
	long ino = proc_unix_listen_inode(s->sock);
	uint64_t t0 = su_now_ms();
	char link[48];

	if (ino <= 0)
		return -ENOENT;
	snprintf(link, sizeof(link), "socket:[%ld]", ino);
	while (proc_fds(s->pid, link) < 1) {
		if (su_now_ms() - t0 >= timeout_ms)
			return -ETIMEDOUT;
		su_sleep_ms(5);
	}
	return 0;
}

bool su_file_has(const char *path, const char *what)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return found;
}

unsigned long long su_cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	/* after "pid (comm)": state and 10 more fields, then utime stime */
	if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			"%llu %llu", &ut, &st) != 2)
		ut = st = 0;
	return ut + st;
}

pid_t serve_server_pid(const struct serve *s)
{
	char path[64];
	long pid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)s->pid,
		 (int)s->pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	fclose(f);
	return (pid_t)pid;
}

int serve_kill_server(const struct serve *s, int sig)
{
	pid_t p = serve_server_pid(s);

	return p > 0 ? kill(p, sig) : -ESRCH;
}

pid_t serve_server_wait(const struct serve *s, pid_t old,
				      unsigned int timeout_ms)
{
	uint64_t t0 = su_now_ms();

	for (;;) {
		pid_t p = serve_server_pid(s);

		if (p > 0 && p != old)
			return p;
		if (su_now_ms() - t0 >= timeout_ms)
			return 0;
		su_sleep_ms(1);
	}
}

int serve_alive(struct serve *s)
{
	if (s->reaped)
		return 0;
	if (waitpid(s->pid, &s->status, WNOHANG) == s->pid) {
		s->reaped = 1;
		return 0;
	}
	return 1;
}

/* Lines of path from byte from on as TAP comments ("what: line"). */
static void dump_lines(const char *path, long from, int pid, const char *what)
{
	FILE *f = fopen(path, "r");
	char line[1024], tag[32];
	int n = 0;

	if (!f)
		return;
	snprintf(tag, sizeof(tag), "(pid %d", pid);
	fseek(f, from, SEEK_SET);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (pid > 0 && !su_names_pid(line, tag))
			continue;
		if (++n > 40) {
			diag("%s: ...", what);
			break;
		}
		diag("%s: %s", what, line);
	}
	fclose(f);
}

void serve_log_dump_pid(struct serve *s, long from, int pid)
{
	dump_lines(s->log, from, pid, "daemon");
}

void serve_log_dump_file(const char *path)
{
	dump_lines(path, 0, 0, path);
}

long su_file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) < 0 ? -1 : (long)st.st_size;
}

void serve_log_dump(struct serve *s, long from)
{
	serve_log_dump_pid(s, from, 0);
}

long serve_log_mark(struct serve *s)
{
	struct stat st;

	return stat(s->log, &st) ? 0 : (long)st.st_size;
}

int serve_start(struct serve *s, const char *mem,
			      const char *const *extra)
{
	const char *argv[64];
	int n = 0, fd;
	uint64_t t0;

	argv[n++] = serve_bin();
	argv[n++] = "serve";
	if (s->listen_fd < 0) {
		argv[n++] = "--socket";
		argv[n++] = s->sock;
	}
	argv[n++] = "--mem-file";
	argv[n++] = mem;
	for (int i = 0; extra && extra[i] && n < 62; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;

	fflush(stdout);
	s->reaped = 0;
	s->pid = fork();
	if (s->pid < 0)
		return -errno;
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		signal(SIGALRM, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
			  0644);
		if (fd >= 0)
			dup2(fd, 2);
		fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
		}
		if (s->nofile) {
			struct rlimit rl = { s->nofile, s->nofile };

			setrlimit(RLIMIT_NOFILE, &rl);
		}
		if (s->listen_fd >= 0) {
			char pid[32];

			if (s->listen_fd != 3) {
				dup2(s->listen_fd, 3);
			} else {
				/* already fd 3: just clear CLOEXEC */
				fcntl(3, F_SETFD, 0);
			}
			snprintf(pid, sizeof(pid), "%d", (int)getpid());
			setenv("LISTEN_PID", pid, 1);
			setenv("LISTEN_FDS", "1", 1);
			setenv("LISTEN_FDNAMES", "faultline.socket", 1);
		}
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (s->listen_fd >= 0)
		return 0;	/* already listening: the socket is ours */
	/* A bound that only stops a hang: a loaded TCG guest starts slowly. */
	t0 = su_now_ms();
	while (su_now_ms() - t0 < 30000) {
		if (su_listening(s->sock))
			return 0;
		if (!serve_alive(s)) {
			diag("daemon exited before listening (status 0x%x)",
			     s->status);
			serve_log_dump(s, 0);
			return -ECHILD;
		}
		su_sleep_ms(5);
	}
	diag("daemon not listening on %s after 30 s", s->sock);
	serve_log_dump(s, 0);
	return -ETIMEDOUT;
}

int serve_wait(struct serve *s, unsigned int timeout_ms)
{
	uint64_t t0 = su_now_ms();

	while (serve_alive(s)) {
		if (su_now_ms() - t0 >= timeout_ms)
			return -1;
		su_sleep_ms(5);
	}
	return s->status;
}

/*
 * SIGTERM, then SIGKILL if it has not stopped in STOP_MS: a hang bound,
 * not a speed one (a daemon ending thousands of sessions on a machine
 * with a dozen runnable threads per CPU took more than 5 s).
 */
#define STOP_MS	30000

int serve_stop(struct serve *s)
{
	int st;

	if (!s->pid)
		return -1;
	if (serve_alive(s))
		kill(s->pid, SIGTERM);
	st = serve_wait(s, STOP_MS);
	if (st < 0) {
		diag("daemon ignored SIGTERM for %d s: SIGKILL", STOP_MS / 1000);
		kill(s->pid, SIGKILL);
		st = serve_wait(s, 5000);
	}
	return st;
}

void serve_cleanup(struct serve *s)
{
	DIR *d;
	struct dirent *e;
	char p[512];

	if (getenv("KEEP_LOGS") || !s->dir[0])
		return;
	d = opendir(s->dir);
	if (d) {
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(p, sizeof(p), "%s/%s", s->dir, e->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(s->dir);
}

int su_strcasestr(const char *hay, const char *needle)
{
	return strcasestr(hay, needle) != NULL;
}

int su_names_pid(const char *line, const char *tag)
{
	const char *p = strstr(line, tag);

	return p && (p[strlen(tag)] == ')' || p[strlen(tag)] == ' ');
}

int serve_log_find(struct serve *s, long from, int pid,
				 const char *const *kw, unsigned int timeout_ms,
				 char *out, size_t outlen)
{
	uint64_t t0 = su_now_ms();
	char pidtag[32];
	char line[2048];

	snprintf(pidtag, sizeof(pidtag), "(pid %d", pid);
	for (;;) {
		FILE *f = fopen(s->log, "r");

		if (f) {
			fseek(f, from, SEEK_SET);
			while (fgets(line, sizeof(line), f)) {
				int hit = !kw || !kw[0];

				/*
				 * A line without its newline is still being
				 * written: read it whole on the next pass (a
				 * refusal matched without its "; client
				 * killed" tail failed serve_bad once).
				 */
				if (!strchr(line, '\n'))
					break;
				line[strcspn(line, "\n")] = 0;
				if (!strstr(line, "faultline: "))
					continue;
				if (pid > 0 && !su_names_pid(line, pidtag))
					continue;
				for (int i = 0; kw && kw[i] && !hit; i++)
					hit = su_strcasestr(line, kw[i]);
				if (!hit)
					continue;
				if (out)
					snprintf(out, outlen, "%.*s",
						 (int)outlen - 1, line);
				fclose(f);
				return 1;
			}
			fclose(f);
		}
		if (su_now_ms() - t0 >= timeout_ms)
			return 0;
		su_sleep_ms(10);
	}
}

int proc_fds(pid_t pid, const char *match)
{
	char dir[64], p[320], link[256];
	DIR *d;
	struct dirent *e;
	int n = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		ssize_t l;

		if (e->d_name[0] == '.')
			continue;
		if (!match) {
			n++;
			continue;
		}
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		l = readlink(p, link, sizeof(link) - 1);
		if (l < 0)
			continue;
		link[l] = 0;
		if (strstr(link, match))
			n++;
	}
	closedir(d);
	return n;
}

int su_closed_by_daemon(int sock, unsigned int timeout_ms)
{
	uint64_t t0 = su_now_ms();
	char buf[256];

	for (;;) {
		struct pollfd p = { .fd = sock, .events = POLLIN };
		int left = (int)(timeout_ms - (su_now_ms() - t0));

		if (left <= 0 || poll(&p, 1, left) <= 0)
			return 0;
		ssize_t n = recv(sock, buf, sizeof(buf), MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 1;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return 0;
		/* the daemon may say something first: read on */
	}
}

void proc_fds_dump(pid_t pid)
{
	char dir[64], p[320], link[256];
	DIR *d;
	struct dirent *e;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		ssize_t l;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		l = readlink(p, link, sizeof(link) - 1);
		link[l < 0 ? 0 : l] = 0;
		diag("  pid %d fd %s -> %s", (int)pid, e->d_name, link);
	}
	if (d)
		closedir(d);
}

long proc_status_kb(pid_t pid, const char *key)
{
	char p[64], line[256];
	size_t kl = strlen(key);
	long v = -1;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	f = fopen(p, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = strtol(line + kl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

int proc_fds_settle(pid_t pid, const char *match, int want,
				  unsigned int timeout_ms)
{
	uint64_t t0 = su_now_ms();
	int n;

	for (;;) {
		n = proc_fds(pid, match);
		if (n <= want || su_now_ms() - t0 >= timeout_ms)
			return n;
		su_sleep_ms(10);
	}
}

static char su_unlink_paths[8][128];
uint64_t su_word(uint64_t off, uint64_t seed)
{
	return off ^ seed;
}

int mem_file_create(struct mem_file *m, uint64_t size,
				  uint64_t seed)
{
	const size_t chunk = 1 << 20;
	uint64_t *buf;
	int ret = 0;

	memset(m, 0, sizeof(*m));
	snprintf(m->path, sizeof(m->path), "/tmp/fl-mem-XXXXXX");
	m->fd = mkstemp(m->path);
	if (m->fd < 0)
		return -errno;
	for (int i = 0; i < 8; i++)
		if (!su_unlink_paths[i][0]) {
			strcpy(su_unlink_paths[i], m->path);
			break;
		}
	su_catch_fatal();
	m->size = size;
	m->seed = seed;
	buf = malloc(chunk);
	if (!buf)
		return -ENOMEM;
	for (uint64_t off = 0; off < size; off += chunk) {
		size_t len = size - off < chunk ? size - off : chunk;

		for (size_t i = 0; i < len / 8; i++)
			buf[i] = su_word(off + i * 8, seed);
		if (pwrite(m->fd, buf, len, (off_t)off) != (ssize_t)len) {
			ret = -EIO;
			break;
		}
	}
	free(buf);
	if (ret)
		return ret;
	m->map = mmap(NULL, size, PROT_READ, MAP_SHARED, m->fd, 0);
	if (m->map == MAP_FAILED) {
		m->map = NULL;
		return -errno;
	}
	return 0;
}

void mem_file_destroy(struct mem_file *m)
{
	if (m->map)
		munmap((void *)m->map, m->size);
	if (m->fd > 0)
		close(m->fd);
	if (m->path[0]) {
		unlink(m->path);
		for (int i = 0; i < 8; i++)
			if (!strcmp(su_unlink_paths[i], m->path))
				su_unlink_paths[i][0] = 0;
	}
	m->map = NULL;
	m->fd = -1;
	m->path[0] = 0;
}

void su_report_bad(const struct mem_file *m, const void *addr,
				 uint64_t file_off, uint64_t pos,
				 const char *what)
{
	const uint8_t *a = addr;
	uint64_t w = pos & ~7ULL, got, want;

	memcpy(&got, a + w, 8);
	memcpy(&want, m->map + file_off + w, 8);
	diag("%s: wrong data at region offset 0x%llx (file 0x%llx): got "
	     "0x%016llx (file offset 0x%llx?), want 0x%016llx", what,
	     (unsigned long long)pos, (unsigned long long)(file_off + pos),
	     (unsigned long long)got,
	     (unsigned long long)(got ^ m->seed),
	     (unsigned long long)want);
}

int su_verify(const struct mem_file *m, const void *addr,
			    uint64_t file_off, uint64_t len, uint64_t page,
			    enum su_order order, uint64_t *bad)
{
	const uint8_t *a = addr, *e;
	uint64_t npages = len / page, stride = 1;

	if (file_off > m->size || len > m->size - file_off)
		return -1;
	e = m->map + file_off;
	if (order == SU_STRIDE) {
		/* a step coprime with npages visits every page once */
		stride = 7919;
		while (npages > 1 && (npages % stride == 0))
			stride += 2;
	}
	for (uint64_t i = 0; i < npages; i++) {
		uint64_t p;

		if (order == SU_REVERSE)
			p = npages - 1 - i;
		else if (order == SU_STRIDE)
			p = (i * stride) % npages;
		else
			p = i;
		if (memcmp(a + p * page, e + p * page, page)) {
			uint64_t o = p * page;

			while (a[o] == e[o])
				o++;
			if (bad)
				*bad = o;
			return -1;
		}
	}
	return 0;
}

int su_verify_client(const struct mem_file *m,
				   const struct fc_client *c,
				   enum su_order order, const char *what)
{
	for (int i = 0; i < c->nregions; i++) {
		const struct fc_region *r = &c->regions[i];
		uint64_t bad = 0;

		/* always compare in 4 KiB steps: finer error reports */
		if (su_verify(m, r->addr, r->offset, r->size, 4096, order,
			      &bad)) {
			su_report_bad(m, r->addr, r->offset, bad, what);
			return -1;
		}
	}
	return 0;
}

int su_is_zero(const void *addr, uint64_t len)
{
	const uint8_t *a = addr;

	for (uint64_t i = 0; i < len; i++)
		if (a[i])
			return 0;
	return 1;
}

pid_t su_spawn(int (*fn)(void *), void *arg)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		static const int sigs[] = { SIGALRM, SIGTERM, SIGINT, SIGHUP,
					    SIGSEGV, SIGBUS, SIGABRT };

		huge_forget();	/* the parent restores the pool */
		memset(su_unlink_paths, 0, sizeof(su_unlink_paths));
		for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++)
			signal(sigs[i], SIG_DFL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(SU_CHILD_TIMEOUT);
		fflush(stdout);
		_exit(fn(arg) & 0xff);
	}
	return pid;
}

int su_reap(pid_t pid, unsigned int timeout_ms)
{
	uint64_t t0 = su_now_ms();
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			break;
		if (r < 0)
			return -ECHILD;
		if (su_now_ms() - t0 >= timeout_ms) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			diag("child %d still running after %u ms: killed",
			     (int)pid, timeout_ms);
			return SU_TIMEOUT;
		}
		su_sleep_ms(2);
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return -WTERMSIG(st);
}

int su_has_offsets(const struct su_client_args *a)
{
	for (int i = 0; i < a->nregions; i++)
		if (a->offsets[i])
			return 1;
	return 0;
}

int su_client_round(const struct su_client_args *a,
				  const char *what)
{
	struct fc_client c;
	int ret;

	ret = fc_client_map_at(&c, a->nregions, a->sizes,
			       su_has_offsets(a) ? a->offsets : NULL,
			       a->page_size);
	if (ret < 0) {
		diag("%s: fc_client_map: %s", what, strerror(-ret));
		return 1;
	}
	ret = fc_client_connect(&c, a->sock);
	if (ret < 0) {
		diag("%s: fc_client_connect: %s", what, strerror(-ret));
		fc_client_close(&c);
		return 1;
	}
	ret = su_verify_client(a->mem, &c, a->order, what);
	fc_client_close(&c);
	return ret ? 1 : 0;
}

int su_client_main(void *arg)
{
	const struct su_client_args *a = arg;
	unsigned long rounds = 0, fails = 0;
	char what[64];

	snprintf(what, sizeof(what), "client %d", (int)getpid());
	do {
		if (a->stop_fd >= 0)
			alarm(SU_CHILD_TIMEOUT);	/* per round */
		fails += su_client_round(a, what);
		rounds++;
	} while (a->stop_fd >= 0 &&
		 poll(&(struct pollfd){ .fd = a->stop_fd, .events = POLLIN },
		      1, 0) == 0);
	if (a->result_fd >= 0) {
		char buf[64];
		int n = snprintf(buf, sizeof(buf), "%lu %lu\n", rounds, fails);

		if (write(a->result_fd, buf, (size_t)n) != n)
			return 2;
	}
	return fails ? 1 : 0;
}

int su_verifier_start(struct su_verifier *v,
				    struct su_client_args *a)
{
	int stop[2], res[2];

	memset(v, 0, sizeof(*v));
	if (pipe2(stop, O_CLOEXEC) || pipe2(res, O_CLOEXEC))
		return -errno;
	a->stop_fd = stop[0];
	a->result_fd = res[1];
	v->pid = su_spawn(su_client_main, a);
	close(stop[0]);
	close(res[1]);
	a->stop_fd = a->result_fd = -1;
	v->stop_w = stop[1];
	v->result_r = res[0];
	return v->pid < 0 ? -errno : 0;
}

int su_verifier_stop(struct su_verifier *v,
				   unsigned long *rounds,
				   unsigned long *fails)
{
	char buf[64] = "";
	int st;
	ssize_t n;

	*rounds = *fails = 0;
	if (write(v->stop_w, "x", 1) != 1)
		return -EIO;
	close(v->stop_w);
	st = su_reap(v->pid, (SU_CHILD_TIMEOUT + 5) * 1000);
	n = read(v->result_r, buf, sizeof(buf) - 1);
	close(v->result_r);
	if (n > 0) {
		buf[n] = 0;
		sscanf(buf, "%lu %lu", rounds, fails);
	}
	return st;
}

/* On a fatal signal in the test itself: undo what would outlive it. */
static void su_fatal_signal(int sig)
{
	huge_restore();
	for (int i = 0; i < 8; i++)
		if (su_unlink_paths[i][0])
			unlink(su_unlink_paths[i]);
	signal(sig, SIG_DFL);
	raise(sig);
}

void su_catch_fatal(void)
{
	static const int sigs[] = { SIGALRM, SIGTERM, SIGINT, SIGHUP,
				    SIGSEGV, SIGBUS, SIGABRT };

	for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++)
		signal(sigs[i], su_fatal_signal);
}

