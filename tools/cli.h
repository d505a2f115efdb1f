/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.h - the faultline command's subcommands, one file each.
 */
#ifndef FAULTLINE_CLI_H
#define FAULTLINE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <getopt.h>

struct serve_config;

int cmd_probe(int argc, char **argv);	/* tools/cmd_probe.c */
int cmd_serve(int argc, char **argv);	/* tools/cmd_serve.c */
int cmd_bench(int argc, char **argv);	/* bench/bench.c */
int cmd_image(int argc, char **argv);	/* tools/cmd_image.c */
/* `image gc|register|delete` (tools/cmd_image_store.c) */
int cmd_image_store(const char *sub, int argc, char **argv);
/* After `image create --store`: a line if the store's registry is off. */
void image_store_note(const char *store);
int cmd_send(int argc, char **argv);	/* tools/cmd_send.c */
int cmd_vmm(int argc, char **argv);	/* tools/cmd_vmm.c */
int cmd_lazy_pages(int argc, char **argv);	/* tools/cmd_lazy_pages.c */
int cmd_status(int argc, char **argv);	/* tools/cmd_status.c */
/* `probe --criu`: can criu dump here, and the fix (tools/cmd_probe_criu.c). */
int probe_criu(void);

/*
 * Exit statuses, the same for every subcommand (`faultline --help` says
 * so): CLI_USAGE when the command line itself is wrong (an unknown
 * option, a value of the wrong form, a required option missing or two
 * that do not go together), CLI_FAILED when it is right but the run
 * failed (a file missing or not what it must be, a source that cannot be
 * reached, the kernel refusing).
 */
#define CLI_FAILED	1
#define CLI_USAGE	2

struct serve_config;

/* Exit status for a command's result: 0, or CLI_FAILED after one line. */
int cli_exit(const char *cmd, int ret);
/* "faultline CMD: OPT 'VAL': WHY" on stderr; returns CLI_USAGE. */
int cli_bad(const char *cmd, const char *opt, const char *val,
	    const char *why);
/* The same line for a file an option names that cannot be used: CLI_FAILED. */
int cli_cannot(const char *cmd, const char *opt, const char *path,
	       const char *why);
/*
 * getopt_long() refused argv's option (it returned '?' or ':', opterr 0):
 * one line naming what was typed (unknown, ambiguous, a value missing or
 * not taken) and `faultline help CMD`; returns CLI_USAGE.
 */
int cli_bad_option(const char *cmd, char **argv, const char *shortopts,
		   const struct option *opts);
/* A required option missing: one line with the same pointer; CLI_USAGE. */
int cli_missing(const char *cmd, const char *what);
/* --chunk SIZE (a fault's fill): 0, or CLI_USAGE after saying why. */
int cli_parse_chunk(const char *cmd, const char *arg, uint64_t *chunk);
/*
 * What getopt_long() returns for an option.  One with a short form in its
 * command returns that letter (-c and --chunk: 'c'); so may the same
 * option where it is long only (--record in lazy-pages: 'r', serve's -r),
 * never another option.  Every other option has a code here, one per
 * option across the CLI (--no-prefetch is OPT_NO_PREFETCH in serve,
 * lazy-pages and vmm alike): no number means one option in one command
 * and another in the next.
 */
enum cli_opt {
	OPT_FIRST = 256,	/* past every letter */
	/* serve and lazy-pages (the table in cli.c) */
	OPT_CACHE = OPT_FIRST, OPT_PROGRESS, OPT_NO_PREFETCH,
	OPT_NO_BACKGROUND, OPT_METRICS, OPT_LOG_LEVEL,
	/* serve */
	OPT_SOCKET_OWNER, OPT_CACHE_MAX, OPT_NO_PROGRESS, OPT_CONTROL,
	OPT_LAYER,
	/* lazy-pages */
	OPT_STATUS_FD, OPT_PAGES, OPT_PAGE_SERVER, OPT_ADDRESS, OPT_PORT,
	OPT_PAGE_SERVER_CRIU,
	/* vmm, probe */
	OPT_MEM_SIZE, OPT_BACKEND, OPT_HUGE, OPT_VCPUS, OPT_WORKLOAD,
	OPT_WRITE, OPT_JSON, OPT_DISCARD, OPT_GUEST, OPT_NO_MOVE, OPT_REPLAY,
	OPT_COPY_BESIDE, OPT_RESET, OPT_DIRTY, OPT_DIRTY_PATTERN,
	OPT_RESET_EAGER, OPT_TRACK_SYNC, OPT_CRIU,
};

/*
 * The options serve and lazy-pages share (--chunk, --threads,
 * --stats-json, --on-source-error, --record, --prefetch, --cache,
 * --progress, --no-prefetch, --no-background, --metrics, --log-level) are
 * declared once, in cli.c's table: each one's name, value, code and parse
 * into the daemon's config.  Their help stays in each command's text,
 * worded for that command.
 */
/* The i-th shared option's long name, or NULL past the last (for tests). */
const char *cli_serve_option_name(unsigned int i);

/* In a command's option list: the shared option whose code is code. */
#define CLI_SHARED(code)	{ NULL, 0, NULL, (code) }

/* A command that takes the shared options (serve, lazy-pages). */
struct cli_serve_cmd {
	const char *name;		/* "serve": said in every error */
	const char *shortopts;		/* getopt_long()'s */
	/* its options in getopt's order (an ambiguous prefix lists them
	 * so), CLI_SHARED(code) among them, ended by { 0 } */
	const struct option *opts;
	const char *usage;		/* what --help prints */
	/* one of its own options into args: 0, the exit status, or
	 * -ENOENT if code is not its own */
	int (*own)(void *args, int code, const char *arg);
};
/*
 * cmd's command line: each option checked as it comes, by cmd->own or
 * into c by the shared table; no argument left.  0, or the exit status
 * after one line; *done after --help (the usage printed).
 */
int cli_serve_parse(const struct cli_serve_cmd *cmd, int argc, char **argv,
		    void *args, struct serve_config *c, bool *done);

/* Parse "4096", "64K", "2M", "1G" into bytes; -EINVAL if malformed. */
int parse_size(const char *s, uint64_t *out);
/*
 * The options serve and lazy-pages share for watching a restore:
 * --metrics [ADDR:]PORT (checked; loopback for a port alone) into c.
 * 0, or the exit status 2 after saying what is wrong.
 */
int cli_metrics_opt(const char *cmd, const char *arg, struct serve_config *c);
/*
 * c's control socket: --control PATH if given, else the listening
 * socket's path + ".ctl" (into buf); none without either.  0, or 2.
 */
int cli_control_path(const char *cmd, const char *given,
		     struct serve_config *c, char *buf, size_t len);
/*
 * The socket path a daemon will listen on, checked before anything else
 * opens (its control socket, PATH.ctl, would otherwise be the one named):
 * its directory there and writable, no server listening on it.  opt and
 * given: what the user typed (--socket PATH, -W DIR).  0, or CLI_FAILED
 * after one line.
 */
int cli_check_socket(const char *cmd, const char *opt, const char *given,
		     const char *path);
/* A file written later: 0 if its directory takes it now, or -errno. */
int cli_check_writable(const char *path);
/*
 * --log-level NAME for cmd: the daemon's log from now on; 0, or 2 (a usage
 * error, said on stderr).
 */
int cli_log_level(const char *cmd, const char *name);

#endif
