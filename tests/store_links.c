// SPDX-License-Identifier: Apache-2.0
/*
 * tests/store_links.c - no symbolic link is followed beneath a chunk
 * store's root or inside a --cache directory.  A store's chunks/HH
 * replaced by a link to a directory outside (holding the real objects
 * and a chunk-named file): a read through it is refused naming the path,
 * `image verify` fails, `image create` into it is refused, and `image
 * gc` deletes nothing through it and says it skipped the link; a single
 * object replaced by a link: the same.  The store's root itself may be a
 * link (it is opened as given); its registry/ may not.  A cache file replaced by a link to a
 * forged but well-formed block outside: the origin's bytes are served,
 * not the forgery's, with a note naming the link; a link planted where
 * the cache writes a file is replaced, never written through.  Every
 * case runs twice: as the kernel is, and with openat2 made to fail
 * ENOSYS by a seccomp filter (the O_NOFOLLOW walk the library falls back
 * to on kernels before 5.6).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xxhash.h>

#include "faultline.h"
#include "store/chunk_store.h"
#include "author/create.h"
#include "format/image.h"
#include "source/source.h"
#include "no_openat2.h"
#include "tap.h"
#include "util.h"
#include "http_util.h"

#define CHUNK	(64u << 10)
#define SIZE	(64 * CHUNK)		/* 4 MiB: 64 chunks */
#define BLK	(512u << 10)		/* the HTTP source's cache block */

static char dir[64], store[96], img[128], mem[96];
static uint8_t *want;
static struct nginx ng;
static char url[256], cache[96];

