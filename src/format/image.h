/* SPDX-License-Identifier: Apache-2.0 */
/*
 * image.h - the compressed chunked snapshot image (docs/image-format.md):
 * on-disk layout constants, a reader shared by the image source and the
 * verifier, and inspect / verify of an image open; create and the
 * verifier by path are author/create.h's.
 */
#ifndef FAULTLINE_IMAGE_H
#define FAULTLINE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- on-disk format (all fields little-endian) -------------------------- */

#define IMAGE_MAGIC		"FLTIMAGE"	/* 8 bytes, no terminator */
#define IMAGE_MAGIC_LEN		8
#define IMAGE_VERSION		1	/* an image with no parent */
#define IMAGE_VERSION_DIFF	2	/* a diff image: parent, held pages */
#define IMAGE_VERSION_STORE	3	/* an index of chunks in a chunk store */
#define IMAGE_HEADER_SIZE	80	/* version 1 */
#define IMAGE_HEADER2_SIZE	376	/* version 2 */
#define IMAGE_HEADER3_SIZE	632	/* version 3 */
#define IMAGE_HEADER_MAX	IMAGE_HEADER3_SIZE
#define IMAGE_FLAG_DIFF		1u	/* version 2: over a parent image */
#define IMAGE_ID_LEN		16	/* XXH3-128, canonical (big-endian) */
#define IMAGE_NAME_MAX		255	/* a parent's name, without its NUL */
#define IMAGE_ID_HEX		(2 * IMAGE_ID_LEN + 1)
#define IMAGE_ENTRY_SIZE	24	/* versions 1 and 2 */
#define IMAGE_ENTRY3_SIZE	40	/* version 3 */
#define IMAGE_HASH_LEN		32	/* a store chunk's name: SHA-256 */
#define IMAGE_HASH_HEX		(2 * IMAGE_HASH_LEN + 1)
#define IMAGE_STORE_PATH_MAX	255	/* version 3's store path */
#define IMAGE_MIN_CHUNK		(4u << 10)
#define IMAGE_MAX_CHUNK		(16u << 20)
#define IMAGE_DEFAULT_CHUNK	(512u << 10)
#define IMAGE_DEFAULT_LEVEL	3

enum image_kind {
	IMAGE_ZERO = 0,		/* all zero: nothing stored */
	IMAGE_RAW = 1,		/* stored as is */
	IMAGE_ZSTD = 2,		/* one zstd frame */
	IMAGE_NKINDS
};

struct image_header {
	uint32_t version;
	uint32_t flags;
	uint32_t page_size;
	uint32_t chunk_size;
	uint64_t total_size;	/* bytes of the raw snapshot */
	uint64_t chunk_count;
	uint64_t index_offset;
	uint64_t data_end;	/* the image file's expected size */
	uint64_t index_hash;
	uint32_t level;		/* zstd level the writer used (info) */
	/* Version 2; zero in version 1 and in an image with no parent. */
	uint64_t parent_size;
	uint8_t parent_id[IMAGE_ID_LEN];
	char parent_name[IMAGE_NAME_MAX + 1];
	/* Version 3: the chunk store, relative to the image's directory. */
	char store_path[IMAGE_STORE_PATH_MAX + 1];
	/* Every version: stored in version 2, derived in version 1. */
	uint8_t id[IMAGE_ID_LEN];
	uint32_t header_size;	/* IMAGE_HEADER_SIZE, _HEADER2_ or _HEADER3_ */
	uint32_t entry_size;	/* IMAGE_ENTRY_SIZE or IMAGE_ENTRY3_SIZE */
	uint64_t map_len;	/* bytes of the held-page map after the index */
};

/* A chunk-store image: an index of chunks named by hash, no data. */
static inline bool image_in_store(const struct image_header *h)
{
	return h->version == IMAGE_VERSION_STORE;
}

/* A diff image: it names a parent and holds only some pages. */
static inline bool image_is_diff(const struct image_header *h)
{
	return h->flags & IMAGE_FLAG_DIFF;
}

struct image_entry {
	uint64_t offset;	/* file offset of the stored bytes; 0 if zero */
	uint32_t stored_len;	/* bytes stored; 0 if zero */
	uint8_t kind;		/* enum image_kind */
	uint64_t hash;		/* XXH64 (seed 0) of the raw chunk */
	uint8_t sha[IMAGE_HASH_LEN]; /* version 3: SHA-256 of the raw chunk */
};

/*
 * Where a version 3 image's chunks come from, given by the image's opener
 * (src/store/store.c's, over a store of any kind: a directory, a URL, a
 * bucket): the reader never looks for them itself.
 */
struct image_store;
struct image_store_ops {
	/*
	 * The object named hash, which must be exactly len bytes, into buf:
	 * 0, or -errno with a message naming the object.
	 */
	int (*get)(struct image_store *s, const uint8_t *hash, void *buf,
		   size_t len);
	/*
	 * Optional: the object get() gave for hash did not decode to the
	 * chunk so named (a store that keeps copies drops its copy).
	 */
	void (*bad)(struct image_store *s, const uint8_t *hash);
	void (*close)(struct image_store *s);
};
struct image_store {
	const struct image_store_ops *ops;
	bool remote;			/* over the network: bytes counted */
	_Atomic uint64_t bytes_fetched;	/* objects' bytes from the origin */
	_Atomic uint64_t bytes_cached;	/* ... from the local cache */
};

/* ---- reader ------------------------------------------------------------- */

struct image {
	int fd;			/* -1 when read below supplies the bytes */
	int (*read)(void *arg, void *buf, size_t len, uint64_t off);
	void *read_arg;
	struct image_header hdr;
	struct image_entry *index;	/* hdr.chunk_count entries */
	uint8_t *held;		/* a diff's held-page map (bit p: page p), or NULL */
	struct image_store *store; /* version 3: its chunks; closed with it */
	uint64_t file_size;
	char path[256];
};

