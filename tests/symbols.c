// SPDX-License-Identifier: Apache-2.0
/*
 * symbols.c - what the shipped artifacts expose: every defined external
 * symbol of libfaultline.a and of libfaultline.so is public API (a global of
 * src/libfaultline.map) and every public name is defined there, neither
 * holds daemon code, the shipped archive links into a program by itself,
 * and the faultline binary holds no testlib object.
 *
 * Decision: read the artifacts with nm(1), as a user's linker sees them, and
 * parse the map here instead of reusing the list the build derives from it,
 * so that a wrong derivation fails this test rather than hiding from it.
 * "Holds no object of archive X" means: no external symbol that X defines
 * is defined there (local ones too, for the library, whose internals are
 * local), so whatever moves into src/daemon/ or testlib/ is covered.  This
 * program alone links the shipped libfaultline.a (the others link the
 * internal archive), so building it proves that archive is whole.
 *
 * Usage: symbols [BUILD_DIR [MAP]]; BUILD_DIR defaults to the directory of
 * $FAULTLINE_BIN (build/), MAP to src/libfaultline.map.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "faultline.h"
#include "tap.h"

#define NAMES_MAX	8192
#define NAME_LEN	256

struct names {
	int n;
	char name[NAMES_MAX][NAME_LEN];
};

static struct names api;	/* the map's globals (may be patterns) */
static struct names nodes;	/* the map's version nodes */
static struct names found;	/* one nm run's defined externals */

static void add(struct names *s, const char *name, size_t len)
{
	if (s->n == NAMES_MAX || len >= NAME_LEN)
		BAIL("symbol list full or name too long: %.*s", (int)len, name);
	memcpy(s->name[s->n], name, len);
	s->name[s->n++][len] = 0;
}

static bool has(const struct names *s, const char *name, bool patterns)
{
	for (int i = 0; i < s->n; i++)
		if (patterns ? fnmatch(s->name[i], name, 0) == 0 :
			       strcmp(s->name[i], name) == 0)
			return true;
	return false;
}

/*
 * The globals of a GNU ld version script: words ending in ';' between
 * "global:" and "local:" or the node's '}'; node names before '{'.
 */
static int parse_map(const char *path)
{
	static char text[1 << 16];
	FILE *f = fopen(path, "r");
	size_t len;
	bool global = false;
	char *p, *end;

	if (!f)
		return -errno;
	len = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[len] = 0;
	while ((p = strstr(text, "/*"))) {
		end = strstr(p + 2, "*/");
		if (!end)
			return -EINVAL;
		memset(p, ' ', end + 2 - p);
	}
	for (p = text; *p;) {
		size_t n;

		if (strchr(" \t\n{};", *p)) {
			if (*p == '}')
				global = false;
			p++;
			continue;
		}
		n = strcspn(p, " \t\n{};");
		end = p + n;
		while (*end == ' ' || *end == '\t' || *end == '\n')
			end++;
		if (n == 7 && !strncmp(p, "global:", 7))
			global = true;
		else if (n == 6 && !strncmp(p, "local:", 6))
			global = false;
		else if (*end == '{')
			add(&nodes, p, n);
		else if (global && *end == ';')
			add(&api, p, n);
		p += n;
	}
	return api.n ? 0 : -ENOENT;
}

/* nm's defined external symbols of path into found; 0 or -1. */
static int nm(const char *flags, const char *path)
{
	char cmd[1024], line[1024], type, name[NAME_LEN * 2];
	unsigned long long addr;
	FILE *p;
	int st, w;

	found.n = 0;
	snprintf(cmd, sizeof(cmd), "nm %s --defined-only '%s' 2>&1", flags,
		 path);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		/* "ADDRESS TYPE NAME"; else a member's "NAME.o:" or an error */
		if (sscanf(line, "%llx%n %c %511s", &addr, &w, &type, name) != 3 ||
		    w < 8 || line[w] != ' ') {
			line[strcspn(line, "\n")] = 0;
			if (strchr(line, ':') && !strstr(line, ".o:"))
				diag("%s", line);
			continue;
		}
		name[strcspn(name, "@")] = 0;	/* fl_x@@FAULTLINE_0.2 */
		if (!has(&nodes, name, false) && !has(&found, name, false))
			add(&found, name, strlen(name));
	}
	st = pclose(p);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 && found.n ? 0 : -1;
}

