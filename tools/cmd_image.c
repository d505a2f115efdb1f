// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_image.c - `faultline image create|inspect|verify|unpack`: the
 * command-line face of src/image.c (register, delete and gc of a chunk
 * store: cmd_image_store.c).
 *
 * Decision: this file only parses arguments and prints; creating, reading
 * and checking images lives in the library (src/image.c) so tests and other
 * front ends use the same code.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "faultline.h"
#include "cli.h"
#include "format/criu.h"
#include "author/create.h"
#include "format/image.h"
#include "store/chunk_store.h"
#include "store/store.h"
#include "util/clock.h"
#include "source/layers.h"
#include "source/source.h"
#include "util/error.h"
#include "util/io.h"
#include "util/size.h"
#include "util/zero.h"

/* What `faultline image` does, in the order its usage gives them. */
#define IMAGE_SUBS	"create, inspect, verify, unpack, gc, register, delete"

static void image_usage(FILE *f)
{
	fprintf(f,
		"usage: faultline image create RAW IMAGE [--store DIR] [--chunk SIZE] [--level N]\n"
		"       faultline image create DIFF IMAGE --parent PARENT [--store DIR] [--chunk SIZE] [--level N]\n"
		"       faultline image create RAW s3://BUCKET/PREFIX/images/NAME --store s3://BUCKET/PREFIX [--parent PARENT] ...\n"
		"       faultline image create --criu DIR IMAGE [--chunk SIZE] [--level N]\n"
		"       faultline image inspect IMAGE\n"
		"       faultline image verify IMAGE\n"
		"       faultline image unpack IMAGE RAW\n"
		"       faultline image register --store DIR|s3://BUCKET/PREFIX IMAGE...\n"
		"       faultline image delete --store DIR|s3://BUCKET/PREFIX IMAGE|ID\n"
		"       faultline image gc --store DIR|s3://BUCKET/PREFIX [--dry-run]\n"
		"SIZE is a power of two from 4K to 16M (default 512K); "
		"N is a zstd level (default %d).\n"
		"--criu: the pages of a CRIU dump, its pages files end to end in\n"
		"the order of pstree.img (`faultline lazy-pages --pages IMAGE`);\n"
		"they are written to a file beside IMAGE first.\n"
		"--parent: DIFF is a diff snapshot over the image PARENT (a sparse\n"
		"file, its holes the pages not written); IMAGE holds only DIFF's\n"
		"pages and names PARENT by file name and content id. Serving IMAGE\n"
		"finds PARENT beside it (same directory or URL prefix), and its\n"
		"parents so, or takes the chain as --layer's.\n"
		"--store: a chunk store; each distinct chunk is written once into\n"
		"DIR/chunks/ (named by its SHA-256), IMAGE is an index of them and\n"
		"finds DIR from its own directory or URL prefix; what the store\n"
		"had already is not written again.\n"
		"--store s3://BUCKET/PREFIX: the store in a bucket (credentials\n"
		"from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION...):\n"
		"each chunk the bucket lacks (a signed HEAD) is uploaded (a signed\n"
		"PUT) under PREFIX/chunks/, then the index to IMAGE, an s3:// key\n"
		"in that bucket (e.g. PREFIX/images/NAME); --parent may be s3:// too.\n"
		"A store keeps a registry of its images (DIR/registry/ID, a copy\n"
		"of each index by content id): create --store registers IMAGE\n"
		"and its parents in the store.\n"
		"register: add IMAGEs (and their parents in the store) to the\n"
		"registry, e.g. those of a store made before it had one.\n"
		"delete: take an image out of the registry, by its index or its\n"
		"content id (`image inspect`); its chunks go at the next gc. An\n"
		"index file removed by hand changes nothing until then.\n"
		"gc: delete the chunks of the store that no registered image\n"
		"references (it takes no IMAGE); it refuses a store with chunks\n"
		"from before its registry until its images are registered, and\n"
		"waits for a create, register or delete writing into DIR. In a\n"
		"bucket it refuses while one writes there (its lock,\n"
		"PREFIX/locks/create-*), and they wait for it.\n"
		"inspect: the header, the content id, a diff's parent and its\n"
		"chain as serving would resolve it.  inspect and verify take a\n"
		"file or a URL (http(s)://, s3://: its chunk store too).\n"
		"unpack: the raw memory again, into RAW (a new file), for what\n"
		"reads only raw memory (send, vmm); of a diff, its chain merged.\n",
		IMAGE_DEFAULT_LEVEL);
}

