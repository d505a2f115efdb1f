// SPDX-License-Identifier: Apache-2.0
/*
 * tests/store_registry.c - a directory chunk store's registry, through
 * `faultline image` as a user types it (docs/image-format.md,
 * "Registry").  Two snapshots a.mem and b.mem sharing all but two chunks
 * in one store: `image gc --store STORE STORE/images/b.fli` is refused in
 * one line (gc takes no images) and a.fli still verifies; `image gc
 * --store STORE` deletes nothing while both are registered.  a.fli's
 * index removed by hand changes nothing; `image delete` by its content id,
 * then gc deletes exactly its two chunks.  A store from before the
 * registry (chunks, no registry/) makes gc refuse in one line, deleting
 * nothing, and a create into it says so; `image register` of its images
 * turns it on; deleting one of them and gc then removes only that
 * image's own chunks.  register refuses an index whose chunks are gone;
 * gc removes a stale registry temporary (a register that died).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "util.h"

#define CHUNK	(64u << 10)
#define NCHUNK	16

static char dir[64];
static char out[8192];

static char *path_of(const char *name)
{
	return path_in(dir, name);
}

/* A memory file whose chunks all differ; those in changed[] differ more. */
static void write_mem(const char *name, const int *changed, int nchanged)
{
	static unsigned char buf[NCHUNK * CHUNK];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	int fd;

	for (size_t i = 0; i < sizeof(buf); i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)(x & 7);	/* compressible */
	}
	for (int k = 0; k < nchanged; k++)
		memset(buf + (size_t)changed[k] * CHUNK + 5, 0xc0 + k, 100);
	fd = open(path_of(name), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		BAIL("cannot write %s: %s", name, strerror(errno));
	close(fd);
}

/* `faultline image ARGS` (%s: dir): its exit status, its output in out. */
static int cli(const char *fmt, ...)
{
	char args[1024];
	FILE *f;
	size_t n;
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	st = run_image_cli(dir, args);
	f = fopen(path_of("cli.out"), "r");
	n = f ? fread(out, 1, sizeof(out) - 1, f) : 0;
	out[n] = 0;
	if (f)
		fclose(f);
	return st;
}

static bool said(const char *needle)
{
	if (!strstr(out, needle))
		diag("output: %s", out);
	return strstr(out, needle) != NULL;
}

static bool one_line(void)
{
	const char *nl = strchr(out, '\n');

	return nl && !nl[1];
}

static int count_objects(const char *store)
{
	char cmd[512], got[32] = "";
	FILE *f;

	snprintf(cmd, sizeof(cmd), "find %s/%s/chunks -type f ! -name "
		 "'.tmp-*' | wc -l", dir, store);
	f = popen(cmd, "r");
	if (!f || !fgets(got, sizeof(got), f))
		BAIL("cannot count %s", store);
	pclose(f);
	return atoi(got);
}

/* The content id `image inspect` prints for image (under dir). */
static bool id_of(const char *image, char *id, size_t n)
{
	const char *at;

	if (cli("inspect %s", path_of(image)) != 0 ||
	    !(at = strstr(out, "id:          ")))
		return false;
	snprintf(id, n, "%.32s", at + 13);
	return strlen(id) == 32;
}

/* The reproduction: gc given one image of two in a store. */
static void test_two_images(void)
{
	const int bc[] = { 3, 9 };
	char id[64];
	int n, st;

	write_mem("a.mem", NULL, 0);
	write_mem("b.mem", bc, 2);
	if (mkdir(path_of("store"), 0755) < 0 ||
	    mkdir(path_of("store/images"), 0755) < 0)
		BAIL("mkdir store: %s", strerror(errno));
	ok(cli("create %s %s --store %s --chunk 64K", path_of("a.mem"),
	       path_of("store/images/a.fli"), path_of("store")) == 0 &&
	   cli("create %s %s --store %s --chunk 64K", path_of("b.mem"),
	       path_of("store/images/b.fli"), path_of("store")) == 0,
	   "a.mem and b.mem into one store");
	n = count_objects("store");
	is_int(n, NCHUNK + 2, "18 objects: 16 shared or a's, b's 2");

	st = cli("gc --store %s %s", path_of("store"),
		 path_of("store/images/b.fli"));
	ok(st == 2 && said("gc takes no images") && one_line(),
	   "gc --store STORE b.fli: refused in one line (exit %d)", st);
	is_int(count_objects("store"), n, "... nothing deleted");
	st = cli("verify %s", path_of("store/images/a.fli"));
	ok(st == 0 && said("all chunks good"),
	   "... a.fli, in the same store, verifies (exit %d)", st);

	st = cli("gc --store %s", path_of("store"));
	ok(st == 0 && said("2 images registered") && said(" 0 deleted"),
	   "gc --store STORE: both registered, nothing deleted (exit %d)", st);
	ok(cli("verify %s", path_of("store/images/a.fli")) == 0 &&
	   cli("verify %s", path_of("store/images/b.fli")) == 0,
	   "... both verify");

	/* a.fli's index removed by hand: nothing changes until delete */
	ok(id_of("store/images/a.fli", id, sizeof(id)) &&
	   rename(path_of("store/images/a.fli"),
		  path_of("store/images/a.fli.saved")) == 0,
	   "a.fli (%s) removed from the store's images by hand", id);
	st = cli("gc --store %s", path_of("store"));
	ok(st == 0 && said(" 0 deleted") && count_objects("store") == n,
	   "... gc deletes nothing: a.fli is still registered (exit %d)", st);
	st = cli("delete --store %s %s", path_of("store"), id);
	ok(st == 0 && said(id) && said("deleted from the registry"),
	   "image delete by content id (exit %d)", st);
	st = cli("gc --store %s --dry-run", path_of("store"));
	ok(st == 0 && said("2 would be deleted") && count_objects("store") == n,
	   "gc --dry-run: a's 2 chunks would go, none deleted (exit %d)", st);
	st = cli("gc --store %s", path_of("store"));
	ok(st == 0 && said("1 image registered") && said(" 2 deleted") &&
	   count_objects("store") == n - 2,
	   "gc: exactly a's own 2 chunks deleted (exit %d)", st);
	st = cli("verify %s", path_of("store/images/b.fli"));
	ok(st == 0, "... b.fli verifies (exit %d)", st);
	st = cli("delete --store %s %s", path_of("store"), id);
	ok(st == 1 && said("no image") && one_line(),
	   "deleting it again: one line, not registered (exit %d)", st);
	if (rename(path_of("store/images/a.fli.saved"),
		   path_of("store/images/a.fli")) < 0)
		BAIL("put a.fli back: %s", strerror(errno));
	st = cli("register --store %s %s", path_of("store"),
		 path_of("store/images/a.fli"));
	ok(st == 1 && said("not in the store") && one_line(),
	   "a.fli put back, its chunks gone: register refuses (exit %d)",
	   st);
	st = cli("gc --store %s", path_of("store"));
	ok(st == 0 && said("1 image registered") && said(" 0 deleted"),
	   "... not registered (exit %d)", st);

	/* a register that died: its temporary goes with a later gc */
	{
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "touch -d '2 hours ago' %s",
			 path_of("store/registry/.tmp-1-0"));
		ok(system(cmd) == 0 && cli("gc --store %s --dry-run",
					   path_of("store")) == 0 &&
		   access(path_of("store/registry/.tmp-1-0"), F_OK) == 0 &&
		   cli("gc --store %s", path_of("store")) == 0 &&
		   access(path_of("store/registry/.tmp-1-0"), F_OK) < 0,
		   "a stale registry temporary: kept by --dry-run, removed "
		   "by gc");
	}
}

