/*
 * faultline.c - the command-line entry point: dispatches to subcommands.
 */
#include <ctype.h>
#include <errno.h>
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
	{ "probe", cmd_probe, "what the kernel supports [--json]" },
	{ "serve", cmd_serve, "serve Firecracker UFFD clients on a socket" },
	{ "bench", cmd_bench, "run a benchmark (bench list)" },
	{ "image", cmd_image, "create, inspect, verify snapshot images" },
	{ "send", cmd_send, "send a memory file to a post-copy destination" },
};

int cli_exit(const char *cmd, int ret)
{
	if (ret >= 0)
		return 0;
	fprintf(stderr, "faultline %s: %s\n", cmd,
		*fl_last_error() ? fl_last_error() : strerror(-ret));
	return 1;
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

static void usage(FILE *f)
{
	fprintf(f, "usage: faultline COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "faultline: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