static void print_info(const char *path, const struct image_info *in)
{
	static const char *const names[IMAGE_NKINDS] = { "zero", "raw", "zstd" };
	const struct image_header *h = &in->hdr;

	char id[IMAGE_ID_HEX];

	image_id_hex(h->id, id);
	printf("image:       %s\n", path);
	printf("version:     %u\n", h->version);
	printf("id:          %s\n", id);
	if (image_is_diff(h)) {
		image_id_hex(h->parent_id, id);
		printf("parent:      %s (%s)\n", id, h->parent_name);
	} else {
		printf("parent:      none\n");
	}
	printf("page size:   %u\n", h->page_size);
	printf("chunk size:  %u\n", h->chunk_size);
	printf("total size:  %llu\n", (unsigned long long)h->total_size);
	printf("pages held:  %llu of %llu\n",
	       (unsigned long long)in->pages_held,
	       (unsigned long long)in->pages);
	printf("chunks:      %llu\n", (unsigned long long)h->chunk_count);
	for (int k = 0; k < IMAGE_NKINDS; k++)
		printf("  %-5s      %llu chunks, %llu bytes stored for %llu\n",
		       names[k], (unsigned long long)in->count[k],
		       (unsigned long long)in->stored[k],
		       (unsigned long long)in->raw_bytes[k]);
	printf("zstd level:  %d\n", (int32_t)h->level);	/* may be < 0 */
	printf("file size:   %llu\n", (unsigned long long)in->file_size);
	if (image_in_store(h)) {
		uint64_t stored = in->stored[IMAGE_RAW] + in->stored[IMAGE_ZSTD];

		printf("store:       %s (from the image's directory)\n",
		       h->store_path);
		printf("ratio:       %.2f (of the chunks it references)\n",
		       stored ? (double)h->total_size / (double)stored : 0.0);
		return;
	}
	printf("ratio:       %.2f\n", in->file_size ?
	       (double)h->total_size / (double)in->file_size : 0.0);
}

/*
 * A CRIU dump's pages files end to end (what `faultline lazy-pages`
 * serves) into a new file beside image: its path (malloc'd), or NULL
 * with the reason said.
 */
static char *criu_raw(const char *dir, const char *image)
{
	struct criu_set set;
	char *raw = NULL;
	int fd = -1, ret = criu_load(dir, &set);
	bool loaded = ret == 0;

	if (ret == 0 && set.remote)
		ret = fl_err(-EINVAL, "%s: the dump left its lazy pages on the "
			     "dumping host (criu dump --lazy-pages): there are "
			     "none here to pack", dir);
	if (ret == 0 && asprintf(&raw, "%s.criu-pages.XXXXXX", image) < 0)
		raw = NULL;
	if (ret == 0 && raw && (fd = mkstemp(raw)) < 0)
		ret = fl_err(-errno, "%s: %m", raw);
	for (int i = 0; ret == 0 && raw && i < set.ntasks; i++) {
		char path[4096];
		int in;

		if (!set.tasks[i].pages_size)
			continue;
		snprintf(path, sizeof(path), "%s/pages-%u.img", dir,
			 set.tasks[i].pages_id);
		in = open(path, O_RDONLY | O_CLOEXEC);
		if (in < 0) {
			ret = fl_err(-errno, "%s: %m", path);
			break;
		}
		for (uint64_t left = set.tasks[i].pages_size; left && !ret;) {
			ssize_t n = copy_file_range(in, NULL, fd, NULL, left, 0);

			if (n <= 0)
				ret = fl_err(n < 0 ? -errno : -EIO, "%s: %s", path,
					     n < 0 ? strerror(errno) :
					     "shorter than when read");
			else
				left -= (uint64_t)n;
		}
		close(in);
	}
	if (loaded)
		criu_free(&set);
	if (fd >= 0)
		close(fd);
	if (ret < 0 || !raw) {
		fprintf(stderr, "faultline image: %s\n", raw ? fl_last_error() :
			"out of memory");
		if (raw && fd >= 0)
			unlink(raw);
		free(raw);
		return NULL;
	}
	return raw;
}

/* Say so if parent is not beside image, where serving looks for it. */
static void note_parent_dir(const char *image, const char *parent)
{
	char *a = realpath(image, NULL), *b = realpath(parent, NULL);
	char *sa = a ? strrchr(a, '/') : NULL, *sb = b ? strrchr(b, '/') : NULL;

	if (sa && sb && (sa - a != sb - b || strncmp(a, b, (size_t)(sa - a))))
		printf("note:        the parent is not in the image's "
		       "directory; put it there, or serve the chain with "
		       "--layer\n");
	free(a);
	free(b);
}

