// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_lazy_pages.c - `faultline lazy-pages`: a stand-in for `criu
 * lazy-pages`, taking the same options, so that `criu restore
 * --lazy-pages` is served by faultline's engine: the dump opened as a
 * source (src/source/criu_dump.c: its images read and checked, its pages
 * and its tasks), the daemon (src/daemon/serve.c) speaking CRIU's
 * protocol (src/daemon/proto_criu.c) on WORKDIR/lazy-pages.socket.
 *
 * Decision: one connection, and done when every task's memory is
 * restored or its task gone, as CRIU's own daemon is; supervised as
 * `faultline serve` is, so a server killed mid-restore is taken over and
 * no task is left waiting; a bad image is refused before the socket
 * exists, so the restore fails at connect instead of serving wrong memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "daemon/serve.h"
#include "daemon/supervise.h"
#include "faultline.h"
#include "source/criu_dump.h"
#include "source/criu_ps.h"
#include "source/source.h"
#include "util/sock.h"

#define SOCK_NAME	"lazy-pages.socket"
#define SHORT_OPTS	"D:W:o:v::t:c:j:e:h"

static const char usage[] =
	"usage: faultline lazy-pages -D|--images-dir DIR [-W|--work-dir DIR]\n"
	"       [--status-fd N] [-o|--log-file FILE] [-v[N]] [--threads N]\n"
	"       [--chunk SIZE] [--stats-json FILE] [--on-source-error poison|kill]\n"
	"       [--no-prefetch] [--no-background] [--progress]\n"
	"       [--pages FILE|IMAGE|URL|s3://BUCKET/KEY|tcp://HOST:PORT\n"
	"        [--cache DIR]] [--page-server --address HOST --port PORT\n"
	"        [--page-server-criu VERSION]]\n"
	"       [--record TRACE] [--prefetch TRACE] [--metrics [ADDR:]PORT]\n"
	"       [--log-level error|warning|info|debug]\n"
	"  Serves `criu restore --lazy-pages -D DIR` on WORKDIR/" SOCK_NAME "\n"
	"  (WORKDIR: the images directory unless -W); --status-fd N: one '\\0'\n"
	"  written to fd N once listening; exits once every restored task's\n"
	"  memory is in, or the task gone.  -o FILE (relative: in WORKDIR) takes\n"
	"  the log; -v is accepted and ignored, as criu's log levels mean\n"
	"  nothing here.  --pages: the dump's pages from elsewhere, as\n"
	"  `faultline image create --criu DIR IMAGE` lays them out (a faultline\n"
	"  image, also over http(s) or s3:// with --cache, or a `faultline\n"
	"  send` peer);\n"
	"  the images in -D still say what is lazy.  --page-server: the lazy\n"
	"  pages from CRIU's page server at HOST:PORT (`criu dump --lazy-pages`,\n"
	"  CRIU's post-copy migration, or `criu page-server --lazy-pages`), as\n"
	"  criu lazy-pages takes them; its header is that of the CRIU that\n"
	"  wrote the images unless --page-server-criu names the server's\n"
	"  (4.2 widened it).  --record: the working set\n"
	"  of every task (which pages each touched first, in order) in one\n"
	"  trace; --prefetch: replayed at the next restore of the same dump.\n"
	"  `faultline status --socket WORKDIR/" SOCK_NAME "` shows the restore\n"
	"  (its control socket: that path + .ctl); --metrics: GET /metrics\n"
	"  (Prometheus) on PORT of 127.0.0.1, or of ADDR if given.\n";

/*
 * --page-server-criu VERSION: does that CRIU's page server speak the
 * 32-byte header (4.2 on)?  1 or 0, or -1 if VERSION is no version.
 */
static int criu_version_wide(const char *v)
{
	unsigned int major, minor;
	char c;

	if (sscanf(v, "%u.%u%c", &major, &minor, &c) < 2 ||
	    strspn(v, "0123456789.") != strlen(v))
		return -1;
	return major > 4 || (major == 4 && minor >= 2);
}

