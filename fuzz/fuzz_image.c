// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_image.c - the image reader (format/image.c): the input is an image
 * file, in a memfd opened by its /proc/self/fd path; its header and index
 * are validated, every stored chunk is read, and the image is verified.
 *
 * Decision: before writing the memfd the harness recomputes the index and
 * header checksums (where the input has the bytes), so that a mutation
 * reaches the geometry, index and chunk checks instead of stopping at the
 * first XXH64; chunk checksums are left alone.  Chunks are read up to a
 * budget of decompressed bytes, so that a small input describing a large
 * image cannot take seconds.
 */
#define _GNU_SOURCE
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
	uint64_t n = get_le64(b + H_CHUNK_COUNT);

	if (n <= (size - IMAGE_HEADER_SIZE) / IMAGE_ENTRY_SIZE)
		put_le64(b + H_INDEX_HASH, XXH64(b + IMAGE_HEADER_SIZE,
						 n * IMAGE_ENTRY_SIZE, 0));
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