/*
 * A diff's chain as serving resolves it, the image first: one line each.
 * 0, or -errno with the reason said.
 */
static int print_chain(const char *path)
{
	struct fl_source *s;
	int ret = fl_source_open(path, &s);

	if (ret < 0) {
		printf("chain:       not resolved (below)\n");
		return ret;
	}
	printf("chain:       %u image%s, the image first\n",
	       source_layers_count(s), source_layers_count(s) == 1 ? "" : "s");
	for (unsigned int i = source_layers_count(s); i-- > 0;) {
		struct fl_source *x = source_layers_at(s, i);
		const struct image *img = source_image(x);
		char id[IMAGE_ID_HEX] = "(not an image)";

		if (img)
			image_id_hex(img->hdr.id, id);
		printf("  %s  %s\n", id, x->desc);
	}
	fl_source_put(s);
	return 0;
}

/* A progress bar on stderr, when it is a terminal. */
static void progress(void *arg, uint64_t done, uint64_t all)
{
	double *last = arg, now = now_s();
	int width = 40, fill;

	if (done < all && now - *last < 0.1)
		return;
	*last = now;
	fill = all ? (int)(done * (uint64_t)width / all) : width;
	fprintf(stderr, "\r[%.*s%*s] %llu/%llu chunks", fill,
		"########################################", width - fill, "",
		(unsigned long long)done, (unsigned long long)all);
	if (done >= all)
		fputc('\n', stderr);
}

/* What `image create` was told. */
struct create_args {
	struct image_create_opts o;
	const char *pos[2], *criu;	/* RAW IMAGE (or IMAGE), --criu DIR */
	int npos;
};

/* --chunk SIZE or --level N (opt), its value v: 0, or CLI_USAGE. */
static int create_value(struct create_args *a, const char *opt,
			const char *v)
{
	if (opt[2] == 'c') {
		uint64_t cs;

		if (parse_size(v, &cs) || image_check_chunk(cs)) {
			fprintf(stderr,
				"faultline image: --chunk %s: must be a power of two from 4K to 16M\n",
				v);
			return CLI_USAGE;
		}
		a->o.chunk_size = (uint32_t)cs;
	} else {
		char *end;
		long l = strtol(v, &end, 10);

		if (!*v || *end || l == 0 || image_check_level(l)) {
			fprintf(stderr, "faultline image: --level %s: not a "
				"zstd level (%d to %d, not 0)\n", v,
				ZSTD_minCLevel(), ZSTD_maxCLevel());
			return CLI_USAGE;
		}
		a->o.level = (int)l;
	}
	return 0;
}

/* The arguments into a, each checked as it comes: 0, or CLI_USAGE. */
static int create_parse(int argc, char **argv, struct create_args *a)
{
	int ret;

	for (int i = 0; i < argc; i++) {
		const char *s = argv[i];

		if (!strcmp(s, "--criu") && i + 1 < argc) {
			a->criu = argv[++i];
		} else if (!strcmp(s, "--parent") && i + 1 < argc) {
			a->o.parent = argv[++i];
		} else if (!strcmp(s, "--store") && i + 1 < argc) {
			a->o.store = argv[++i];
		} else if (!strcmp(s, "--chunk") || !strcmp(s, "--level")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "faultline image: option '%s' "
					"needs a value; see `faultline help "
					"image`\n", s);
				return CLI_USAGE;
			}
			if ((ret = create_value(a, s, argv[++i])))
				return ret;
		} else if (s[0] == '-' && s[1]) {
			fprintf(stderr, "faultline image: unknown option '%s' "
				"for create; see `faultline help image`\n", s);
			return CLI_USAGE;
		} else if (a->npos < 2) {
			a->pos[a->npos++] = s;
		} else {
			fprintf(stderr, "faultline image: unexpected argument '%s'\n",
				s);
			return CLI_USAGE;
		}
	}
	return 0;
}

