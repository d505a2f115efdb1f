// SPDX-License-Identifier: Apache-2.0
/*
 * cli.c - what every subcommand shares: exit statuses, the one line that
 * refuses an option, the arguments several commands take, and the table
 * of the options serve and lazy-pages share with the loop that parses
 * either command.
 *
 * Decision: each command keeps its own option list in getopt's order (an
 * ambiguous prefix lists the matches so) and names a shared option in it
 * by its code; the shared option's name, value and parse live here once.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "daemon/log.h"
#include "faultline.h"
#include "daemon/config.h"
#include "daemon/ctl.h"
#include "util/sock.h"

int cli_exit(const char *cmd, int ret)
{
	if (ret >= 0)
		return 0;
	fprintf(stderr, "faultline %s: %s\n", cmd,
		*fl_last_error() ? fl_last_error() : strerror(-ret));
	return CLI_FAILED;
}

int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno)
		return -EINVAL;
	int shift = 0;

	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i') + (end[*end == 'i'] == 'B');
	if (*end || (shift && v > (~0ULL >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

/* A file the daemon will write later: its directory must take it now. */
int cli_check_writable(const char *path)
{
	char dir[PATH_MAX];
	char *slash;

	if (access(path, F_OK) == 0)
		return access(path, W_OK) < 0 ? -errno : 0;
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = 0;
	else
		*slash = 0;
	return access(dir, W_OK | X_OK) < 0 ? -errno : 0;
}

int cli_check_socket(const char *cmd, const char *opt, const char *given,
		     const char *path)
{
	const char *at = strcmp(given, path) ? path : "it";
	int ret = cli_check_writable(path);

	if (ret < 0) {
		fprintf(stderr, "faultline %s: %s %s: cannot listen on %s: %s\n",
			cmd, opt, given, at, strerror(-ret));
		return CLI_FAILED;
	}
	if (sock_claim_unix(path) < 0) {	/* says "PATH: why" */
		fprintf(stderr, "faultline %s: %s %s%s%s\n", cmd, opt,
			strcmp(given, path) ? given : "",
			strcmp(given, path) ? ": " : "", fl_last_error());
		return CLI_FAILED;
	}
	return 0;
}

int cli_log_level(const char *cmd, const char *name)
{
	int level = log_level_parse(name);

	if (level < 0) {
		fprintf(stderr, "faultline %s: --log-level '%s': must be error, "
			"warning, info or debug\n", cmd, name);
		return 2;
	}
	log_init(level);
	return 0;
}

int cli_metrics_opt(const char *cmd, const char *arg, struct serve_config *c)
{
	char spec[128];

	if (metrics_bind_spec(arg, spec, sizeof(spec)) < 0) {
		fprintf(stderr, "faultline %s: --metrics '%s': expected PORT "
			"(loopback) or ADDR:PORT\n", cmd, arg);
		return 2;
	}
	c->metrics_addr = arg;
	return 0;
}

int cli_control_path(const char *cmd, const char *given,
		     struct serve_config *c, char *buf, size_t len)
{
	if (given && strlen(given) >= SOCK_UNIX_PATH_MAX) {
		fprintf(stderr, "faultline %s: --control '%s': too long for a "
			"socket path\n", cmd, given);
		return 2;
	}
	if (given) {
		c->control_path = given;
		return 0;
	}
	if (!c->socket_path)	/* systemd's socket: only when asked */
		return 0;
	if (ctl_path_for(c->socket_path, buf, len) < 0) {
		fprintf(stderr, "faultline %s: %s.ctl: too long for a socket "
			"path (give --control PATH)\n", cmd, c->socket_path);
		return 2;
	}
	c->control_path = buf;
	return 0;
}

static int refuse(int status, const char *cmd, const char *opt,
		  const char *val, const char *why)
{
	fprintf(stderr, "faultline %s: %s '%s': %s\n", cmd, opt, val, why);
	return status;
}

int cli_bad(const char *cmd, const char *opt, const char *val,
	    const char *why)
{
	return refuse(CLI_USAGE, cmd, opt, val, why);
}

int cli_cannot(const char *cmd, const char *opt, const char *path,
	       const char *why)
{
	return refuse(CLI_FAILED, cmd, opt, path, why);
}

int cli_parse_chunk(const char *cmd, const char *arg, uint64_t *chunk)
{
	uint64_t v;

	if (parse_size(arg, &v) < 0 || v < 4096 || v > FL_MAX_CHUNK ||
	    (v & (v - 1)))
		return cli_bad(cmd, "--chunk", arg,
			       "must be a power of two from 4K to 2M");
	*chunk = v;
	return 0;
}

static int parse_threads(const char *cmd, const char *arg,
			 unsigned int *threads)
{
	char *end;
	unsigned long v = strtoul(arg, &end, 10);

	if (!isdigit((unsigned char)*arg) || *end || v < 1 || v > 64)
		return cli_bad(cmd, "--threads", arg, "must be 1 to 64");
	*threads = (unsigned int)v;
	return 0;
}