/* A store from before the registry: chunks, no registry/. */
static void test_old_store(void)
{
	const int yc[] = { 1, 2, 4 }, zc[] = { 5 };
	int n, st;

	write_mem("x.mem", NULL, 0);
	write_mem("y.mem", yc, 3);
	write_mem("z.mem", zc, 1);
	if (mkdir(path_of("old"), 0755) < 0)
		BAIL("mkdir old: %s", strerror(errno));
	ok(cli("create %s %s --store %s --chunk 64K", path_of("x.mem"),
	       path_of("old/x.fli"), path_of("old")) == 0 &&
	   cli("create %s %s --store %s --chunk 64K", path_of("y.mem"),
	       path_of("old/y.fli"), path_of("old")) == 0,
	   "x.fli and y.fli in a store");
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -r %s", path_of("old/registry"));
		ok(system(cmd) == 0, "... whose registry is taken away, as "
		   "in a store made before there was one");
	}
	n = count_objects("old");
	st = cli("gc --store %s", path_of("old"));
	ok(st == 1 && said("no registry") && said("image register") &&
	   one_line(), "gc of it: refused in one line (exit %d)", st);
	is_int(count_objects("old"), n, "... nothing deleted");
	st = cli("create %s %s --store %s --chunk 64K", path_of("z.mem"),
		 path_of("old/z.fli"), path_of("old"));
	ok(st == 0 && said("note:") && said("from before its registry"),
	   "a create into it says its images need registering (exit %d)",
	   st);
	n = count_objects("old");
	st = cli("gc --store %s", path_of("old"));
	ok(st == 1 && said("no registry") && count_objects("old") == n,
	   "... and gc still refuses (exit %d)", st);
	st = cli("register --store %s %s", path_of("old"),
		 path_of("x.mem"));
	ok(st == 1 && one_line(), "register of a file that is no index: "
	   "one line (exit %d)", st);

	st = cli("register --store %s %s %s", path_of("old"),
		 path_of("old/x.fli"), path_of("old/y.fli"));
	ok(st == 0 && said("x.fli: registered,") && said("y.fli: registered,")
	   && said("registry is on"), "image register x.fli y.fli (exit %d)",
	   st);
	st = cli("gc --store %s", path_of("old"));
	ok(st == 0 && said("3 images registered") && said(" 0 deleted"),
	   "gc: x, y and z (registered by its create) kept whole (exit %d)",
	   st);
	st = cli("delete --store %s %s", path_of("old"), path_of("old/y.fli"));
	ok(st == 0, "image delete y.fli (exit %d)", st);
	st = cli("gc --store %s", path_of("old"));
	ok(st == 0 && said(" 3 deleted") && count_objects("old") == n - 3,
	   "gc: only y's own 3 chunks deleted (exit %d)", st);
	ok(cli("verify %s", path_of("old/x.fli")) == 0 &&
	   cli("verify %s", path_of("old/z.fli")) == 0,
	   "... x.fli and z.fli verify");
	st = cli("verify %s", path_of("old/y.fli"));
	ok(st == 1 && said("no such chunk"), "... y.fli does not (exit %d)",
	   st);
}

int main(void)
{
	char cmd[128];

	snprintf(dir, sizeof(dir), "/tmp/fl-registry-%d", (int)getpid());
	if (mkdir(dir, 0755) < 0)
		BAIL("mkdir %s: %s", dir, strerror(errno));
	test_two_images();
	test_old_store();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		diag("could not remove %s", dir);
	return done_testing();
}