/* The arguments together: their count, and which go with which. */
static int create_check(const struct create_args *a)
{
	const char *store = a->o.store, *image;

	if (a->npos != (a->criu ? 1 : 2))
		return cli_missing("image", a->criu ? "create --criu DIR takes "
				   "one IMAGE" : "create takes RAW IMAGE");
	image = a->pos[a->npos - 1];
	if (a->criu && a->o.parent) {
		fprintf(stderr, "faultline image: --criu and --parent: a CRIU "
			"dump is not a diff snapshot\n");
		return CLI_USAGE;
	}
	if (store && (!strncasecmp(store, "http://", 7) ||
		      !strncasecmp(store, "https://", 8))) {
		fprintf(stderr, "faultline image: --store %s: create writes "
			"into a directory or s3://BUCKET/PREFIX (serve that "
			"directory over http(s) to read the store by URL)\n",
			store);
		return CLI_USAGE;
	}
	if (!store && store_is_s3(image)) {
		fprintf(stderr, "faultline image: %s: an image in a bucket is "
			"the index of a chunk store there: give --store "
			"s3://BUCKET/PREFIX\n", image);
		return CLI_USAGE;
	}
	if (store && store_is_s3(store) != store_is_s3(image)) {
		fprintf(stderr, "faultline image: --store %s: %s\n", store,
			store_is_s3(store) ? "the image goes into the bucket "
			"too: IMAGE as s3://BUCKET/PREFIX/images/NAME (its "
			"index, put after its chunks)" : "an s3:// image needs "
			"its store in its bucket: --store s3://BUCKET/PREFIX");
		return CLI_USAGE;
	}
	if (a->criu && store) {
		fprintf(stderr, "faultline image: --criu and --store: not "
			"supported together\n");
		return CLI_USAGE;
	}
	return 0;
}

/* What create made: the image, its parent's place, the store, the time. */
static void create_report(const struct create_args *a, const char *image,
			  const struct image_info *info, double t)
{
	print_info(image, info);
	if (a->o.parent && !store_is_s3(image))
		note_parent_dir(image, a->o.parent);
	if (a->o.store)
		image_store_note(a->o.store);
	if (a->o.store)
		printf("new chunks:  %llu of %llu stored, %llu bytes %s %s\n",
		       (unsigned long long)info->new_chunks,
		       (unsigned long long)(info->count[IMAGE_RAW] +
					    info->count[IMAGE_ZSTD]),
		       (unsigned long long)info->new_bytes,
		       store_is_s3(a->o.store) ? "uploaded to" :
		       "written into", a->o.store);
	printf("created in:  %.3f s (%.0f MiB/s)\n", t,
	       t > 0 ? info->hdr.total_size / t / (1 << 20) : 0.0);
}

static int do_create(int argc, char **argv)
{
	struct create_args a = { .o = { 0 } };
	struct image_info info;
	const char *from, *to;
	char *raw = NULL;
	double t, last = 0;
	int ret;

	if ((ret = create_parse(argc, argv, &a)) || (ret = create_check(&a)))
		return ret;
	if (a.o.store && isatty(STDERR_FILENO)) {
		a.o.progress = progress;
		a.o.progress_arg = &last;
	}
	t = now_s();
	from = a.pos[0];
	to = a.criu ? a.pos[0] : a.pos[1];
	if (a.criu) {
		from = raw = criu_raw(a.criu, to);
		if (!raw)
			return CLI_FAILED;
	}
	ret = image_create(from, to, &a.o, &info);
	if (raw) {
		unlink(raw);
		free(raw);
	}
	if (ret < 0) {
		fprintf(stderr, "faultline image: %s\n", fl_last_error());
		return CLI_FAILED;
	}
	create_report(&a, to, &info, now_s() - t);
	return 0;
}

/* The source's bytes into fd, zero blocks left as holes: 0 or -errno. */
static int copy_out(struct fl_source *src, int fd)
{
	const size_t blk = 2u << 20;
	uint64_t size = fl_source_size(src);
	char *buf = malloc(blk);
	int ret = buf ? 0 : -ENOMEM;

	for (uint64_t off = 0; off < size && ret == 0; off += blk) {
		size_t n = size - off < blk ? (size_t)(size - off) : blk;

		ret = src->ops->read(src, buf, n, off);
		if (ret == 0 && !is_zero(buf, n))
			ret = pwrite_full(fd, buf, n, off);
	}
	if (ret == 0 && ftruncate(fd, (off_t)size) < 0)
		ret = -errno;
	free(buf);
	return ret;
}

