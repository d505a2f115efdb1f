// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_send.c - `faultline send`: option parsing for the live post-copy
 * sender (src/send/send.c); the receiving side is `faultline serve --mem-file
 * tcp://HOST:PORT`.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "faultline.h"
#include "daemon/log.h"
#include "send/send.h"
#include "util/sock.h"

static const char usage[] =
	"usage: faultline send --listen ADDR:PORT --mem-file FILE\n"
	"       [--block-size SIZE] [--once]\n";

/* The sender's lines, in the daemon's log format (`faultline: send: ...`). */
static void say(void *arg, const char *line)
{
	(void)arg;
	log_line(LOG_INFO, "send", "%s", line);
}

int cmd_send(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "mem-file", required_argument, NULL, 'm' },
		{ "block-size", required_argument, NULL, 'b' },
		{ "once", no_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct send_config c = { 0 };
	char host[256], port[8];
	uint64_t v;
	int opt;

	opterr = 0;	/* cli_bad_option() says it, in one line */
	while ((opt = getopt_long(argc, argv, "l:m:b:oh", opts, NULL)) != -1) {
		switch (opt) {
		case 'l': c.listen = optarg; break;
		case 'm': c.mem_file = optarg; break;
		case 'o': c.once = true; break;
		case 'b':
			if (parse_size(optarg, &v) < 0 || v < 4096 ||
			    v > (2u << 20) || (v & (v - 1))) {
				fprintf(stderr, "faultline send: --block-size "
					"'%s': must be a power of two from 4K "
					"to 2M\n", optarg);
				return CLI_USAGE;
			}
			c.block_size = (uint32_t)v;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			return cli_bad_option("send", argv, "l:m:b:oh", opts);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "faultline send: argument '%s': unexpected\n",
			argv[optind]);
		return CLI_USAGE;
	}
	if (!c.listen || !c.mem_file) {
		return cli_missing("send", "--listen and --mem-file are "
				   "required");
	}
	if (sock_split_hostport(c.listen, host, sizeof(host), port,
				sizeof(port)) < 0) {
		fprintf(stderr, "faultline send: --listen %s\n",
			fl_last_error());
		return CLI_USAGE;
	}
	c.note = say;
	return cli_exit("send", send_run(&c));
}
