// SPDX-License-Identifier: Apache-2.0
/*
 * image_encode.c - an image's header and index entries in their on-disk
 * form (docs/image-format.md, format/layout.h), the inverse of image.c's
 * parse; and the zstd levels a writer may use.
 *
 * Decision: the format encodes and parses only; writing a file, a store's
 * objects or an index into a bucket is author/create.c's.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <xxhash.h>
#include <zstd.h>

#include "format/image.h"
#include "format/layout.h"

/* The header into b (h->header_size bytes); ib: the index region. */
void image_encode_header(unsigned char *b, const struct image_header *h,
			 const unsigned char *ib, size_t ilen)
{
	bool v2 = h->version >= IMAGE_VERSION_DIFF;
	bool v3 = h->version == IMAGE_VERSION_STORE;
	size_t hh = v3 ? H3_HEADER_HASH : v2 ? H2_HEADER_HASH : H_HEADER_HASH;

	memset(b, 0, h->header_size);
	memcpy(b + H_MAGIC, IMAGE_MAGIC, IMAGE_MAGIC_LEN);
	put_le32(b + H_VERSION, h->version);
	put_le32(b + H_FLAGS, h->flags);
	put_le32(b + H_PAGE_SIZE, h->page_size);
	put_le32(b + H_CHUNK_SIZE, h->chunk_size);
	put_le64(b + H_TOTAL_SIZE, h->total_size);
	put_le64(b + H_CHUNK_COUNT, h->chunk_count);
	put_le64(b + H_INDEX_OFFSET, h->index_offset);
	put_le64(b + H_DATA_END, h->data_end);
	put_le64(b + H_INDEX_HASH, h->index_hash);
	put_le32(b + H_LEVEL, h->level);
	if (v2) {
		uint8_t id[IMAGE_ID_LEN];

		put_le64(b + H2_PARENT_SIZE, h->parent_size);
		memcpy(b + H2_PARENT_ID, h->parent_id, IMAGE_ID_LEN);
		memcpy(b + H2_PARENT_NAME, h->parent_name,
		       strlen(h->parent_name));
		if (v3)
			memcpy(b + H3_STORE_PATH, h->store_path,
			       strlen(h->store_path));
		image_content_id(b, ib, ilen, id);
		memcpy(b + (v3 ? H3_CONTENT_ID : H2_CONTENT_ID), id,
		       IMAGE_ID_LEN);
	}
	put_le64(b + hh, XXH64(b, hh, 0));
}

void image_encode_entry(unsigned char *b, const struct image_entry *e,
			bool v3)
{
	if (v3) {
		memset(b, 0, IMAGE_ENTRY3_SIZE);
		memcpy(b + E3_HASH, e->sha, IMAGE_HASH_LEN);
		put_le32(b + E3_STORED_LEN, e->stored_len);
		b[E3_KIND] = e->kind;
		return;
	}
	memset(b, 0, IMAGE_ENTRY_SIZE);
	put_le64(b + E_OFFSET, e->offset);
	put_le32(b + E_STORED_LEN, e->stored_len);
	b[E_KIND] = e->kind;
	put_le64(b + E_HASH, e->hash);
}

int image_check_level(long level)
{
	if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel())
		return -EINVAL;
	return 0;
}
