// SPDX-License-Identifier: Apache-2.0
/*
 * cli.c - the faultline command as a user meets it: every option that
 * cannot work is refused at once with one line naming it (exit 2 for a
 * command line that is wrong, 1 for a run that failed: a file it names
 * that cannot be used, say), `help` and every `--help`
 * print on stdout and exit 0, and `image create` never replaces its own
 * input.
 *
 * Decision: one table of command lines, each run through the shell under
 * `timeout` (a daemon that starts when it should have refused fails the
 * point instead of hanging), its stdout and stderr kept apart.
 */
#include <ctype.h>

#include "cli.h"
#include "serve_util.h"

static char dir[64], out[128], err[128];
static const char *bin;

/* Run "faultline ARGS" (ARGS may use @D for the temp dir); exit status. */
static int run(const char *args)
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
	snprintf(cmd, sizeof(cmd), "timeout 10 %s %s >%s 2>%s </dev/null", bin,
		 expanded, out, err);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const struct cli_case {
	const char *args;
	int status;
	const char *where;	/* "out" or "err": which must hold text */
	const char *text;
} cases[] = {
	{ "serve --socket @D/s --mem-file @D/mem --allow-uid ''", 2, "err",
	  "faultline serve: --allow-uid '': must be" },
	{ "serve --socket @D/s --mem-file @D/mem --allow-uid 0,,1", 2, "err",
	  "faultline serve: --allow-uid '0,,1'" },
	{ "serve --socket @D/s --mem-file @D/mem --record /nonexistent/x.trace",
	  1, "err", "faultline serve: --record '/nonexistent/x.trace'" },
	{ "serve --socket @D/s --mem-file @D/mem --stats-json /nonexistent/x",
	  1, "err", "faultline serve: --stats-json /nonexistent/x" },
	{ "serve --socket @D/s --mem-file @D/mem --cache @D/cache", 2, "err",
	  "faultline serve: --cache " },
	{ "serve --socket @D/s --mem-file @D/mem --cache-max 1G", 2, "err",
	  "faultline serve: --cache-max needs --cache" },
	{ "serve --socket @D/s --mem-file @D/empty", 1, "err",
	  "empty (0 bytes)" },
	{ "serve", 2, "err", "faultline serve: --mem-file FILE is required; "
	  "see `faultline help serve`" },
	/* A remote origin that is not there: the wait is logged, not silent. */
	{ "serve --socket @D/s --mem-file 'tcp://127.0.0.1:1?retry_ms=2500'",
	  1, "err", "retrying for up to 2 s" },
	{ "serve --socket @D/s --mem-file http://127.0.0.1:1/x.mem", 1, "err",
	  "; try 2 of 5 in 50 ms" },
	{ "image create @D/mem @D/mem", 1, "err", "itself" },
	{ "image create @D/mem @D/link", 1, "err", "itself" },
	{ "image create @D/mem @D/img --level -5", 0, "out",
	  "zstd level:  -5" },
	{ "image inspect @D/img", 0, "out", "zstd level:  -5" },
	{ "help", 0, "out", "commands:" },
	{ "help serve", 0, "out", "usage: faultline serve" },
	{ "help nosuch", 2, "err", "faultline help: unknown command" },
	{ "--version", 0, "out", "faultline " },
	{ "probe --help", 0, "out", "usage: faultline probe" },
	{ "serve --help", 0, "out", "usage: faultline serve" },
	{ "bench --help", 0, "out", "usage: faultline bench" },
	{ "image --help", 0, "out", "usage: faultline image" },
	{ "send --help", 0, "out", "usage: faultline send" },
	{ "vmm --help", 0, "out", "usage: faultline vmm" },
};

static void check(const struct cli_case *c)
{
	int st = run(c->args);
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
	if (c->status == 0 && !strcmp(c->where, "out"))
		ok(su_file_size(err) == 0, "faultline %s: nothing on stderr",
		   c->args);
}

/* Does "--name" stand in file f as a whole option (not --name-more)? */
static bool names_option(const char *f, const char *name)
{
	char text[8192], opt[64];
	FILE *fp = fopen(f, "r");
	size_t n = fp ? fread(text, 1, sizeof(text) - 1, fp) : 0;
	size_t len = (size_t)snprintf(opt, sizeof(opt), "--%s", name);

	if (fp)
		fclose(fp);
	text[n] = 0;
	for (const char *p = text; (p = strstr(p, opt)); p += len)
		if (!isalnum((unsigned char)p[len]) && p[len] != '-')
			return true;
	return false;
}

/*
 * The options serve and lazy-pages share are one table (tools/cli.c):
 * each is in both commands' help, so neither help falls behind it.
 */
static void check_shared_help(void)
{
	static const char *const cmds[] = { "serve", "lazy-pages" };
	const char *name;

	for (unsigned int c = 0; c < 2; c++) {
		char args[64];

		snprintf(args, sizeof(args), "help %s", cmds[c]);
		ok(run(args) == 0, "faultline %s: exit 0", args);
		for (unsigned int i = 0; (name = cli_serve_option_name(i)); i++)
			ok(names_option(out, name), "faultline help %s shows "
			   "--%s, a shared option", cmds[c], name);
	}
}

int main(void)
{
	char path[160];
	struct mem_file mem;
	uint64_t before;

	bin = serve_bin();
	snprintf(dir, sizeof(dir), "/tmp/fl-cli-XXXXXX");
	if (!mkdtemp(dir))
		BAIL("mkdtemp: %s", strerror(errno));
	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(err, sizeof(err), "%s/err", dir);
	if (mem_file_create(&mem, 1 << 20, 7) < 0)
		BAIL("cannot create a memory file");
	snprintf(path, sizeof(path), "%s/mem", dir);
	if (link(mem.path, path) < 0 && symlink(mem.path, path) < 0)
		BAIL("link: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/link", dir);
	if (link(mem.path, path) < 0)
		BAIL("link: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/empty", dir);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	before = su_word(0, 7);
	for (unsigned int i = 0; i < sizeof(cases) / sizeof(*cases); i++)
		check(&cases[i]);
	check_shared_help();
	ok(mem.map && !memcmp(mem.map, &before, sizeof(before)) &&
	   su_file_size(mem.path) == 1 << 20,
	   "the memory file is what it was after image create onto itself");
	mem_file_destroy(&mem);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	if (system(path) != 0)
		diag("could not remove %s", dir);
	return done_testing();
}
