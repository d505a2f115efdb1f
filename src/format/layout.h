/* SPDX-License-Identifier: Apache-2.0 */
/*
 * layout.h - the image's on-disk layout (docs/image-format.md): field
 * offsets and little-endian access, shared by the reader (image.c) and the
 * writer (image_encode.c, for author/create.c).
 */
#ifndef FAULTLINE_FORMAT_LAYOUT_H
#define FAULTLINE_FORMAT_LAYOUT_H

#include <stdint.h>

/* ---- little-endian helpers ---------------------------------------------- */

static inline void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline void put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t get_le32(const unsigned char *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static inline uint64_t get_le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Header field offsets (docs/image-format.md, "Header"). */
#define H_MAGIC		0
#define H_VERSION	8
#define H_FLAGS		12
#define H_PAGE_SIZE	16
#define H_CHUNK_SIZE	20
#define H_TOTAL_SIZE	24
#define H_CHUNK_COUNT	32
#define H_INDEX_OFFSET	40
#define H_DATA_END	48
#define H_INDEX_HASH	56
#define H_LEVEL		64
#define H_RESERVED	68
#define H_HEADER_HASH	72	/* version 1; version 2 adds the fields below */

/* Version 2 (a diff image: "Version 2" in docs/image-format.md). */
#define H2_PARENT_SIZE	72
#define H2_PARENT_ID	80
#define H2_PARENT_NAME	96
#define H2_CONTENT_ID	352
#define H2_HEADER_HASH	368

/* Version 3 (a chunk-store index: "Chunk store" in docs/image-format.md):
 * version 2's fields up to its content id, then the store's path. */
#define H3_STORE_PATH	352
#define H3_CONTENT_ID	608
#define H3_HEADER_HASH	624

/* Index entry field offsets ("Chunk index"). */
#define E_OFFSET	0
#define E_STORED_LEN	8
#define E_KIND		12
#define E_RESERVED	13
#define E_HASH		16

/* Version 3 index entry field offsets ("Chunk store"). */
#define E3_HASH		0	/* SHA-256 of the uncompressed chunk */
#define E3_STORED_LEN	32
#define E3_KIND		36
#define E3_RESERVED	37

#endif