static int parse_on_error(const char *cmd, const char *arg, int *on_error)
{
	if (!strcmp(arg, "poison"))
		*on_error = FL_ON_ERROR_POISON;
	else if (!strcmp(arg, "kill"))
		*on_error = FL_ON_ERROR_KILL;
	else
		return cli_bad(cmd, "--on-source-error", arg,
			       "must be poison or kill");
	return 0;
}

static int parse_threads_opt(const char *cmd, const char *arg,
			     struct serve_config *c)
{
	return parse_threads(cmd, arg, &c->threads);
}

static int parse_on_error_opt(const char *cmd, const char *arg,
			      struct serve_config *c)
{
	return parse_on_error(cmd, arg, &c->on_error);
}

static int parse_chunk_opt(const char *cmd, const char *arg,
			   struct serve_config *c)
{
	return cli_parse_chunk(cmd, arg, &c->chunk);
}

static int parse_record(const char *cmd, const char *arg,
			struct serve_config *c)
{
	if (cli_check_writable(arg) < 0)
		return cli_cannot(cmd, "--record", arg, strerror(errno));
	c->record = arg;
	return 0;
}

static int parse_prefetch(const char *cmd, const char *arg,
			  struct serve_config *c)
{
	if (access(arg, R_OK) < 0)
		return cli_cannot(cmd, "--prefetch", arg,
				  "cannot read the trace file");
	c->replay = arg;
	return 0;
}

static int parse_progress(const char *cmd, const char *arg,
			  struct serve_config *c)
{
	(void)cmd, (void)arg;
	c->progress = true;
	return 0;
}

static int parse_log_level(const char *cmd, const char *arg,
			   struct serve_config *c)
{
	(void)c;
	return cli_log_level(cmd, arg);
}

/*
 * A shared option: its getopt entry and what it does to the config: its
 * parse, or the string it names (at field), or the engine flags it sets.
 */
struct cli_serve_option {
	struct option opt;	/* name, has_arg, NULL, code */
	/* optarg into c: 0, or the exit status after one line */
	int (*parse)(const char *cmd, const char *arg, struct serve_config *c);
	size_t field;		/* offset of a const char * in c, or 0 */
	unsigned int flags;	/* FL_ENGINE_* */
};

#define SET_STR(f)	.field = offsetof(struct serve_config, f)
#define SET_FLAG(f)	.flags = (f)

static const struct cli_serve_option serve_options[] = {
	{ { "chunk", required_argument, NULL, 'c' },
	  .parse = parse_chunk_opt },
	{ { "threads", required_argument, NULL, 't' },
	  .parse = parse_threads_opt },
	{ { "stats-json", required_argument, NULL, 'j' },
	  SET_STR(stats_json) },
	{ { "on-source-error", required_argument, NULL, 'e' },
	  .parse = parse_on_error_opt },
	{ { "record", required_argument, NULL, 'r' },
	  .parse = parse_record },
	{ { "prefetch", required_argument, NULL, 'p' },
	  .parse = parse_prefetch },
	{ { "cache", required_argument, NULL, OPT_CACHE },
	  SET_STR(cache_dir) },
	{ { "progress", no_argument, NULL, OPT_PROGRESS },
	  .parse = parse_progress },
	{ { "no-prefetch", no_argument, NULL, OPT_NO_PREFETCH },
	  SET_FLAG(FL_ENGINE_NO_PREFETCH) },
	{ { "no-background", no_argument, NULL, OPT_NO_BACKGROUND },
	  SET_FLAG(FL_ENGINE_NO_BACKGROUND) },
	{ { "metrics", required_argument, NULL, OPT_METRICS },
	  .parse = cli_metrics_opt },
	{ { "log-level", required_argument, NULL, OPT_LOG_LEVEL },
	  .parse = parse_log_level },
	{ .opt = { 0 } }
};

const char *cli_serve_option_name(unsigned int i)
{
	return i < sizeof(serve_options) / sizeof(*serve_options) ?
	       serve_options[i].opt.name : NULL;
}

static const struct cli_serve_option *serve_option(int code)
{
	for (const struct cli_serve_option *s = serve_options; s->opt.name; s++)
		if (s->opt.val == code)
			return s;
	return NULL;
}

/* s given arg, into c: 0, or the exit status after one line. */
static int serve_option_set(const struct cli_serve_option *s,
			    const char *cmd, const char *arg,
			    struct serve_config *c)
{
	if (s->parse)
		return s->parse(cmd, arg, c);
	if (s->field)
		*(const char **)((char *)c + s->field) = arg;
	c->engine_flags |= s->flags;
	return 0;
}

