// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_serve.c - `faultline serve`: option parsing for the daemon (src/daemon/serve.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "faultline.h"
#include "daemon/serve.h"
#include "daemon/supervise.h"
#include "source/source.h"
#include "util/sock.h"

static const char usage[] =
	"usage: faultline serve --socket PATH --mem-file FILE|URL|s3://BUCKET/KEY\n"
	"       [--layer DIFF ...] [--chunk SIZE]\n"
	"       [--threads N] [--stats-json FILE] [--once] [--allow-uid UID,...]\n"
	"       [--socket-owner UID[:GID]]\n"
	"       [--on-source-error poison|kill] [--record TRACE] [--prefetch TRACE]\n"
	"       [--cache DIR] [--cache-max SIZE] [--progress|--no-progress]\n"
	"       [--no-prefetch] [--no-background]\n"
	"       [--log-level error|warning|info|debug] [--control PATH]\n"
	"       [--metrics [ADDR:]PORT]\n"
	"  --layer: a diff snapshot over the memory file (a file, an image or\n"
	"  a URL, the memory file's size), repeatable: the first just above\n"
	"  it, the last on top; each page comes from the topmost layer that\n"
	"  holds it.  A raw file (Firecracker's diff snapshot) holds its data:\n"
	"  its holes fall through to the layers below, a page it wrote as\n"
	"  zeros is zeros; a diff image (image create --parent) holds its\n"
	"  pages and must lie over its parent; any other image or URL holds\n"
	"  every page.  A diff image as the memory file brings its chain of\n"
	"  parents, found beside it\n"
	"  --control: the status socket (`faultline status`), by default the\n"
	"  socket's path + .ctl; root and this uid only\n"
	"  --metrics: serve GET /metrics (Prometheus) on PORT of 127.0.0.1, or\n"
	"  of ADDR if given (0.0.0.0:PORT: every interface)\n"
	"  --progress: restore progress on stderr, checked every 250 ms: a bar\n"
	"  on a terminal (the default there), otherwise a line each time the\n"
	"  restore has passed another 10 % mark (a restore done within 250 ms\n"
	"  shows only its 'restore complete' line)\n"
	"  --chunk: bytes filled per fault, fixed; without it the chunk adapts:\n"
	"  64K, doubled up to 2M while faults come in order, 2M when several\n"
	"  vCPUs wait on faults at once\n"
	"  --socket-owner: the socket (mode 0600) is given to UID (and GID), so\n"
	"  a VMM running as UID (a jailed Firecracker) can connect, and it is\n"
	"  served; peers of other uids but root and the daemon's own are\n"
	"  refused, and killed if they sent a uffd (--allow-uid: only those)\n"
	"  --no-prefetch: no readahead of fault streams; --no-background: no\n"
	"  background restore (both, with --chunk 4K: a naive handler, one\n"
	"  page per fault, to compare against)\n";

/* "0,1000": each a number; an empty list or entry is an error. */
static int parse_uids(const char *arg, struct serve_config *c)
{
	char *copy = strdup(arg), *rest = copy, *t;
	int ret = copy && *copy ? 0 : -EINVAL;

	while (ret == 0 && (t = strsep(&rest, ","))) {
		char *end;
		unsigned long v = strtoul(t, &end, 10);

		if (*end || !*t || *t == '-' || v > 0xfffffffeul ||
		    c->nallow == SERVE_MAX_UIDS)
			ret = -EINVAL;
		else
			c->allow_uids[c->nallow++] = (uid_t)v;
	}
	free(copy);
	return ret;
}

/* "UID" or "UID:GID": the socket file's owner (--socket-owner). */
static int parse_owner(const char *arg, struct serve_config *c)
{
	char *end;
	unsigned long uid = strtoul(arg, &end, 10), gid = (gid_t)-1;

	if (end == arg || (*end && *end != ':') || uid >= (uid_t)-1)
		return -EINVAL;
	if (*end == ':') {
		const char *g = end + 1;

		gid = strtoul(g, &end, 10);
		if (end == g || *end || gid >= (gid_t)-1)
			return -EINVAL;
	}
	c->socket_chown = true;
	c->socket_uid = (uid_t)uid;
	c->socket_gid = (gid_t)gid;
	return 0;
}

static bool is_url(const char *spec)
{
	return !strncasecmp(spec, "http://", 7) ||
	       !strncasecmp(spec, "https://", 8) ||
	       !strncasecmp(spec, "s3://", 5);	/* as the library does */
}

/* Is the memory file or a layer a URL (what --cache is for)? */
static bool any_url(const struct serve_config *c)
{
	for (unsigned int i = 0; i < c->nlayers; i++)
		if (is_url(c->layers[i]))
			return true;
	return is_url(c->mem_file);
}

/* Options that only make sense together, checked once all are read. */
static int check_combinations(const struct serve_config *c, bool cache_max)
{
	if (c->cache_dir && !any_url(c)) {
		fprintf(stderr, "faultline serve: --cache %s: only for http://, "
			"https:// and s3:// memory files or layers (%s is read "
			"directly)\n", c->cache_dir, c->mem_file);
		return CLI_USAGE;
	}
	if (cache_max && !c->cache_dir) {
		fprintf(stderr, "faultline serve: --cache-max needs --cache "
			"DIR\n");
		return CLI_USAGE;
	}
	return 0;
}

#define SHORT_OPTS	"s:m:c:t:j:ou:e:r:p:h"