/* The externals nm found that are not public API: none, or each named. */
static void only_api(const char *what)
{
	int bad = 0;

	for (int i = 0; i < found.n; i++)
		if (!has(&api, found.name[i], true))
			bad++;
	if (!ok(bad == 0, "%s: every defined external symbol is in the map",
		what))
		diag("%d not public API:", bad);
	for (int i = 0; i < found.n; i++)
		if (!has(&api, found.name[i], true))
			diag("  %s", found.name[i]);
}

/* Every public name of the map is defined in what nm found. */
static void all_api(const char *what)
{
	int missing = 0;

	for (int i = 0; i < api.n; i++)
		if (!strpbrk(api.name[i], "*?[") &&
		    !has(&found, api.name[i], false)) {
			diag("  missing: %s", api.name[i]);
			missing++;
		}
	ok(missing == 0, "%s: every global of the map is defined", what);
}

static void check_lib(const char *flags, const char *path)
{
	if (!ok(nm(flags, path) == 0, "nm reads %s", path)) {
		skip(2, "no symbols");
		return;
	}
	only_api(path);
	all_api(path);
}

/*
 * No external symbol that the archive `from` defines is defined in `in`
 * (nm with `flags`: "-g" for a program's externals, "" for every symbol of
 * a library, local ones too), and nm finds `must` there (not stripped).
 */
static void check_none(const char *in, const char *flags, const char *must,
		       const char *from)
{
	static struct names theirs;
	int bad = 0;

	if (!ok(nm("-g", from) == 0, "nm reads %s", from)) {
		skip(2, "nothing to compare");
		return;
	}
	theirs = found;
	if (!ok(nm(flags, in) == 0 && has(&found, must, false),
		"%s has a symbol table (%s)", in, must)) {
		skip(1, "stripped or unreadable");
		return;
	}
	for (int i = 0; i < theirs.n; i++)
		if (has(&found, theirs.name[i], false))
			bad++;
	if (!ok(bad == 0, "%s defines none of %s's %d symbols", in, from,
		theirs.n))
		diag("%d of them there:", bad);
	for (int i = 0; i < theirs.n; i++)
		if (has(&found, theirs.name[i], false))
			diag("  %s", theirs.name[i]);
}

int main(int argc, char **argv)
{
	const char *bin_env = getenv("FAULTLINE_BIN");
	const char *map = argc > 2 ? argv[2] : "src/libfaultline.map";
	char dir[512], path[1024], from[1024];
	int err;

	snprintf(dir, sizeof(dir), "%s", bin_env && *bin_env ? bin_env :
		 "build/faultline");
	if (argc > 1)
		snprintf(dir, sizeof(dir), "%s", argv[1]);
	else
		dirname(dir);

	err = parse_map(map);
	if (err)
		BAIL("%s: %s", map, strerror(-err));
	diag("%s: %d public names; artifacts in %s/", map, api.n, dir);

	snprintf(path, sizeof(path), "%s/libfaultline.a", dir);
	check_lib("-g", path);
	snprintf(path, sizeof(path), "%s/libfaultline.so", dir);
	check_lib("-D", path);

	/* The library is only the library; the binary has no test code. */
	snprintf(from, sizeof(from), "%s/libfldaemon.a", dir);
	snprintf(path, sizeof(path), "%s/libfaultline.a", dir);
	check_none(path, "", "fl_version", from);
	snprintf(path, sizeof(path), "%s/libfaultline.so", dir);
	check_none(path, "", "fl_version", from);
	snprintf(from, sizeof(from), "%s/libfltest.a", dir);
	snprintf(path, sizeof(path), "%s/faultline", dir);
	check_none(path, "-g", "main", from);

	ok(strcmp(fl_version(), FL_VERSION) == 0,
	   "a program linked with the shipped libfaultline.a calls it");
	return done_testing();
}
