// SPDX-License-Identifier: Apache-2.0
/*
 * tests/store.c - chunk-store images (version 3) in a local directory:
 * `image create --store` writes each distinct chunk once and a second
 * snapshot sharing most of them writes only its new ones (as create
 * prints); the index reads byte for byte through fl_source_open(), a diff
 * image in the store too; a damaged or missing object fails the read
 * naming it; an unknown version is refused; gc deletes only what no
 * registered image references (creates register theirs), a parent of a
 * registered diff is not deleted, and gc cannot take the store while a
 * create holds it.  tests/store_registry.c: the registry itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "faultline.h"
#include "author/create.h"
#include "author/gc.h"
#include "format/image.h"
#include "store/chunk_store.h"
#include "store/store.h"
#include "author/registry.h"
#include "source/source.h"
#include "tap.h"
#include "util.h"

#define CHUNK	(64u << 10)
#define SIZE	(64 * CHUNK)		/* 4 MiB: 64 chunks */

static char dir[64];

/* What the cases share: the raw files, the store, its first count. */
static unsigned char r1[SIZE], r2[SIZE], d[SIZE];
static char store[80];
static int n1;			/* objects after the first snapshot */

static char *path_of(const char *name)
{
	return path_in(dir, name);
}

static uint64_t rng = 0x243f6a8885a308d3ull;

static void fill_random(unsigned char *b, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		/* compressible (half the chunks) or not, by position */
		b[i] = (i / CHUNK) % 2 ? (unsigned char)rng :
		       (unsigned char)(rng & 3);
	}
}

static void write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || write(fd, buf, len) != (ssize_t)len)
		BAIL("cannot write %s: %s", path, strerror(errno));
	close(fd);
}

/* Every byte of spec through fl_source_open equals raw. */
static bool reads_as(const char *spec, const unsigned char *raw, size_t len)
{
	struct fl_source *s;
	unsigned char *buf = malloc(len);
	bool same;
	int ret = fl_source_open(spec, &s);

	if (ret < 0) {
		diag("open %s: %s", spec, fl_last_error());
		free(buf);
		return false;
	}
	same = fl_source_size(s) == len &&
	       s->ops->read(s, buf, len / 2 + 7, 0) == 0 &&
	       s->ops->read(s, buf + len / 2 + 7, len - len / 2 - 7,
			    len / 2 + 7) == 0 &&
	       !memcmp(buf, raw, len);
	if (!same)
		diag("%s: %s", spec, fl_last_error());
	fl_source_put(s);
	free(buf);
	return same;
}

static int count_objects(const char *store)
{
	char cmd[512], out[32] = "";
	FILE *f;

	snprintf(cmd, sizeof(cmd), "find %s/chunks -type f ! -name '.tmp-*' "
		 "| wc -l", store);
	f = popen(cmd, "r");
	if (!f || !fgets(out, sizeof(out), f))
		BAIL("cannot count %s", store);
	pclose(f);
	return atoi(out);
}

static int run_cli(const char *args)
{
	return run_image_cli(dir, args);
}

