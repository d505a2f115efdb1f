// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_image_store.c - `faultline image register|delete|gc --store STORE`:
 * the command-line face of a chunk store's registry
 * (src/author/registry.c) and of its gc (src/author/gc.c).
 *
 * Decision: gc takes no list of images.  It keeps what the store's
 * registry names, so a store shared by many images can never lose the
 * chunks of one the command line left out; register and delete are the
 * only ways to change what it keeps.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "faultline.h"
#include "cli.h"
#include "store/chunk_store.h"
#include "author/gc.h"
#include "format/image.h"
#include "author/registry.h"
#include "util/error.h"

/* The arguments of register, delete and gc. */
struct store_args {
	const char *store;
	bool dry_run;
	const char **pos;	/* the rest, in order */
	int npos;
};

/* A usage error: one line and `faultline help image`; CLI_USAGE. */
static int usage(const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return cli_missing("image", what);
}

/* --store and (gc) --dry-run, and the rest: 0 or CLI_USAGE said. */
static int parse(const char *sub, int argc, char **argv, struct store_args *a)
{
	a->pos = calloc((size_t)argc + 1, sizeof(*a->pos));
	if (!a->pos)
		return CLI_FAILED;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--store") && i + 1 < argc) {
			a->store = argv[++i];
		} else if (!strcmp(argv[i], "--dry-run") &&
			   !strcmp(sub, "gc")) {
			a->dry_run = true;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return usage("%s: unknown option '%s'", sub, argv[i]);
		} else {
			a->pos[a->npos++] = argv[i];
		}
	}
	if (!a->store) {
		return usage("%s needs --store DIR or --store "
			     "s3://BUCKET/PREFIX", sub);
	}
	if (!strncasecmp(a->store, "http://", 7) ||
	    !strncasecmp(a->store, "https://", 8)) {
		return usage("%s --store %s: a store over http(s) is "
			     "read-only; give its directory or s3:// store", sub,
			     a->store);
	}
	return 0;
}

static void said(void *arg, const char *image, const char *id, bool already,
		 bool parent)
{
	(void)arg;
	printf("%s: %s %s%s\n", image, already ? "registered already," :
	       "registered,", id, parent ? " (a parent)" : "");
}

static int do_register(const struct store_args *a)
{
	int ret;

	if (!a->npos) {
		return usage("register needs the images to register "
			     "(IMAGE...)");
	}
	ret = store_register(a->store, a->pos, a->npos, said, NULL);
	if (ret < 0) {
		fprintf(stderr, "faultline image: register: %s\n",
			fl_last_error());
		return CLI_FAILED;
	}
	printf("%s: its registry is on: gc keeps the chunks of registered "
	       "images only\n", a->store);
	return 0;
}

static int do_delete(const struct store_args *a)
{
	char id[IMAGE_ID_HEX];
	int ret;

	if (a->npos != 1) {
		return usage("delete takes one image, by its index or its "
			     "content id (IMAGE|ID)");
	}
	ret = store_unregister(a->store, a->pos[0], id);
	if (ret < 0) {
		fprintf(stderr, "faultline image: delete: %s\n",
			fl_last_error());
		return CLI_FAILED;
	}
	printf("%s: %s deleted from the registry; its chunks go at the next "
	       "gc\n", a->store, id);
	return 0;
}

static int do_gc(const struct store_args *a)
{
	struct store_gc_info in;
	int ret;

	if (a->npos) {
		return usage("gc takes no images ('%s'): it keeps the chunks "
			     "of every image registered in the store (image "
			     "register, image delete)", a->pos[0]);
	}
	ret = store_gc(a->store, a->dry_run, &in);
	if (in.links)
		fprintf(stderr, "faultline image: gc: %s/%s: a symbolic link: "
			"skipped, not followed (%llu in the store)\n", a->store,
			in.link, (unsigned long long)in.links);
	if (ret < 0 && (!in.deleted || a->dry_run)) {
		fprintf(stderr, "faultline image: gc: %s (nothing deleted)\n",
			fl_last_error());
		return CLI_FAILED;
	}
	if (ret < 0) {
		fprintf(stderr, "faultline image: gc: %s (stopped after "
			"deleting %llu chunks no registered image "
			"references)\n", fl_last_error(),
			(unsigned long long)in.deleted);
		return CLI_FAILED;
	}
	printf("%s: %llu image%s registered, %llu chunks kept (%llu bytes), "
	       "%llu %s (%llu bytes)\n", a->store,
	       (unsigned long long)in.images, in.images == 1 ? "" : "s",
	       (unsigned long long)in.kept, (unsigned long long)in.kept_bytes,
	       (unsigned long long)in.deleted,
	       a->dry_run ? "would be deleted" : "deleted",
	       (unsigned long long)in.deleted_bytes);
	return 0;
}

int cmd_image_store(const char *sub, int argc, char **argv)
{
	struct store_args a = { 0 };
	int ret = parse(sub, argc, argv, &a);

	if (!ret)
		ret = !strcmp(sub, "gc") ? do_gc(&a) :
		      !strcmp(sub, "register") ? do_register(&a) :
		      do_delete(&a);
	free(a.pos);
	return ret;
}

void image_store_note(const char *store)
{
	if (store_registry_on(store) == 0)
		printf("note:        %s has chunks from before its registry: "
		       "register every image it keeps (faultline image "
		       "register --store %s IMAGE...) before gc\n", store,
		       store);
}