/* cmd's getopt_long() table, its shared options filled in: 0 or -errno. */
static int build_options(const struct option *own, struct option *out,
			 size_t n)
{
	size_t i = 0;

	for (; own->name || own->val; own++) {
		const struct cli_serve_option *s =
			own->name ? NULL : serve_option(own->val);

		if (!own->name && !s)
			return -EINVAL;
		if (i + 1 >= n)
			return -ENOSPC;
		out[i++] = s ? s->opt : *own;
	}
	out[i] = (struct option){ 0 };
	return 0;
}

int cli_serve_parse(const struct cli_serve_cmd *cmd, int argc, char **argv,
		    void *args, struct serve_config *c, bool *done)
{
	struct option opts[64];
	const struct cli_serve_option *s;
	int opt, ret;

	if ((ret = build_options(cmd->opts, opts, 64)))
		return cli_exit(cmd->name, ret);
	opterr = 0;	/* cli_bad_option() says it, in one line */
	while ((opt = getopt_long(argc, argv, cmd->shortopts, opts,
				  NULL)) != -1) {
		if (opt == 'h') {
			fputs(cmd->usage, stdout);
			*done = true;
			return 0;
		}
		ret = cmd->own(args, opt, optarg);
		if (ret == -ENOENT && (s = serve_option(opt)))
			ret = serve_option_set(s, cmd->name, optarg, c);
		if (ret == -ENOENT)
			return cli_bad_option(cmd->name, argv, cmd->shortopts,
					      opts);
		if (ret)
			return ret;
	}
	if (optind < argc)
		return cli_bad(cmd->name, "argument", argv[optind],
			       "unexpected");
	return 0;
}

/* The options whose long name starts with name (len bytes), in buf. */
static int prefix_matches(const struct option *opts, const char *name,
			  size_t len, char *buf, size_t buflen)
{
	size_t n = 0;
	int count = 0;

	buf[0] = 0;
	for (const struct option *o = opts; o->name; o++) {
		if (strncmp(o->name, name, len))
			continue;
		if (strlen(o->name) == len)
			return -1;	/* an exact match */
		if (n < buflen)
			n += (size_t)snprintf(buf + n, buflen - n, "%s--%s",
					      count ? ", " : "", o->name);
		count++;
	}
	return count;
}

static const struct option *find_option(const struct option *opts,
					const char *name, size_t len)
{
	for (const struct option *o = opts; o->name; o++)
		if (strlen(o->name) == len && !strncmp(o->name, name, len))
			return o;
	return NULL;
}

int cli_bad_option(const char *cmd, char **argv, const char *shortopts,
		   const struct option *opts)
{
	const char *word = optind > 0 ? argv[optind - 1] : "", *sc;
	const struct option *o;
	char why[256];

	if (!strncmp(word, "--", 2) && word[2]) {
		const char *name = word + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		int n = prefix_matches(opts, name, len, why, sizeof(why));

		o = n < 0 ? find_option(opts, name, len) : NULL;
		if (n > 1) {
			fprintf(stderr, "faultline %s: option '%.*s' is "
				"ambiguous (%s); see `faultline help %s`\n",
				cmd, (int)len + 2, word, why, cmd);
			return CLI_USAGE;
		}
		if (n == 1 && !eq)	/* a unique prefix: its value missing */
			o = find_option(opts, why + 2, strlen(why + 2));
		if (o && o->has_arg == no_argument && eq) {
			fprintf(stderr, "faultline %s: option '--%s' takes no "
				"value ('%s'); see `faultline help %s`\n", cmd,
				o->name, word, cmd);
			return CLI_USAGE;
		}
		if (o) {
			fprintf(stderr, "faultline %s: option '--%s' needs a "
				"value; see `faultline help %s`\n", cmd,
				o->name, cmd);
			return CLI_USAGE;
		}
		fprintf(stderr, "faultline %s: unknown option '%.*s'; see "
			"`faultline help %s`\n", cmd, (int)len + 2, word, cmd);
		return CLI_USAGE;
	}
	sc = optopt > 0 && optopt < 256 && optopt != ':' ?
	     strchr(shortopts, optopt) : NULL;
	if (sc && sc[1] == ':' && sc[2] != ':')
		fprintf(stderr, "faultline %s: option '-%c' needs a value; see "
			"`faultline help %s`\n", cmd, optopt, cmd);
	else if (optopt > 0 && optopt < 256)
		fprintf(stderr, "faultline %s: unknown option '-%c'; see "
			"`faultline help %s`\n", cmd, optopt, cmd);
	else
		fprintf(stderr, "faultline %s: unknown option '%s'; see "
			"`faultline help %s`\n", cmd, word, cmd);
	return CLI_USAGE;
}

int cli_missing(const char *cmd, const char *what)
{
	fprintf(stderr, "faultline %s: %s; see `faultline help %s`\n", cmd,
		what, cmd);
	return CLI_USAGE;
}