/* True if the file at path starts with IMAGE_MAGIC. */
bool image_has_magic(const char *path);
/*
 * Where who reads raw memory: 0 if path is no faultline image, else
 * -EINVAL with the error saying so and what to do instead (unpack it;
 * or, if serve_instead, serve the image, which `faultline serve` reads).
 */
int image_refuse(const char *path, const char *who, bool serve_instead);

/*
 * Open and validate an image: header, version, geometry, the index and its
 * hash, and that every chunk lies inside the file (a truncated image fails
 * here, naming the first chunk cut off).  0 or -errno, message via fl_err().
 */
int image_open(const char *path, struct image **out);
void image_close(struct image *img);
/*
 * The same over a reader instead of a file (an image fetched over HTTP):
 * read() fills exactly len bytes at off of a file_size-byte image, 0 or
 * -errno with its own message; name is used in messages.
 */
int image_open_reader(const char *name, uint64_t file_size,
		      int (*read)(void *arg, void *buf, size_t len,
				  uint64_t off),
		      void *arg, struct image **out);

/* Uncompressed length of chunk i (the last one may be short). */
static inline size_t image_chunk_len(const struct image *img, uint64_t i)
{
	uint64_t start = i * img->hdr.chunk_size;
	uint64_t left = img->hdr.total_size - start;

	return left < img->hdr.chunk_size ? (size_t)left : img->hdr.chunk_size;
}

/* Pages of page_size the image's total_size spans (the last may be short). */
static inline uint64_t image_pages(const struct image_header *h)
{
	return h->total_size / h->page_size +
	       (h->total_size % h->page_size != 0);
}

/* Does the image hold page p (every page, unless it is a diff)? */
static inline bool image_holds(const struct image *img, uint64_t p)
{
	return !img->held || (img->held[p / 8] >> (p % 8) & 1);
}

/*
 * The content id (docs/image-format.md): XXH3-128 of the header bytes
 * before its id field (version 1: before header_hash) followed by the
 * index region ib (the entries, then a diff's held-page map), in its
 * canonical form.  hb is the header as stored; its version picks the span.
 */
void image_content_id(const unsigned char *hb, const unsigned char *ib,
		      size_t ilen, uint8_t id[IMAGE_ID_LEN]);
/* id as 32 lowercase hex digits (its canonical bytes in order). */
void image_id_hex(const uint8_t id[IMAGE_ID_LEN], char out[IMAGE_ID_HEX]);
/* A store chunk's name: 64 lowercase hex digits. */
void image_hash_hex(const uint8_t *hash, char out[IMAGE_HASH_HEX]);
/* SHA-256 of buf: 0, or -ENOMEM if libcrypto cannot. */
int image_sha256(const void *buf, size_t len, uint8_t out[IMAGE_HASH_LEN]);
/*
 * Is p a store path a version 3 image may record: 1 to 255 bytes, relative
 * (no leading '/'), no empty component, no control characters, "." alone
 * or components that are names or "..".
 */
bool image_store_path_ok(const char *p);
/*
 * Is name a parent's name an image may record (1 to IMAGE_NAME_MAX bytes,
 * no '/', not "." or "..", no control characters)?
 */
bool image_name_ok(const char *name);

/*
 * Read chunk i, decompressed and hash-checked, into dst (image_chunk_len
 * bytes).  Thread-safe: decompression state is per thread.  -EBADMSG on a
 * corrupt chunk, -EIO on a short read; the message names the image, the
 * chunk index and its file offset.
 */
int image_read_chunk(struct image *img, uint64_t i, void *dst);

/* ---- inspect / verify (create: author/create.h) ------------------------ */

struct image_info {
	struct image_header hdr;
	uint64_t file_size;
	uint64_t count[IMAGE_NKINDS];	/* chunks by kind */
	uint64_t stored[IMAGE_NKINDS];	/* bytes stored by kind */
	uint64_t raw_bytes[IMAGE_NKINDS]; /* uncompressed bytes by kind */
	uint64_t pages, pages_held;	/* of page_size; all held unless a diff */
	/* image_create into a store: chunks it wrote (the others were there) */
	uint64_t new_chunks, new_bytes;
};

/* Check a chunk size (power of two in [4 KiB, 16 MiB]); 0 or -EINVAL. */
int image_check_chunk(uint64_t chunk_size);
/* Check a zstd level (ZSTD_minCLevel() to ZSTD_maxCLevel()); 0 or -EINVAL. */
int image_check_level(long level);

/*
 * Encode (image_encode.c): the header h into b (h->header_size bytes; ib
 * the encoded index region of ilen bytes, for the content id), and the
 * entry e into b (IMAGE_ENTRY3_SIZE bytes if v3, else IMAGE_ENTRY_SIZE).
 */
void image_encode_header(unsigned char *b, const struct image_header *h,
			 const unsigned char *ib, size_t ilen);
void image_encode_entry(unsigned char *b, const struct image_entry *e,
			bool v3);
/* Open an image and summarise it (no chunk is read). */
/* Fill info from an image's header and index. */
void image_tally(const struct image *img, struct image_info *info);
int image_inspect(const char *path, struct image_info *info);

/*
 * Read and check every chunk of an image already open (name: for the
 * messages; author/create.h's image_verify opens one by path).  report(),
 * if given, is called with a one-line message for each bad chunk.  0 if
 * all are good, -EBADMSG if any is bad (*nbad says how many).
 */
int image_verify_chunks(struct image *img, const char *name,
			void (*report)(void *arg, const char *msg), void *arg,
			uint64_t *nbad);

#endif