static bool cli_said(const char *needle)
{
	char buf[8192];
	FILE *f = fopen(path_of("cli.out"), "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = 0;
	if (!strstr(buf, needle))
		diag("output: %s", buf);
	return strstr(buf, needle) != NULL;
}

/* r1: random and compressible chunks, 8 of them zero. */
static int case_first(void)
{
	struct image_create_opts o = { .chunk_size = CHUNK, .store = store };
	struct image_info in;
	int ret;

	fill_random(r1, SIZE);
	memset(r1 + 8 * CHUNK, 0, 8 * CHUNK);
	write_file(path_of("r1"), r1, SIZE);
	ret = image_create(path_of("r1"), path_of("img/one.fli"), &o, &in);
	ok(ret == 0, "create --store: %s", ret ? fl_last_error() : "ok");
	is_int(in.hdr.version, IMAGE_VERSION_STORE, "a version 3 image");
	is_int(in.new_chunks, 56, "first snapshot: its 56 non-zero chunks new");
	is_int(in.count[IMAGE_ZERO], 8, "8 zero chunks, not stored");
	ok(in.new_bytes == in.stored[IMAGE_RAW] + in.stored[IMAGE_ZSTD] &&
	   in.count[IMAGE_ZSTD] > 0 && in.count[IMAGE_RAW] > 0,
	   "bytes written are the stored chunks' (%llu), raw and zstd",
	   (unsigned long long)in.new_bytes);
	n1 = count_objects(store);
	is_int(n1, 56, "one object per distinct chunk in store/chunks");
	ok(!strcmp(in.hdr.store_path, "../store"),
	   "the image records its store from its directory: %s",
	   in.hdr.store_path);
	ok(reads_as(path_of("img/one.fli"), r1, SIZE),
	   "the index reads as the raw file");
	return 0;
}

/* r2: the same base with two chunks changed; the CLI says what was new. */
static int case_second(void)
{
	struct image_create_opts o = { .chunk_size = CHUNK, .store = store };
	struct image_info in;
	char args[1400];
	int ret;

	memcpy(r2, r1, SIZE);
	memset(r2 + 3 * CHUNK + 100, 0x5a, 3000);
	fill_random(r2 + 40 * CHUNK, CHUNK);
	write_file(path_of("r2"), r2, SIZE);
	ret = image_create(path_of("r2"), path_of("img/two.fli"), &o, &in);
	ok(ret == 0, "second create: %s", ret ? fl_last_error() : "ok");
	is_int(in.new_chunks, 2, "second snapshot: only its 2 changed chunks "
	       "written");
	is_int(count_objects(store), n1 + 2, "the store grew by 2 objects");
	ok(reads_as(path_of("img/two.fli"), r2, SIZE),
	   "the second index reads as its raw file");

	/* The CLI says what was new. */
	snprintf(args, sizeof(args), "create %s %s --store %s --chunk 64K",
		 path_of("r2"), path_of("img/two-again.fli"), store);
	ok(run_cli(args) == 0 && cli_said("new chunks:  0 of 56 stored, 0 "
					  "bytes written"),
	   "create of a snapshot the store has: 0 new chunks, 0 bytes");
	return 0;
}

/* A diff image in the store, over two.fli. */
static int case_diff(void)
{
	struct image_create_opts o = { .chunk_size = CHUNK, .store = store };
	struct image_info in;
	int ret;
	int fd = open(path_of("d"), O_WRONLY | O_CREAT | O_TRUNC,
		      0644);
	unsigned char page[4096];

	memset(page, 0xd1, sizeof(page));
	if (fd < 0 || ftruncate(fd, SIZE) < 0 ||
	    pwrite(fd, page, 4096, 17 * 4096) != 4096)
		BAIL("diff file");
	close(fd);
	memcpy(d, r2, SIZE);
	memcpy(d + 17 * 4096, page, 4096);
	o.parent = path_of("img/two.fli");
	ret = image_create(path_of("d"), path_of("img/diff.fli"), &o,
			   &in);
	o.parent = NULL;
	ok(ret == 0 && image_is_diff(&in.hdr) && in.new_chunks == 1 &&
	   in.pages_held == 1,
	   "a diff image into the store: 1 page held, 1 chunk new%s%s",
	   ret ? ": " : "", ret ? fl_last_error() : "");
	ok(reads_as(path_of("img/diff.fli"), d, SIZE),
	   "the diff reads as its parent with its page over it");
	return 0;
}

/* Damage: a changed object, a missing object. */
static int case_damage(void)
{
	char args[1400], name[128];
	int ret;
	struct image *img;
	char obj[300], save[320];
	uint64_t i = 0;

	if (image_open(path_of("img/one.fli"), &img) < 0)
		BAIL("open one.fli");
	while (img->index[i].kind == IMAGE_ZERO)
		i++;
	store_chunk_name(img->index[i].sha, name, sizeof(name));
	image_close(img);
	snprintf(obj, sizeof(obj), "%s/%s", store, name);
	snprintf(save, sizeof(save), "%s.save", obj);
	snprintf(args, sizeof(args), "cp %s %s && printf x | dd of=%s "
		 "bs=1 seek=10 conv=notrunc 2>/dev/null", obj, save,
		 obj);
	if (system(args) != 0)
		BAIL("damage %s", obj);
	struct fl_source *s;
	unsigned char buf[4096];

	ret = fl_source_open(path_of("img/one.fli"), &s);
	ret = ret ? ret : s->ops->read(s, buf, sizeof(buf), 0);
	ok(ret == -EBADMSG &&
	   (strstr(fl_last_error(), "SHA-256 mismatch") ||
	    strstr(fl_last_error(), "corrupt zstd")),
	   "a changed object fails the read naming it: %s",
	   fl_last_error());
	if (!ret || s)
		fl_source_put(s);
	unlink(obj);
	ret = fl_source_open(path_of("img/one.fli"), &s);
	ret = ret ? ret : s->ops->read(s, buf, sizeof(buf), 0);
	ok(ret == -ENOENT && strstr(fl_last_error(), name) &&
	   strstr(fl_last_error(), "no such chunk"),
	   "a missing object fails the read naming it: %s",
	   fl_last_error());
	fl_source_put(s);
	if (rename(save, obj) < 0)
		BAIL("restore %s", obj);
	return 0;
}

/* Another version: refused before anything else is read. */
static int case_version(void)
{
	char args[1400];
	int ret;
	unsigned char v4[4] = { 4, 0, 0, 0 };
	struct fl_source *s;
	int fd;

	snprintf(args, sizeof(args), "cp %s %s", path_of("img/one.fli"),
		 path_of("img/v4.fli"));
	if (system(args) != 0 ||
	    (fd = open(path_of("img/v4.fli"), O_WRONLY)) < 0 ||
	    pwrite(fd, v4, 4, 8) != 4)
		BAIL("v4");
	close(fd);
	ret = fl_source_open(path_of("img/v4.fli"), &s);
	ok(ret == -EPROTONOSUPPORT &&
	   strstr(fl_last_error(), "version 4 not supported"),
	   "version 4 refused: %s", fl_last_error());
	unlink(path_of("img/v4.fli"));
	return 0;
}

/* gc: what the registry names (create --store registered each) */
static int case_gc(void)
{
	char args[1400];
	int ret;
	struct store_gc_info g;
	struct store *w = NULL;
	char id[IMAGE_ID_HEX];
	int lk;

	ret = store_gc(store, false, &g);
	ok(ret == 0 && g.images == 3 && g.deleted == 0 &&
	   count_objects(store) == n1 + 3,
	   "gc: one, two (two-again the same index) and diff "
	   "registered, nothing deleted (%llu images)",
	   (unsigned long long)g.images);
	ret = store_unregister(store, path_of("img/two.fli"), id);
	ok(ret == -EBUSY && strstr(fl_last_error(), "parent"),
	   "two.fli, diff.fli's parent, cannot be deleted: %s",
	   fl_last_error());
	ret = store_unregister(store, path_of("img/one.fli"), id);
	ok(ret == 0, "one.fli deleted from the registry%s%s",
	   ret ? ": " : "", ret ? fl_last_error() : "");
	ret = store_gc(store, true, &g);
	ok(ret == 0 && g.deleted == 2 && count_objects(store) == n1 + 3,
	   "gc --dry-run: 2 chunks only one.fli uses, none deleted "
	   "(%llu)", (unsigned long long)g.deleted);
	ret = store_gc(store, false, &g);
	ok(ret == 0 && g.images == 2 && g.deleted == 2 &&
	   g.kept == (uint64_t)n1 + 1 &&
	   count_objects(store) == n1 + 1,
	   "gc: the 2 chunks only one.fli used deleted, %llu kept",
	   (unsigned long long)g.kept);
	ok(reads_as(path_of("img/diff.fli"), d, SIZE) &&
	   reads_as(path_of("img/two.fli"), r2, SIZE),
	   "after gc the registered images read every byte");
	snprintf(args, sizeof(args), "verify %s", path_of("img/one.fli"));
	ok(run_cli(args) == 1 && cli_said("no such chunk"),
	   "one.fli, deleted, misses its own chunks (verify says so)");

	/* A create in progress holds the store: gc cannot take it. */
	ret = store_open(store, STORE_CREATE, NULL, &w);
	ret = ret ? ret : w->ops->lock(w, false);	/* as a create holds it */
	lk = open(path_of("store/" STORE_LOCK), O_RDWR);
	ok(ret == 0 && lk >= 0 && flock(lk, LOCK_EX | LOCK_NB) < 0 &&
	   errno == EWOULDBLOCK,
	   "while a create holds the store, gc's exclusive lock waits");
	store_close(w);
	ok(flock(lk, LOCK_EX | LOCK_NB) == 0,
	   "after it, gc takes the store");
	close(lk);

	snprintf(args, sizeof(args), "delete --store %s %s", store,
		 path_of("img/diff.fli"));
	ok(run_cli(args) == 0 && cli_said("deleted from the registry"),
	   "image delete (CLI) diff.fli");
	snprintf(args, sizeof(args), "gc --store %s", store);
	ok(run_cli(args) == 0 && cli_said("1 deleted") &&
	   reads_as(path_of("img/two.fli"), r2, SIZE),
	   "image gc (CLI) deletes the diff's chunk, two.fli whole");
	return 0;
}

/* A store read by URL is read-only: every write refused in one line. */
static int case_http_read_only(void)
{
	const char *url = "http://127.0.0.1:9/store";
	struct store_gc_info g;
	struct store *s = NULL;
	uint64_t size = 0;
	bool wrote = true;
	int ret = store_open(url, 0, NULL, &s);

	ok(ret == 0 && !strcmp(s->ops->kind, "http"),
	   "an http URL opens a store of the http kind%s%s", ret ? ": " : "",
	   ret ? fl_last_error() : "");
	if (ret)
		return 0;
	ok(s->ops->put(s, "chunks/00/x", "x", 1, 0, &size, &wrote) == -EROFS &&
	   !wrote && strstr(fl_last_error(), "read-only") &&
	   strstr(fl_last_error(), url) && !strchr(fl_last_error(), '\n'),
	   "its put refuses, one line naming it: %s", fl_last_error());
	ok(s->ops->del(s, "chunks/00/x", 0) == -EROFS &&
	   s->ops->lock(s, true) == -EROFS && s->ops->sync(s) == -EROFS &&
	   s->ops->put_index(s, "t", "i", "x", 1) == -EROFS,
	   "delete, lock, sync and an index's put refuse (-EROFS)");
	ok(s->ops->list(s, STORE_CHUNKS "/", NULL, NULL) == -EOPNOTSUPP,
	   "list: -EOPNOTSUPP");
	store_close(s);
	ret = store_gc(url, false, &g);
	ok(ret == -EROFS && strstr(fl_last_error(), "read-only") &&
	   g.deleted == 0,
	   "gc of a store read by URL refuses: %s", fl_last_error());
	return 0;
}

static const struct tap_case cases[] = {
	{ "first snapshot", case_first },
	{ "second snapshot", case_second },
	{ "diff image", case_diff },
	{ "damaged store", case_damage },
	{ "another version", case_version },
	{ "gc", case_gc },
	{ "a store read by URL", case_http_read_only },
};

int main(void)
{
	char args[128];

	snprintf(dir, sizeof(dir), "/tmp/fl-store-%d", (int)getpid());
	if (mkdir(dir, 0755) < 0 || mkdir(path_of("img"), 0755) < 0)
		BAIL("mkdir %s: %s", dir, strerror(errno));
	snprintf(store, sizeof(store), "%s/store", dir);
	TAP_RUN(cases);
	snprintf(args, sizeof(args), "rm -rf %s", dir);
	if (system(args) != 0)
		diag("could not remove %s", dir);
	return done_testing();
}