/* -o FILE: the log (stderr) goes there; relative names are in work. */
static int log_to(const char *work, const char *file)
{
	char path[PATH_MAX];

	if (file[0] == '/')
		snprintf(path, sizeof(path), "%s", file);
	else
		snprintf(path, sizeof(path), "%s/%s", work, file);
	if (!freopen(path, "a", stderr))
		return cli_cannot("lazy-pages", "--log-file", path,
				  strerror(errno));
	setvbuf(stderr, NULL, _IOLBF, 0);
	return 0;
}

/* In this order for getopt (an ambiguous prefix lists them so). */
static const struct option own_opts[] = {
	{ "images-dir", required_argument, NULL, 'D' },
	{ "work-dir", required_argument, NULL, 'W' },
	{ "status-fd", required_argument, NULL, OPT_STATUS_FD },
	{ "log-file", required_argument, NULL, 'o' },
	CLI_SHARED('t'),		/* --threads */
	CLI_SHARED('c'),		/* --chunk */
	CLI_SHARED('j'),		/* --stats-json */
	CLI_SHARED('e'),		/* --on-source-error */
	CLI_SHARED(OPT_NO_PREFETCH),
	CLI_SHARED(OPT_NO_BACKGROUND),
	CLI_SHARED(OPT_PROGRESS),
	{ "pages", required_argument, NULL, OPT_PAGES },
	CLI_SHARED(OPT_CACHE),
	CLI_SHARED('r'),		/* --record */
	CLI_SHARED('p'),		/* --prefetch */
	CLI_SHARED(OPT_METRICS),
	CLI_SHARED(OPT_LOG_LEVEL),
	{ "page-server", no_argument, NULL, OPT_PAGE_SERVER },
	{ "address", required_argument, NULL, OPT_ADDRESS },
	{ "port", required_argument, NULL, OPT_PORT },
	{ "page-server-criu", required_argument, NULL, OPT_PAGE_SERVER_CRIU },
	{ "help", no_argument, NULL, 'h' },
	{ 0 }
};

/* What the command line says, and the paths made from it. */
struct lazy_args {
	struct serve_config c;
	const char *dir, *work, *log, *pages;	/* -D, -W, -o, --pages */
	const char *ps_host, *ps_port;		/* --address, --port */
	bool ps;				/* --page-server */
	int ps_wide;	/* the page server's header; -1: the images' */
	char sock[PATH_MAX], ctl[SOCK_UNIX_PATH_MAX];
};

/* One option of lazy-pages' own (not shared with serve): 0 or the exit. */
static int own_opt(void *args, int opt, const char *arg)
{
	struct lazy_args *a = args;
	char *end;

	switch (opt) {
	case 'D': a->dir = arg; break;
	case 'W': a->work = arg; break;
	case 'o': a->log = arg; break;
	case 'v': break;
	case OPT_STATUS_FD:
		a->c.status_fd = (int)strtol(arg, &end, 10);
		if (*end || a->c.status_fd <= 0)
			return cli_bad("lazy-pages", "--status-fd", arg,
				       "must be an open descriptor above 0");
		break;
	case OPT_PAGES: a->pages = arg; break;
	case OPT_PAGE_SERVER: a->ps = true; break;
	case OPT_ADDRESS: a->ps_host = arg; break;
	case OPT_PORT: a->ps_port = arg; break;
	case OPT_PAGE_SERVER_CRIU:
		if ((a->ps_wide = criu_version_wide(arg)) < 0)
			return cli_bad("lazy-pages", "--page-server-criu", arg,
				       "not a CRIU version (e.g. 4.1.1 or "
				       "4.2)");
		break;
	default:
		return -ENOENT;
	}
	return 0;
}

static const struct cli_serve_cmd cmd = {
	.name = "lazy-pages", .shortopts = SHORT_OPTS, .opts = own_opts,
	.usage = usage, .own = own_opt,
};