static char *at(const char *name)
{
	static char bufs[8][256];
	static int n;
	char *p = bufs[n++ % 8];

	snprintf(p, 256, "%s/%s", dir, name);
	return p;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool cli_said(const char *needle)
{
	char buf[8192];
	FILE *f = fopen(at("cli.out"), "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = 0;
	if (!strstr(buf, needle))
		diag("output (no \"%s\"): %s", needle, buf);
	return strstr(buf, needle) != NULL;
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static int count_files(const char *d)
{
	DIR *dd = opendir(d);
	struct dirent *de;
	int n = 0;

	while (dd && (de = readdir(dd)))
		n += de->d_name[0] != '.';
	if (dd)
		closedir(dd);
	return n;
}

/* Read spec whole: 0 if every byte is want's, else -errno or 1. */
static int read_whole(const char *spec, const struct fl_source_opts *o)
{
	struct fl_source *s;
	uint8_t *buf = malloc(SIZE);
	int ret = fl_source_open_ex(spec, o, &s);

	if (ret == 0) {
		ret = s->ops->read(s, buf, SIZE, 0);
		if (ret == 0 && memcmp(buf, want, SIZE))
			ret = 1;
		fl_source_put(s);
	}
	free(buf);
	return ret;
}

/* ---- openat2 made to fail (no_openat2.h) ---------------------------------- */

/*
 * fn() (0: it held, else a diag said why), here or in a child whose
 * openat2 fails ENOSYS (fallback), the CLI it runs included.
 */
static int run(bool fallback, int (*fn)(void))
{
	pid_t pid;
	int st;

	if (!fallback)
		return fn();
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int ret = no_openat2();

		if (ret < 0) {
			printf("# seccomp: %s\n", strerror(-ret));
			ret = 1;
		} else {
			ret = fn() ? 1 : 0;
		}
		fflush(stdout);
		_exit(ret);
	}
	return pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) ? -1 :
	       WEXITSTATUS(st);
}

/* ---- the store ----------------------------------------------------------- */

static char hh[3];		/* a chunks/HH directory of the store */

/* The case: chunks/HH a link to a directory outside. */
static int dir_link(void)
{
	char victim_file[256], msg[64];
	int bad = 0, before, ret;

	/* the real objects moved outside, and a chunk-named stray beside */
	if (sh("mv %s/chunks/%s %s && ln -s %s %s/chunks/%s", store, hh,
	       at("victim"), at("victim"), store, hh))
		return diag("cannot plant the link"), 1;
	snprintf(victim_file, sizeof(victim_file), "%s/%s%062d", at("victim"),
		 hh, 0);
	if (sh("echo victim > %s", victim_file))
		return 1;
	before = count_files(at("victim"));
	snprintf(msg, sizeof(msg), "chunks/%s/", hh);

	ret = read_whole(img, NULL);
	if (ret >= 0 || !strstr(fl_last_error(), msg) ||
	    !strstr(fl_last_error(), "not followed")) {
		diag("a read through chunks/%s: %d %s", hh, ret,
		     ret < 0 ? fl_last_error() : "served");
		bad = 1;
	}
	{
		char args[512];

		snprintf(args, sizeof(args), "verify %s", img);
		if (run_image_cli(dir, args) != 1 || !cli_said("not followed"))
			bad = 1, diag("image verify did not refuse the link");
		snprintf(args, sizeof(args), "create %s %s --store %s "
			 "--chunk %u", mem, at("img/b.fli"), store, CHUNK);
		if (run_image_cli(dir, args) == 0 || !cli_said("not followed"))
			bad = 1, diag("image create into the link not refused");
		snprintf(args, sizeof(args), "gc --store %s", store);
		if (run_image_cli(dir, args) != 0 ||
		    !cli_said("a symbolic link: skipped"))
			bad = 1, diag("gc did not say it skipped the link");
	}
	if (!exists(victim_file) || count_files(at("victim")) != before) {
		diag("gc deleted through chunks/%s: %d files of %d left", hh,
		     count_files(at("victim")), before);
		bad = 1;
	}
	sh("rm -f %s %s/chunks/%s && mv %s %s/chunks/%s && rm -f %s",
	   victim_file, store, hh, at("victim"), store, hh, at("img/b.fli"));
	return bad;
}

/* One object a link to a file outside, and a chunk-named link beside. */
static int file_link(void)
{
	char obj[512], stray[256], msg[300], args[512];
	struct dirent *de = NULL;
	DIR *d;
	int bad = 0, ret;

	snprintf(obj, sizeof(obj), "%s/chunks/%s", store, hh);
	d = opendir(obj);
	while (d && (de = readdir(d)) && de->d_name[0] == '.')
		;
	if (!de)
		return diag("no object in %s", obj), 1;
	snprintf(msg, sizeof(msg), "chunks/%s/%s", hh, de->d_name);
	snprintf(obj, sizeof(obj), "%s/%s", store, msg);
	closedir(d);
	snprintf(stray, sizeof(stray), "%s/chunks/%s/%s%062d", store, hh, hh,
		 1);
	if (sh("mv %s %s && ln -s %s %s && echo victim > %s && ln -s %s %s",
	       obj, at("victim-obj"), at("victim-obj"), obj,
	       at("victim-stray"), at("victim-stray"), stray))
		return diag("cannot plant the links"), 1;

	ret = read_whole(img, NULL);
	if (ret >= 0 || !strstr(fl_last_error(), msg) ||
	    !strstr(fl_last_error(), "not followed")) {
		diag("a read of the linked object: %d %s", ret,
		     ret < 0 ? fl_last_error() : "served");
		bad = 1;
	}
	snprintf(args, sizeof(args), "gc --store %s", store);
	if (run_image_cli(dir, args) != 0 ||
	    !cli_said("a symbolic link: skipped"))
		bad = 1, diag("gc did not say it skipped the link");
	if (!exists(at("victim-obj")) || !exists(at("victim-stray")))
		bad = 1, diag("gc deleted a file outside the store");
	sh("rm -f %s %s && mv %s %s && rm -f %s", obj, stray, at("victim-obj"),
	   obj, at("victim-stray"));
	return bad;
}

/*
 * The store's registry/ a link to a directory outside: register, delete
 * and gc refuse naming it, and nothing is written or deleted outside.
 */
static int registry_link(void)
{
	char args[512], reg[512];
	int bad = 0, before;

	snprintf(reg, sizeof(reg), "%s/registry", store);
	if (sh("mv %s %s && ln -s %s %s", reg, at("victim-reg"),
	       at("victim-reg"), reg))
		return diag("cannot plant the link"), 1;
	before = count_files(at("victim-reg"));
	snprintf(args, sizeof(args), "register --store %s %s", store, img);
	if (run_image_cli(dir, args) == 0 || !cli_said("not followed"))
		bad = 1, diag("register through registry/ not refused");
	snprintf(args, sizeof(args), "delete --store %s %s", store, img);
	if (run_image_cli(dir, args) == 0 || !cli_said("not followed"))
		bad = 1, diag("delete through registry/ not refused");
	snprintf(args, sizeof(args), "gc --store %s", store);
	if (run_image_cli(dir, args) == 0 || !cli_said("not followed") ||
	    !cli_said("nothing deleted"))
		bad = 1, diag("gc through registry/ not refused");
	if (count_files(at("victim-reg")) != before)
		bad = 1, diag("registry/ outside changed: %d files, %d before",
			      count_files(at("victim-reg")), before);
	sh("rm -f %s && mv %s %s", reg, at("victim-reg"), reg);
	return bad;
}

/* The store's root is opened as given: a link to it serves. */
static int root_link(void)
{
	char args[512];
	int bad = 0;

	if (sh("ln -sfn store %s", at("alias")))
		return 1;
	snprintf(args, sizeof(args), "create %s %s --store %s --chunk %u",
		 mem, at("img/c.fli"), at("alias"), CHUNK);
	if (run_image_cli(dir, args) != 0)
		bad = 1, diag("create through a linked root failed");
	if (read_whole(at("img/c.fli"), NULL) != 0)
		bad = 1, diag("read through a linked root: %s", fl_last_error());
	snprintf(args, sizeof(args), "gc --store %s", at("alias"));
	if (run_image_cli(dir, args) != 0 || !cli_said("0 deleted"))
		bad = 1, diag("gc through a linked root");
	sh("rm -f %s %s", at("alias"), at("img/c.fli"));
	return bad;
}

/* ---- the cache ----------------------------------------------------------- */

static char notes[4096];

static void note(void *arg, const char *line)
{
	(void)arg;
	if (strlen(notes) + strlen(line) + 2 < sizeof(notes))
		strcat(strcat(notes, line), "\n");
}

/* The name of block b's file in cache directory d, or NULL. */
static const char *block_file(const char *d, unsigned int b)
{
	static char name[300];
	char suffix[32];
	struct dirent *de;
	DIR *dd = opendir(d);

	snprintf(suffix, sizeof(suffix), "-%08x.blk", b);
	name[0] = 0;
	while (dd && (de = readdir(dd)))
		if (strlen(de->d_name) > strlen(suffix) &&
		    !strcmp(de->d_name + strlen(de->d_name) - strlen(suffix),
			    suffix))
			snprintf(name, sizeof(name), "%s", de->d_name);
	if (dd)
		closedir(dd);
	return name[0] ? name : NULL;
}

/* The cache file for block 1 a link to a well-formed forgery outside. */
static int cache_read_link(void)
{
	struct fl_source_opts o = { .cache_dir = cache, .note = note };
	char path[512], forged[256];
	const char *name;
	uint8_t *blk = malloc(40 + BLK);
	struct stat st, st2;
	uint64_t h;
	int bad = 0, fd, ret;

	sh("rm -rf %s", cache);
	if (read_whole(url, &o) != 0 || !(name = block_file(cache, 1)))
		return diag("cannot warm the cache: %s", fl_last_error()), 1;
	snprintf(path, sizeof(path), "%s/%s", cache, name);
	fd = open(path, O_RDONLY);
	if (fd < 0 || pread(fd, blk, 40 + BLK, 0) != 40 + BLK)
		return diag("cannot read %s", path), 1;
	close(fd);
	for (unsigned int i = 0; i < BLK; i++)	/* other bytes, well formed */
		blk[40 + i] ^= 0x5a;
	h = XXH64(blk + 40, BLK, 0);
	memcpy(blk + 24, &h, 8);
	snprintf(forged, sizeof(forged), "%s", at("forged.blk"));
	fd = open(forged, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || pwrite(fd, blk, 40 + BLK, 0) != 40 + BLK)
		return diag("cannot write %s", forged), 1;
	close(fd);
	free(blk);
	if (unlink(path) < 0 || symlink(forged, path) < 0)
		return diag("cannot plant %s", path), 1;
	stat(forged, &st);
	notes[0] = 0;

	ret = read_whole(url, &o);
	if (ret != 0) {
		diag("read with a linked cache file: %s", ret == 1 ?
		     "the forged bytes were served" : fl_last_error());
		bad = 1;
	}
	if (!strstr(notes, name) || !strstr(notes, "symbolic link")) {
		diag("no note naming the link %s: %s", name, notes);
		bad = 1;
	}
	if (stat(forged, &st2) < 0 || st2.st_mtim.tv_sec != st.st_mtim.tv_sec ||
	    st2.st_mtim.tv_nsec != st.st_mtim.tv_nsec) {
		diag("the file outside the cache was touched");
		bad = 1;
	}
	sh("rm -rf %s %s", cache, forged);
	return bad;
}

/*
 * Links where the cache writes: its object identity file's temporary
 * name (DIR/KEY.object.PID, written at every open) and a block file's
 * name: the files outside keep their bytes.
 */
static int cache_write_link(void)
{
	struct fl_source_opts o = { .cache_dir = cache };
	char path[256], tmp[600], buf[64] = "";
	const char *name = NULL;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int bad = 0, fd;

	sh("rm -rf %s", cache);
	if (read_whole(url, &o) != 0)
		return diag("cannot warm the cache: %s", fl_last_error()), 1;
	d = opendir(cache);
	while (d && (de = readdir(d)))
		if (strstr(de->d_name, ".object"))
			snprintf(path, sizeof(path), "%s", de->d_name),
			name = path;
	if (d)
		closedir(d);
	if (!name)
		return diag("no identity file in the cache"), 1;
	snprintf(tmp, sizeof(tmp), "%s/%s.%d", cache, name, (int)getpid());
	if (sh("echo victim > %s && ln -s %s %s", at("victim-id"),
	       at("victim-id"), tmp))
		return 1;
	snprintf(path, sizeof(path), "%s/%s", cache,
		 block_file(cache, 2));
	if (sh("echo victim > %s && rm %s && ln -s %s %s", at("victim-blk"),
	       path, at("victim-blk"), path))
		return 1;

	if (read_whole(url, &o) != 0)
		bad = 1, diag("read: %s", fl_last_error());
	fd = open(at("victim-id"), O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) < 0 ||
	    strcmp(buf, "victim\n")) {
		diag("the identity was written through a link: \"%s\"", buf);
		bad = 1;
	}
	if (fd >= 0)
		close(fd);
	memset(buf, 0, sizeof(buf));
	fd = open(at("victim-blk"), O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) < 0 ||
	    strcmp(buf, "victim\n")) {
		diag("a block was written through a link");
		bad = 1;
	}
	if (fd >= 0)
		close(fd);
	if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
		bad = 1, diag("the block's link was not replaced by its file");
	sh("rm -rf %s %s %s", cache, at("victim-id"), at("victim-blk"));
	return bad;
}

