// SPDX-License-Identifier: Apache-2.0
/*
 * cli_inputs.c - inputs the faultline command used to take wrongly: each
 * gets one line naming the input and what is wrong with it, under one
 * exit convention for every subcommand (2: the command line is wrong,
 * 1: the run failed), as `faultline --help` says.
 *
 * Decision: tests/cli.c's way, a table of command lines run through the
 * shell under `timeout`, stdout and stderr kept apart; a command that
 * ends by itself within 10 s or fails.
 */
#include "serve_util.h"

static char dir[64], out[128], err[128];
static const char *bin;

/* Run "faultline ARGS" for at most secs (ARGS may use @D); exit status. */
static int run(const char *args, int secs)
{
	char cmd[2048], expanded[1024];
	const char *a = args;
	size_t n = 0;
	int st;

	while (*a && n < sizeof(expanded) - 64) {
		if (a[0] == '@' && a[1] == 'D') {
			n += snprintf(expanded + n, sizeof(expanded) - n, "%s", dir);
			a += 2;
		} else {
			expanded[n++] = *a++;
		}
	}
	expanded[n] = 0;
	snprintf(cmd, sizeof(cmd), "timeout %d %s %s >%s 2>%s </dev/null",
		 secs, bin, expanded, out, err);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const struct cli_case {
	const char *args;
	int status;
	const char *where;	/* "out" or "err": which must hold text */
	const char *text;
} cases[] = {
	{ "--help", 0, "out", "2 the command line is wrong" },
	/* Usage errors are 2 in every command. */
	{ "serve --mem-file @D/mem", 2, "err",
	  "faultline serve: --socket PATH (or systemd's socket activation) "
	  "is required" },
	{ "image create @D/mem @D/lvl.img --level 99", 2, "err",
	  "faultline image: --level 99: not a zstd level" },
	{ "vmm --mem-file @D/mem --backend uffd --workload linear", 2, "err",
	  "faultline vmm: the uffd backend needs --socket" },
	/* One rule for --chunk. */
	{ "vmm --mem-file @D/mem --backend inproc --workload linear --chunk 0",
	  2, "err", "faultline vmm: --chunk '0': must be a power of two from "
	  "4K to 2M" },
	{ "vmm --mem-file @D/mem --backend inproc --workload linear --chunk 3000",
	  2, "err", "faultline vmm: --chunk '3000': must be a power of two" },
	{ "lazy-pages -D @D --chunk 0", 2, "err",
	  "faultline lazy-pages: --chunk '0': must be a power of two" },
	{ "serve --socket @D/s --mem-file @D/mem --chunk 0", 2, "err",
	  "faultline serve: --chunk '0': must be a power of two" },
	{ "lazy-pages -D @D --threads 0", 2, "err",
	  "faultline lazy-pages: --threads '0': must be 1 to 64" },
	{ "serve --socket @D/s --mem-file @D/mem --on-source-error x", 2, "err",
	  "faultline serve: --on-source-error 'x': must be poison or kill" },
	/* Ports are numbers from 1 to 65535, never truncated nor looked up. */
	{ "send --listen 127.0.0.1:99999 --mem-file @D/mem", 2, "err",
	  "faultline send: --listen 127.0.0.1:99999: port '99999': not a "
	  "number from 1 to 65535" },
	{ "send --listen 127.0.0.1:abc --mem-file @D/mem", 2, "err",
	  "port 'abc': not a number from 1 to 65535" },
	{ "send --listen 127.0.0.1:0 --mem-file @D/mem", 2, "err",
	  "port '0': not a number from 1 to 65535" },
	{ "serve --socket @D/s --mem-file tcp://127.0.0.1:99999", 2, "err",
	  "faultline serve: --mem-file tcp://127.0.0.1:99999: port '99999': "
	  "not a number from 1 to 65535" },
	/* A scheme faultline does not read is not a missing file. */
	{ "serve --socket @D/s --mem-file ftp://x/y", 2, "err",
	  "faultline serve: --mem-file ftp://x/y: unsupported scheme ftp:// "
	  "(http://, https://, tcp://, or a file's path)" },
	{ "lazy-pages -D @D --pages s3://bucket/pages", 2, "err",
	  "faultline lazy-pages: --pages s3://bucket/pages: unsupported "
	  "scheme s3://" },
	/* A file an option names that cannot be used is a failed run: 1. */
	{ "lazy-pages -D @D --prefetch @D/nosuch.trace", 1, "err",
	  "faultline lazy-pages: --prefetch '" },
};

static void check(const struct cli_case *c, int secs)
{
	int st = run(c->args, secs);
	bool in_out = su_file_has(out, c->text), in_err = su_file_has(err, c->text);
	bool where_ok = !strcmp(c->where, "out") ? in_out : in_err;

	ok(st == c->status && where_ok, "faultline %s: exit %d (want %d), "
	   "std%s says \"%s\"", c->args, st, c->status, c->where, c->text);
	if (st != c->status || !where_ok) {
		diag("stdout:");
		serve_log_dump_file(out);
		diag("stderr:");
		serve_log_dump_file(err);
	}
}

int main(void)
{
	char path[160];
	struct mem_file mem;

	bin = serve_bin();
	snprintf(dir, sizeof(dir), "/tmp/fl-cli-inputs-XXXXXX");
	if (!mkdtemp(dir))
		BAIL("mkdtemp: %s", strerror(errno));
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	if (mem_file_create(&mem, 1 << 20, 7) < 0)
		BAIL("cannot create a memory file");
	snprintf(path, sizeof(path), "%s/mem", dir);
	if (link(mem.path, path) < 0 && symlink(mem.path, path) < 0)
		BAIL("link: %s", strerror(errno));
	for (unsigned int i = 0; i < sizeof(cases) / sizeof(*cases); i++)
		check(&cases[i], 10);
	mem_file_destroy(&mem);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	if (system(path) != 0)
		diag("could not remove %s", dir);
	return done_testing();
}