/* `image unpack IMAGE RAW`: RAW must not exist yet. */
static int do_unpack(const char *image, const char *raw)
{
	struct fl_source *src;
	uint64_t size;
	int fd, ret;

	if (!strstr(image, "://") && !image_has_magic(image)) {
		fprintf(stderr, "faultline image: %s: not a faultline image\n",
			image);
		return CLI_FAILED;
	}
	ret = fl_source_open(image, &src);
	if (ret < 0)
		return cli_exit("image", ret);
	fd = open(raw, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		fl_source_put(src);
		return cli_cannot("image", "unpack into", raw, strerror(-ret));
	}
	ret = copy_out(src, fd);
	size = fl_source_size(src);
	if (close(fd) < 0 && ret == 0)
		ret = -errno;
	fl_source_put(src);
	if (ret < 0) {
		unlink(raw);
		fprintf(stderr, "faultline image: unpack %s: %s\n", image,
			*fl_last_error() ? fl_last_error() : strerror(-ret));
		return CLI_FAILED;
	}
	printf("%s: unpacked into %s (%s)\n", image, raw, size_str(size).s);
	return 0;
}

static void report_bad(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "faultline image: %s\n", msg);
}

/*
 * An image behind a URL (http(s)://, s3://) as serving reads it: its
 * source, and the image on top of it.  0 or -errno with the reason.
 */
static int open_remote(const char *spec, struct fl_source **s,
		       struct image **img)
{
	int ret = fl_source_open(spec, s);

	if (ret < 0)
		return ret;
	*img = (struct image *)source_image(*s);
	if (*img)
		return 0;
	fl_source_put(*s);
	*s = NULL;
	return fl_err(-EINVAL, "%s: not a faultline image", spec);
}

/* `image inspect IMAGE`: a file, or an image behind a URL. */
static int do_inspect(const char *spec)
{
	struct image_info info;
	struct fl_source *s = NULL;
	struct image *img;
	int ret;

	if (strstr(spec, "://")) {
		ret = open_remote(spec, &s, &img);
		if (ret == 0)
			image_tally(img, &info);
		fl_source_put(s);
	} else {
		ret = image_inspect(spec, &info);
	}
	if (ret == 0) {
		print_info(spec, &info);
		if (image_is_diff(&info.hdr))
			ret = print_chain(spec);
	}
	if (ret < 0)
		fprintf(stderr, "faultline image: %s\n", fl_last_error());
	return ret < 0 ? CLI_FAILED : 0;
}

/* `image verify IMAGE`: every chunk read and checked. */
static int do_verify(const char *spec)
{
	struct fl_source *s;
	struct image *img;
	uint64_t nbad;
	int ret;

	if (strstr(spec, "://")) {
		ret = open_remote(spec, &s, &img);
		if (ret == 0) {
			ret = image_verify_chunks(img, spec, report_bad, NULL,
						  &nbad);
			fl_source_put(s);
		}
	} else {
		ret = image_verify(spec, report_bad, NULL, &nbad);
	}
	if (ret < 0) {
		fprintf(stderr, "faultline image: %s\n", fl_last_error());
		return CLI_FAILED;
	}
	printf("%s: all chunks good\n", spec);
	return 0;
}

int cmd_image(int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : NULL;

	if (!sub)
		return cli_missing("image", "a subcommand is required ("
				   IMAGE_SUBS ")");
	if (!strcmp(sub, "-h") || !strcmp(sub, "--help")) {
		image_usage(stdout);
		return 0;
	}
	if (!strcmp(sub, "create"))
		return do_create(argc - 2, argv + 2);
	if (!strcmp(sub, "gc") || !strcmp(sub, "register") ||
	    !strcmp(sub, "delete"))
		return cmd_image_store(sub, argc - 2, argv + 2);
	if (!strcmp(sub, "unpack") && argc == 4)
		return do_unpack(argv[2], argv[3]);
	if (strcmp(sub, "inspect") && strcmp(sub, "verify") &&
	    strcmp(sub, "unpack")) {
		fprintf(stderr, "faultline image: '%s': not a subcommand ("
			IMAGE_SUBS "); see `faultline help image`\n", sub);
		return CLI_USAGE;
	}
	if (argc != (strcmp(sub, "unpack") ? 3 : 4)) {
		fprintf(stderr, "faultline image: %s takes %s; see `faultline "
			"help image`\n", sub, strcmp(sub, "unpack") ? "one IMAGE" :
			"IMAGE RAW");
		return CLI_USAGE;
	}
	if (!strcmp(sub, "inspect"))
		return do_inspect(argv[2]);
	return do_verify(argv[2]);
}