/* In this order for getopt (an ambiguous prefix lists them so). */
static const struct option own_opts[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "mem-file", required_argument, NULL, 'm' },
	CLI_SHARED('c'),		/* --chunk */
	CLI_SHARED('t'),		/* --threads */
	CLI_SHARED('j'),		/* --stats-json */
	{ "once", no_argument, NULL, 'o' },
	{ "allow-uid", required_argument, NULL, 'u' },
	{ "socket-owner", required_argument, NULL, OPT_SOCKET_OWNER },
	CLI_SHARED('e'),		/* --on-source-error */
	CLI_SHARED('r'),		/* --record */
	CLI_SHARED('p'),		/* --prefetch */
	CLI_SHARED(OPT_CACHE),
	{ "cache-max", required_argument, NULL, OPT_CACHE_MAX },
	CLI_SHARED(OPT_PROGRESS),
	{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
	CLI_SHARED(OPT_NO_PREFETCH),
	CLI_SHARED(OPT_NO_BACKGROUND),
	{ "control", required_argument, NULL, OPT_CONTROL },
	CLI_SHARED(OPT_METRICS),
	CLI_SHARED(OPT_LOG_LEVEL),
	{ "layer", required_argument, NULL, OPT_LAYER },
	{ "help", no_argument, NULL, 'h' },
	{ 0 }
};

/* What the command line says: the daemon's config and what checks it. */
struct serve_args {
	struct serve_config c;
	const char *layers[FL_MAX_LAYERS];
	const char *control;		/* --control, or NULL */
	bool cache_max;			/* --cache-max given */
	char ctl[SOCK_UNIX_PATH_MAX];	/* the control socket's path */
};

/* --layer DIFF: one more, checked. */
static int add_layer(struct serve_args *a, const char *arg)
{
	if (source_check_spec(arg) < 0) {
		fprintf(stderr, "faultline serve: --layer %s\n",
			fl_last_error());
		return CLI_USAGE;
	}
	if (a->c.nlayers == FL_MAX_LAYERS) {
		char why[64];

		snprintf(why, sizeof(why), "one layer too many (at most %d)",
			 FL_MAX_LAYERS);
		return cli_bad("serve", "--layer", arg, why);
	}
	a->layers[a->c.nlayers++] = arg;
	return 0;
}

/* One option of serve's own (not shared with lazy-pages): 0 or the exit. */
static int own_opt(void *args, int opt, const char *arg)
{
	struct serve_args *a = args;
	struct serve_config *c = &a->c;

	switch (opt) {
	case 's': c->socket_path = arg; break;
	case 'm': c->mem_file = arg; break;
	case 'o': c->once = true; break;
	case OPT_SOCKET_OWNER:
		if (parse_owner(arg, c) < 0)
			return cli_bad("serve", "--socket-owner", arg,
				       "expected UID or UID:GID (numbers)");
		break;
	case 'u':
		if (parse_uids(arg, c) < 0)
			return cli_bad("serve", "--allow-uid", arg,
				       "must be a comma-separated list of "
				       "numeric uids (an empty list would "
				       "allow no one)");
		break;
	case OPT_LAYER:
		return add_layer(a, arg);
	case OPT_NO_PROGRESS: c->progress = false; break;
	case OPT_CONTROL: a->control = arg; break;
	case OPT_CACHE_MAX:
		if (parse_size(arg, &c->cache_max) < 0 ||
		    c->cache_max < (1 << 20))
			return cli_bad("serve", "--cache-max", arg,
				       "must be a size of at least 1M");
		a->cache_max = true;
		break;
	default:
		return -ENOENT;
	}
	return 0;
}

static const struct cli_serve_cmd cmd = {
	.name = "serve", .shortopts = SHORT_OPTS, .opts = own_opts,
	.usage = usage, .own = own_opt,
};

/* What needs every option read: required ones, pairs, the specs. */
static int check(struct serve_args *a)
{
	struct serve_config *c = &a->c;
	int ret;

	if (!c->mem_file || (!c->socket_path && !getenv(SUP_FD_ENV) &&
			     !sock_activated())) {
		return cli_missing("serve", c->mem_file ? "--socket PATH (or "
				   "systemd's socket activation) is required" :
				   "--mem-file FILE is required");
	}
	if ((ret = check_combinations(c, a->cache_max)) ||
	    (ret = cli_control_path("serve", a->control, c, a->ctl,
				    sizeof(a->ctl))))
		return ret;
	if (source_check_spec(c->mem_file) < 0) {
		fprintf(stderr, "faultline serve: --mem-file %s\n",
			fl_last_error());
		return CLI_USAGE;
	}
	return 0;
}

int cmd_serve(int argc, char **argv)
{
	static struct serve_args a;
	bool done = false;
	int ret;

	a.c = (struct serve_config){ .threads = 1,
				     .handshake_timeout_ms = 5000,
				     .progress = isatty(2), .layers = a.layers };
	if ((ret = cli_serve_parse(&cmd, argc, argv, &a, &a.c,
				    &done)) || done ||
	    (ret = check(&a)))
		return ret;
	/*
	 * This process is the supervisor; it runs the server as its child
	 * (this command again, told so by the environment).  argv - 1 is
	 * the whole command line: main() passed argv + 1.
	 */
	if (!getenv(SUP_FD_ENV)) {
		if (a.c.socket_path &&
		    (ret = cli_check_socket("serve", "--socket",
					    a.c.socket_path, a.c.socket_path)))
			return ret;
		return supervise_run(argv - 1);
	}
	return cli_exit("serve", serve_run(&a.c));
}