int main(void)
{
	struct image_create_opts o = { .chunk_size = CHUNK };
	bool have_nginx = nginx_binary() != NULL;
	struct image_info in;
	struct dirent *de;
	DIR *d;
	int ret;

	snprintf(dir, sizeof(dir), "/tmp/fl-links-%d", (int)getpid());
	if (mkdir(dir, 0755) < 0 || mkdir(at("img"), 0755) < 0)
		BAIL("mkdir %s: %s", dir, strerror(errno));
	snprintf(store, sizeof(store), "%s/store", dir);
	snprintf(img, sizeof(img), "%s/img/a.fli", dir);
	snprintf(mem, sizeof(mem), "%s/a.mem", dir);
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	want = malloc(SIZE);
	for (uint64_t i = 0; i < SIZE / 8; i++)
		((uint64_t *)want)[i] = pattern_word(i * 8, 0x11f5);
	int fd = open(mem, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || write(fd, want, SIZE) != SIZE)
		BAIL("cannot write %s", mem);
	close(fd);
	o.store = store;
	ret = image_create(mem, img, &o, &in);
	ok(ret == 0, "an image in a store: %s", ret ? fl_last_error() : "ok");
	d = opendir(at("store/chunks"));
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			snprintf(hh, sizeof(hh), "%.2s", de->d_name);
	if (d)
		closedir(d);
	if (!hh[0])
		BAIL("no chunks/HH in %s", store);
	ok(read_whole(img, NULL) == 0, "it reads back");

	if (have_nginx) {
		if (nginx_setup(&ng) || sh("cp %s %s/raw.mem && chmod 644 "
					    "%s/raw.mem", mem, ng.www, ng.www)
		    || nginx_start(&ng))
			BAIL("nginx: %s", strerror(errno));
		snprintf(url, sizeof(url), "http://127.0.0.1:%d/raw.mem",
			 ng.port);
	}
	for (int fb = 0; fb < 2; fb++) {
		const char *how = fb ? "openat2 ENOSYS (O_NOFOLLOW walk)" :
				  "openat2";

		ok(run(fb, dir_link) == 0, "%s: chunks/%s a link out of the "
		   "store: a read refused naming it, verify fails, create "
		   "refused, gc skips it saying so and deletes nothing "
		   "outside", how, hh);
		ok(run(fb, file_link) == 0, "%s: an object a link out of the "
		   "store: a read refused naming it, gc deletes nothing "
		   "outside and says it skipped", how);
		ok(run(fb, registry_link) == 0, "%s: registry/ a link out of "
		   "the store: register, delete and gc refuse naming it, "
		   "nothing outside written or deleted", how);
		ok(run(fb, root_link) == 0, "%s: the store's root a link: "
		   "opened as given (create, read, gc)", how);
		if (!have_nginx) {
			skip_missing(2, "nginx", "not installed (make deps "
				     "installs nginx-light)");
			continue;
		}
		ok(run(fb, cache_read_link) == 0, "%s: a cache file a link to "
		   "a well-formed forgery outside: the origin's bytes served, "
		   "a note names the link, the file outside untouched", how);
		ok(run(fb, cache_write_link) == 0, "%s: links where the cache "
		   "writes (its identity file, a block): replaced, never "
		   "written through", how);
	}
	if (have_nginx)
		nginx_cleanup(&ng);
	if (!tap_failures() || !getenv("KEEP_LOGS"))
		sh("rm -rf %s", dir);
	free(want);
	return done_testing();
}
