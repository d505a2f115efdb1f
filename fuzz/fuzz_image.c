// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_image.c - the image reader (format/image.c): the input is an image
 * file, in a memfd opened by its /proc/self/fd path; its header and index
 * are validated, every stored chunk is read, and the image is verified.
 *
 * Decision: before writing the memfd the harness recomputes the index and
 * header checksums and, in a version 2 (diff) image, the content id
 * (where the input has the bytes), so that a mutation reaches the
 * geometry, index, parent-field, held-page map and chunk checks instead
 * of stopping at the first hash; chunk checksums are left alone.  A diff
 * image's map is walked as a layer asks it (image_holds, page by page, up
 * to the budget), and its parent name checked as the chain resolver
 * would.  A version 3 (chunk-store) image's checksums and id are
 * recomputed alike (its wider entries, its store path), and its chunks
 * are read from a store in memory whose objects are the input's own
 * bytes (from offset 0, as long as an entry says), so that the decoding
 * and SHA-256 check of store objects run too; its store path is checked
 * as the resolver would.  Chunks are read up to a
 * budget of decompressed bytes, so that a small input describing a large
 * image cannot take seconds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xxhash.h>

#include "author/create.h"
#include "format/image.h"
#include "format/layout.h"
#include "store/chunk_store.h"

#define BUDGET	(64u << 20)	/* decompressed bytes per input */

/* A store whose every object is the input's first bytes. */
struct mem_store {
	struct image_store base;
	const unsigned char *b;
	size_t size;
};

static int mem_get(struct image_store *s, const uint8_t *hash, void *buf,
		   size_t len)
{
	struct mem_store *m = (struct mem_store *)s;

	(void)hash;
	if (len > m->size)
		return -ENOENT;
	memcpy(buf, m->b, len);
	return 0;
}

static void mem_close(struct image_store *s)
{
	(void)s;
}

static const struct image_store_ops mem_ops = {
	.get = mem_get, .close = mem_close,
};

static void fix_checksums(unsigned char *b, size_t size)
{
	uint32_t v = get_le32(b + H_VERSION);
	bool v3 = v == IMAGE_VERSION_STORE && size >= IMAGE_HEADER3_SIZE;
	bool v2 = (v == IMAGE_VERSION_DIFF && size >= IMAGE_HEADER2_SIZE) || v3;
	size_t hsize = v3 ? IMAGE_HEADER3_SIZE : v2 ? IMAGE_HEADER2_SIZE :
		       IMAGE_HEADER_SIZE;
	size_t es = v3 ? IMAGE_ENTRY3_SIZE : IMAGE_ENTRY_SIZE;
	uint64_t n = get_le64(b + H_CHUNK_COUNT), map = 0;
	uint64_t ps = get_le32(b + H_PAGE_SIZE), total = get_le64(b + H_TOTAL_SIZE);
	uint64_t max = (size - hsize) / es;

	/* A diff's held-page map follows the entries (if the page size is). */
	if (v2 && (get_le32(b + H_FLAGS) & IMAGE_FLAG_DIFF) && ps >= 4096 &&
	    !(ps & (ps - 1)))
		map = (total / ps + (total % ps != 0) + 7) / 8;
	if (n <= max && map <= size - hsize - n * es) {
		size_t ilen = n * es + map;

		put_le64(b + H_INDEX_HASH, XXH64(b + hsize, ilen, 0));
		if (v2) {
			uint8_t id[IMAGE_ID_LEN];

			image_content_id(b, b + hsize, ilen, id);
			memcpy(b + (v3 ? H3_CONTENT_ID : H2_CONTENT_ID), id,
			       IMAGE_ID_LEN);
		}
	}
	if (v3)
		put_le64(b + H3_HEADER_HASH, XXH64(b, H3_HEADER_HASH, 0));
	else if (v2)
		put_le64(b + H2_HEADER_HASH, XXH64(b, H2_HEADER_HASH, 0));
	else
		put_le64(b + H_HEADER_HASH, XXH64(b, H_HEADER_HASH, 0));
}

static void report(void *arg, const char *msg)
{
	if (!*msg)	/* every bad chunk is named */
		abort();
	(void)arg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-image", MFD_CLOEXEC);
	unsigned char *b = malloc(size ? size : 1);
	uint64_t budget = BUDGET, nbad;
	struct image_info info;
	struct image *img;
	struct mem_store store = { .base.ops = &mem_ops };
	void *chunk;
	char path[64];
	uint64_t i;

	if (fd < 0 || !b)
		goto out;
	if (size)
		memcpy(b, data, size);
	if (size >= IMAGE_HEADER_SIZE)
		fix_checksums(b, size);
	if (write(fd, b, size) != (ssize_t)size)
		goto out;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (image_open(path, &img) < 0)
		goto out;
	image_tally(img, &info);
	if (info.pages_held > info.pages ||
	    (image_is_diff(&img->hdr) && !image_name_ok(img->hdr.parent_name)))
		abort();	/* the reader let a bad map or name through */
	if (image_in_store(&img->hdr)) {
		char where[600];

		if (!image_store_path_ok(img->hdr.store_path) ||
		    store_resolve(path, img->hdr.store_path, where,
				  sizeof(where)) < 0 ||
		    store_resolve("http://h/a/b.fli", img->hdr.store_path,
				  where, sizeof(where)) < 0 ||
		    strncmp(where, "http://h/", 9))
			abort();	/* a path the resolver cannot place */
		store.b = b;
		store.size = size;
		img->store = &store.base;
	}
	for (uint64_t p = 0, held = 0; p < info.pages && p < BUDGET / 4096;
	     p++) {
		held += image_holds(img, p);
		if (held > info.pages_held)
			abort();
	}
	chunk = malloc(img->hdr.chunk_size);
	for (i = 0; chunk && i < img->hdr.chunk_count; i++) {
		if (img->index[i].kind == IMAGE_ZERO)
			continue;
		if (image_chunk_len(img, i) > budget)
			break;
		budget -= image_chunk_len(img, i);
		image_read_chunk(img, i, chunk);
	}
	free(chunk);
	if (i == img->hdr.chunk_count && !image_in_store(&img->hdr))
		image_verify(path, report, NULL, &nbad);
	image_close(img);
out:
	free(b);
	if (fd >= 0)
		close(fd);
	return 0;
}
