// SPDX-License-Identifier: Apache-2.0
/*
 * main.c - the faultline command's entry point: dispatches to subcommands.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "faultline.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
};

static const struct command commands[] = {
	{ "probe", cmd_probe, "what the kernel supports [--json]; --criu: "
	  "can criu dump here" },
	{ "serve", cmd_serve, "serve Firecracker UFFD clients on a socket" },
	{ "bench", cmd_bench, "run a benchmark (bench list)" },
	{ "image", cmd_image, "snapshot images: create, inspect, verify, "
	  "unpack; chunk stores: gc, register, delete" },
	{ "send", cmd_send, "send a memory file to a post-copy destination" },
	{ "vmm", cmd_vmm, "run a test KVM guest over restored memory" },
	{ "lazy-pages", cmd_lazy_pages, "serve `criu restore --lazy-pages` (criu lazy-pages)" },
	{ "status", cmd_status, "sessions of a running daemon (--json)" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: faultline COMMAND [ARGS] | help [COMMAND] | "
		"--version\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "\nexit status, every command: 0 done; 1 the run failed (a file "
		"missing or\nnot what it must be, a source unreachable, the kernel "
		"refusing; vmm: a\nwrong checksum); 2 the command line is wrong (an "
		"unknown option, a value\nof the wrong form, a required option "
		"missing, options that do not go\ntogether)\n");
}

/* `faultline help [COMMAND]`: the list, or COMMAND --help. */
static int help(int argc, char **argv)
{
	char opt[] = "--help";

	if (argc < 2) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		if (!strcmp(argv[1], commands[i].name)) {
			char *args[] = { argv[1], opt, NULL };

			return commands[i].run(2, args);
		}
	fprintf(stderr, "faultline help: unknown command '%s'; see `faultline "
		"help`\n", argv[1]);
	return CLI_USAGE;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "--version")) {
		printf("faultline %s (libfaultline %s)\n", FL_VERSION,
		       fl_version());
		return 0;
	}
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "help"))
		return help(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "faultline: unknown command '%s'; see `faultline "
		"help`\n", argv[1]);
	return CLI_USAGE;
}
