/* SPDX-License-Identifier: Apache-2.0 */
/*
 * create.h - `faultline image create` and `verify` by path: writing an
 * image of a raw memory file (author/create.c), into a chunk store too,
 * and checking every chunk of one with its store attached.
 */
#ifndef FAULTLINE_AUTHOR_CREATE_H
#define FAULTLINE_AUTHOR_CREATE_H

#include <stdint.h>

#include "format/image.h"

struct image_create_opts {
	uint32_t chunk_size;	/* 0: IMAGE_DEFAULT_CHUNK */
	int level;		/* 0: IMAGE_DEFAULT_LEVEL */
	unsigned int threads;	/* compressors; 0: one per CPU, <= 8 */
	/*
	 * A diff image: raw_path is a sparse diff over the image at parent
	 * (its holes: pages not written); the image holds only the diff's
	 * data pages and names parent by its file name and content id.
	 */
	const char *parent;
	/*
	 * A chunk-store image (version 3): each chunk is written once into
	 * the store (src/store/chunk_store.c), the image is its index.
	 */
	const char *store;
	/* Called now and then with chunks done of all (a progress bar). */
	void (*progress)(void *arg, uint64_t done, uint64_t all);
	void *progress_arg;
};

/*
 * Write an image of the raw file at raw_path to image_path (via a temporary
 * file in the same directory, renamed at the end).  Holes are skipped with
 * SEEK_DATA without being read.  info, if not NULL, describes the result.
 */
int image_create(const char *raw_path, const char *image_path,
		 const struct image_create_opts *opts, struct image_info *info);

/*
 * Open the image at path (a version 3 one with the directory store it
 * names) and read and check every chunk.  report(), if given, is called with a
 * one-line message for each bad chunk.  Returns 0 if all are good,
 * -EBADMSG if any is bad (*nbad says how many), other -errno on failure to
 * open.
 */
int image_verify(const char *path,
		 void (*report)(void *arg, const char *msg), void *arg,
		 uint64_t *nbad);

#endif
