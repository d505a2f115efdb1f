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
 * would.  Chunks are read up to a
 * budget of decompressed bytes, so that a small input describing a large
 * image cannot take seconds.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xxhash.h>

#include "format/image.h"
#include "format/layout.h"

#define BUDGET	(64u << 20)	/* decompressed bytes per input */

static void fix_checksums(unsigned char *b, size_t size)
{
	bool v2 = get_le32(b + H_VERSION) == IMAGE_VERSION_DIFF &&
		  size >= IMAGE_HEADER2_SIZE;
	size_t hsize = v2 ? IMAGE_HEADER2_SIZE : IMAGE_HEADER_SIZE;
	uint64_t n = get_le64(b + H_CHUNK_COUNT), map = 0;
	uint64_t ps = get_le32(b + H_PAGE_SIZE), total = get_le64(b + H_TOTAL_SIZE);
	uint64_t max = (size - hsize) / IMAGE_ENTRY_SIZE;

	/* A diff's held-page map follows the entries (if the page size is). */
	if (v2 && (get_le32(b + H_FLAGS) & IMAGE_FLAG_DIFF) && ps >= 4096 &&
	    !(ps & (ps - 1)))
		map = (total / ps + (total % ps != 0) + 7) / 8;
	if (n <= max && map <= size - hsize - n * IMAGE_ENTRY_SIZE) {
		size_t ilen = n * IMAGE_ENTRY_SIZE + map;

		put_le64(b + H_INDEX_HASH, XXH64(b + hsize, ilen, 0));
		if (v2) {
			uint8_t id[IMAGE_ID_LEN];

			image_content_id(b, b + hsize, ilen, id);
			memcpy(b + H2_CONTENT_ID, id, IMAGE_ID_LEN);
		}
	}
	if (v2)
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
	if (i == img->hdr.chunk_count)
		image_verify(path, report, NULL, &nbad);
	image_close(img);
out:
	free(b);
	if (fd >= 0)
		close(fd);
	return 0;
}
