/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.h - the faultline command's subcommands, one file each.
 */
#ifndef FAULTLINE_CLI_H
#define FAULTLINE_CLI_H

#include <stddef.h>
#include <stdint.h>

struct serve_config;

int cmd_probe(int argc, char **argv);	/* tools/cmd_probe.c */
int cmd_serve(int argc, char **argv);	/* tools/cmd_serve.c */
int cmd_bench(int argc, char **argv);	/* bench/bench.c */
int cmd_image(int argc, char **argv);	/* tools/cmd_image.c */
int cmd_send(int argc, char **argv);	/* tools/cmd_send.c */
int cmd_vmm(int argc, char **argv);	/* tools/cmd_vmm.c */
int cmd_lazy_pages(int argc, char **argv);	/* tools/cmd_lazy_pages.c */
int cmd_status(int argc, char **argv);	/* tools/cmd_status.c */

/* Exit status for a command's result: 0, or 1 after one line on stderr. */
int cli_exit(const char *cmd, int ret);

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
/* A file written later: 0 if its directory takes it now, or -errno. */
int cli_check_writable(const char *path);
/*
 * --log-level NAME for cmd: the daemon's log from now on; 0, or 2 (a usage
 * error, said on stderr).
 */
int cli_log_level(const char *cmd, const char *name);

#endif