/*
 * What needs every option read: -D, the page server's options together,
 * --pages; then the log, the socket and its control socket.
 */
static int check(struct lazy_args *a)
{
	int ret;

	if (!a->dir) {
		return cli_missing("lazy-pages", "-D DIR (the images) is "
				   "required");
	}
	if (a->ps && (!a->ps_host || !a->ps_port || a->pages)) {
		fprintf(stderr, "faultline lazy-pages: --page-server needs "
			"--address and --port (the dumping criu's), and no "
			"--pages\n");
		return CLI_USAGE;
	}
	if (!a->ps && (a->ps_host || a->ps_port || a->ps_wide >= 0))
		return cli_bad("lazy-pages", a->ps_host ? "--address" :
			       a->ps_port ? "--port" : "--page-server-criu",
			       a->ps_host ? a->ps_host : a->ps_port ?
			       a->ps_port : "", "only with --page-server");
	if (a->pages && source_check_spec(a->pages) < 0) {
		fprintf(stderr, "faultline lazy-pages: --pages %s\n",
			fl_last_error());
		return CLI_USAGE;
	}
	if (!a->work)
		a->work = a->dir;
	if (a->log && (ret = log_to(a->work, a->log)))
		return ret;
	if (snprintf(a->sock, sizeof(a->sock), "%s/%s", a->work,
		     SOCK_NAME) >= 108)
		return cli_bad("lazy-pages", "--work-dir", a->work,
			       "too long for a socket path");
	a->c.socket_path = a->sock;
	return cli_control_path("lazy-pages", NULL, &a->c, a->ctl,
				sizeof(a->ctl));
}

/*
 * The dump (-D) as a source, its pages from --pages (opened here, as any
 * source is), --page-server or its own pages files.  The supervisor only
 * checks it: the server, its child, opens it anew, and a page server
 * takes one connection, the server's.  A server restarted after a crash
 * that finds the page server gone serves the tasks a source that fails,
 * so that they get --on-source-error's answer, never zeros.
 */
static int load(struct lazy_args *a)
{
	struct fl_source_opts so = { .cache_dir = a->c.cache_dir };
	struct criu_pages how = {
		.host = a->ps ? a->ps_host : NULL, .port = a->ps_port,
		.header = a->ps_wide < 0 ? 0 : a->ps_wide ? CRIU_PS_HDR_WIDE :
			  CRIU_PS_HDR_NARROW,
		.lost_ok = getenv(RESTART_ENV) != NULL };
	int ret;

	if (a->pages && (ret = fl_source_open_ex(a->pages, &so,
						 &how.source)) < 0)
		return ret;
	if (!getenv(SUP_FD_ENV))
		return source_criu_check(a->dir, &how);
	return source_criu_open(a->dir, &how, &a->c.source);
}

int cmd_lazy_pages(int argc, char **argv)
{
	struct lazy_args a = { .c = { .threads = 1, .one_client = true,
				      .handshake_timeout_ms = INT_MAX },
			       .ps_wide = -1 };
	bool done = false;
	int ret;

	if ((ret = cli_serve_parse(&cmd, argc, argv, &a, &a.c,
				    &done)) || done ||
	    (ret = check(&a)))
		return ret;
	ret = load(&a);
	/*
	 * Checked: this process becomes the supervisor, and the server its
	 * child (this command again, told so by the environment) reads the
	 * images anew.  argv - 1 is the whole command line.
	 */
	if (ret == 0 && !getenv(SUP_FD_ENV)) {
		ret = cli_check_socket("lazy-pages", a.work == a.dir ? "-D" :
				       "-W", a.work, a.sock);
		return ret ? ret : supervise_run(argv - 1);
	}
	if (ret == 0) {
		a.c.socket_path = a.sock;
		a.c.protocol = "criu";
		a.c.proto_arg = a.c.source;	/* its tasks */
		ret = serve_run(&a.c);
		fl_source_put(a.c.source);
	}
	return cli_exit("lazy-pages", ret);
}
