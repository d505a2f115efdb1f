// SPDX-License-Identifier: Apache-2.0
/*
 * image.c - parsing a compressed chunked snapshot image, inspecting and
 * verifying it (format in docs/image-format.md; its encoding is
 * image_encode.c).
 *
 * Decision: all of the structure (header hash, index hash, every chunk
 * inside the file) is validated at open, so a truncated image never opens
 * and a read can only fail on a chunk's own bytes, each checked against
 * its XXH64 on every decompression.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <xxhash.h>
#include <zstd.h>

#include "faultline.h"
#include "util/error.h"
#include "format/image.h"
#include "format/layout.h"
#include "util/io.h"
#include "util/zero.h"

static const char *const kind_names[IMAGE_NKINDS] = { "zero", "raw", "zstd" };



/* ---- per-thread decompression state ------------------------------------- */

struct image_tls {
	ZSTD_DCtx *dctx;
	void *cbuf;		/* compressed bytes of the chunk */
	size_t cap;
};

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static __thread struct image_tls *tls;

static void tls_free(void *p)
{
	struct image_tls *t = p;

	ZSTD_freeDCtx(t->dctx);
	free(t->cbuf);
	free(t);
}

static void tls_make_key(void)
{
	pthread_key_create(&tls_key, tls_free);
}

static struct image_tls *tls_get(size_t cap)
{
	if (!tls) {
		struct image_tls *t = calloc(1, sizeof(*t));

		if (!t)
			return NULL;
		t->dctx = ZSTD_createDCtx();
		if (!t->dctx) {
			free(t);
			return NULL;
		}
		pthread_once(&tls_once, tls_make_key);
		pthread_setspecific(tls_key, t);
		tls = t;
	}
	if (tls->cap < cap) {
		void *p = realloc(tls->cbuf, cap);

		if (!p)
			return NULL;
		tls->cbuf = p;
		tls->cap = cap;
	}
	return tls;
}

/* ---- reader ------------------------------------------------------------- */

bool image_has_magic(const char *path)
{
	char magic[IMAGE_MAGIC_LEN];
	int fd = open_regular(path, NULL, true);
	bool yes;

	if (fd < 0)
		return false;
	yes = pread_full(fd, magic, sizeof(magic), 0) == 0 &&
	      !memcmp(magic, IMAGE_MAGIC, IMAGE_MAGIC_LEN);
	close(fd);
	return yes;
}

int image_refuse(const char *path, const char *who, bool serve_instead)
{
	char serve[300] = "";

	if (!image_has_magic(path))
		return 0;
	if (serve_instead)
		snprintf(serve, sizeof(serve), "serve the image with `faultline "
			 "serve --mem-file %s`, or ", path);
	return fl_err(-EINVAL, "%s: a faultline image, not a raw memory file "
		      "(%s reads raw memory): %sunpack it with `faultline image "
		      "unpack %s RAW`", path, who, serve, path);
}

int image_check_chunk(uint64_t cs)
{
	if (cs < IMAGE_MIN_CHUNK || cs > IMAGE_MAX_CHUNK || (cs & (cs - 1)))
		return -EINVAL;
	return 0;
}

void image_id_hex(const uint8_t id[IMAGE_ID_LEN], char out[IMAGE_ID_HEX])
{
	for (int i = 0; i < IMAGE_ID_LEN; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

void image_hash_hex(const uint8_t *hash, char out[IMAGE_HASH_HEX])
{
	for (int i = 0; i < IMAGE_HASH_LEN; i++)
		snprintf(out + 2 * i, 3, "%02x", hash[i]);
}

int image_sha256(const void *buf, size_t len, uint8_t out[IMAGE_HASH_LEN])
{
	unsigned int n = 0;

	if (!EVP_Digest(buf, len, out, &n, EVP_sha256(), NULL) ||
	    n != IMAGE_HASH_LEN)
		return -ENOMEM;
	return 0;
}

bool image_store_path_ok(const char *p)
{
	size_t n = strnlen(p, IMAGE_STORE_PATH_MAX + 1);

	if (!n || n > IMAGE_STORE_PATH_MAX || p[0] == '/')
		return false;
	if (!strcmp(p, "."))
		return true;
	for (const char *c = p; *c;) {
		size_t k = strcspn(c, "/");

		if (!k || (k == 1 && c[0] == '.'))
			return false;	/* "a//b", "./a", "a/./b", "a/" */
		for (size_t i = 0; i < k; i++)
			if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f)
				return false;
		c += k;
		if (*c == '/' && !*++c)
			return false;
	}
	return true;
}

bool image_name_ok(const char *name)
{
	size_t n = strnlen(name, IMAGE_NAME_MAX + 1);

	if (!n || n > IMAGE_NAME_MAX || !strcmp(name, ".") ||
	    !strcmp(name, ".."))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f ||
		    name[i] == '/')
			return false;
	return true;
}

/* Version 2's parent fields: a diff's, or all zero. */
static int parse_parent(struct image *img, const unsigned char *b)
{
	struct image_header *h = &img->hdr;
	const unsigned char *name = b + H2_PARENT_NAME;
	const char *p = img->path;
	size_t n = strnlen((const char *)name, IMAGE_NAME_MAX + 1);

	h->parent_size = get_le64(b + H2_PARENT_SIZE);
	memcpy(h->parent_id, b + H2_PARENT_ID, IMAGE_ID_LEN);
	memcpy(h->id, b + (image_in_store(h) ? H3_CONTENT_ID : H2_CONTENT_ID),
	       IMAGE_ID_LEN);
	if (n > IMAGE_NAME_MAX ||
	    !is_zero(name + n, H2_CONTENT_ID - H2_PARENT_NAME - n))
		return fl_err(-EBADMSG, "%s: bad parent name field", p);
	memcpy(h->parent_name, name, n);
	h->parent_name[n] = 0;
	if (!image_is_diff(h)) {
		if (h->parent_size || n ||
		    !is_zero(h->parent_id, IMAGE_ID_LEN))
			return fl_err(-EBADMSG, "%s: parent fields set in an "
				      "image with no parent", p);
		return 0;
	}
	if (!image_name_ok(h->parent_name))
		return fl_err(-EBADMSG, "%s: bad parent name", p);
	if (h->parent_size != h->total_size)
		return fl_err(-EBADMSG, "%s: a diff of %llu bytes over a "
			      "parent of %llu", p,
			      (unsigned long long)h->total_size,
			      (unsigned long long)h->parent_size);
	return 0;
}

/* Version 3's store path: where its chunks are, from its directory. */
static int parse_store(struct image *img, const unsigned char *b)
{
	const unsigned char *f = b + H3_STORE_PATH;
	size_t n = strnlen((const char *)f, IMAGE_STORE_PATH_MAX + 1);

	if (n > IMAGE_STORE_PATH_MAX ||
	    !is_zero(f + n, H3_CONTENT_ID - H3_STORE_PATH - n))
		return fl_err(-EBADMSG, "%s: bad store path field", img->path);
	memcpy(img->hdr.store_path, f, n);
	img->hdr.store_path[n] = 0;
	if (!image_store_path_ok(img->hdr.store_path))
		return fl_err(-EBADMSG, "%s: bad store path", img->path);
	return 0;
}

/* b: the first len bytes of the file (at least IMAGE_HEADER_SIZE). */
static int parse_header(struct image *img, const unsigned char *b, size_t len)
{
	struct image_header *h = &img->hdr;
	const char *p = img->path;
	uint64_t hh, ilen;
	size_t hh_off;
	int ret;

	if (memcmp(b + H_MAGIC, IMAGE_MAGIC, IMAGE_MAGIC_LEN))
		return fl_err(-EINVAL, "%s: not a faultline image (bad magic)",
			      p);
	h->version = get_le32(b + H_VERSION);
	if (h->version < IMAGE_VERSION || h->version > IMAGE_VERSION_STORE)
		return fl_err(-EPROTONOSUPPORT,
			      "%s: image version %u not supported (this build reads versions %u to %u)",
			      p, h->version, IMAGE_VERSION,
			      IMAGE_VERSION_STORE);
	h->header_size = h->version == IMAGE_VERSION ? IMAGE_HEADER_SIZE :
			 h->version == IMAGE_VERSION_DIFF ? IMAGE_HEADER2_SIZE :
			 IMAGE_HEADER3_SIZE;
	h->entry_size = image_in_store(h) ? IMAGE_ENTRY3_SIZE :
			IMAGE_ENTRY_SIZE;
	if (len < h->header_size)
		return fl_err(-EBADMSG,
			      "%s: %zu bytes, too short for a version %u image header",
			      p, len, h->version);
	hh_off = h->version == IMAGE_VERSION ? H_HEADER_HASH :
		 h->version == IMAGE_VERSION_DIFF ? H2_HEADER_HASH :
		 H3_HEADER_HASH;
	hh = XXH64(b, hh_off, 0);
	if (get_le64(b + hh_off) != hh)
		return fl_err(-EBADMSG, "%s: header checksum mismatch at offset 0",
			      p);
	h->flags = get_le32(b + H_FLAGS);
	h->page_size = get_le32(b + H_PAGE_SIZE);
	h->chunk_size = get_le32(b + H_CHUNK_SIZE);
	h->total_size = get_le64(b + H_TOTAL_SIZE);
	h->chunk_count = get_le64(b + H_CHUNK_COUNT);
	h->index_offset = get_le64(b + H_INDEX_OFFSET);
	h->data_end = get_le64(b + H_DATA_END);
	h->index_hash = get_le64(b + H_INDEX_HASH);
	h->level = get_le32(b + H_LEVEL);

	if (h->flags & ~(h->version == IMAGE_VERSION ? 0 : IMAGE_FLAG_DIFF))
		return fl_err(-EPROTONOSUPPORT, "%s: unknown header flags 0x%x",
			      p, h->flags);
	if (get_le32(b + H_RESERVED))
		return fl_err(-EBADMSG, "%s: reserved header field is not zero",
			      p);
	if (image_check_chunk(h->chunk_size))
		return fl_err(-EBADMSG, "%s: bad chunk size %u", p,
			      h->chunk_size);
	if (h->page_size < 4096 || h->page_size > h->chunk_size ||
	    (h->page_size & (h->page_size - 1)))
		return fl_err(-EBADMSG, "%s: bad page size %u", p,
			      h->page_size);
	/* Written so that no total_size can wrap it around. */
	if (h->chunk_count != h->total_size / h->chunk_size +
			      (h->total_size % h->chunk_size != 0))
		return fl_err(-EBADMSG,
			      "%s: chunk count %llu does not match size %llu",
			      p, (unsigned long long)h->chunk_count,
			      (unsigned long long)h->total_size);
	if (h->version >= IMAGE_VERSION_DIFF) {
		ret = parse_parent(img, b);
		if (ret < 0)
			return ret;
	}
	if (image_in_store(h)) {
		ret = parse_store(img, b);
		if (ret < 0)
			return ret;
	}
	/* Pages of at least 4 KiB: the map is at most total_size / 2^15. */
	h->map_len = image_is_diff(h) ? (image_pages(h) + 7) / 8 : 0;
	if (h->chunk_count > (UINT64_MAX / 2) / h->entry_size)
		return fl_err(-EBADMSG, "%s: bad index geometry", p);
	ilen = h->chunk_count * h->entry_size + h->map_len;
	if (h->index_offset != h->header_size ||
	    h->data_end < h->index_offset + ilen ||
	    (image_in_store(h) && h->data_end != h->index_offset + ilen))
		return fl_err(-EBADMSG, "%s: bad index geometry", p);
	return 0;
}

/* Decode and check the index; entries must describe chunks inside data. */
static int parse_index(struct image *img, const unsigned char *b)
{
	const struct image_header *h = &img->hdr;
	const uint64_t es = h->entry_size;
	const bool v3 = image_in_store(h);
	uint64_t data_start = h->index_offset + h->chunk_count * es +
			      h->map_len;
	uint64_t per = h->chunk_size / h->page_size, pages = image_pages(h);
	const unsigned char *map = b + h->chunk_count * es;

	/* A diff's map: no bit past the last page. */
	if (h->map_len && pages % 8 && map[h->map_len - 1] >> (pages % 8))
		return fl_err(-EBADMSG, "%s: held-page map: bits set past "
			      "the last page (%llu)", img->path,
			      (unsigned long long)pages);

	for (uint64_t i = 0; i < h->chunk_count; i++) {
		const unsigned char *r = b + i * es;
		struct image_entry *e = &img->index[i];
		size_t len = image_chunk_len(img, i);
		bool bad;

		if (v3) {	/* no offset, no XXH64: named by SHA-256 */
			memcpy(e->sha, r + E3_HASH, IMAGE_HASH_LEN);
			e->stored_len = get_le32(r + E3_STORED_LEN);
			e->kind = r[E3_KIND];
			bad = r[E3_RESERVED] || r[E3_RESERVED + 1] ||
			      r[E3_RESERVED + 2];
		} else {
			e->offset = get_le64(r + E_OFFSET);
			e->stored_len = get_le32(r + E_STORED_LEN);
			e->kind = r[E_KIND];
			e->hash = get_le64(r + E_HASH);
			bad = r[E_RESERVED] || r[E_RESERVED + 1] ||
			      r[E_RESERVED + 2];
		}
		if (bad)
			;
		else if (e->kind == IMAGE_ZERO)
			bad = e->offset || e->stored_len || e->hash ||
			      !is_zero(e->sha, IMAGE_HASH_LEN);
		else if (e->kind == IMAGE_RAW)
			bad = e->stored_len != len;
		else if (e->kind == IMAGE_ZSTD)
			bad = !e->stored_len || e->stored_len >= len;
		else
			bad = true;
		if (!bad && h->map_len && e->kind != IMAGE_ZERO) {
			/* A chunk holding no page stores nothing. */
			uint64_t p = i * per, end = p + per < pages ?
						    p + per : pages;

			bad = true;
			for (; p < end && bad; p++)
				bad = !(map[p / 8] >> (p % 8) & 1);
		}
		if (!bad && e->kind != IMAGE_ZERO && !v3)
			bad = e->offset < data_start ||
			      e->offset > h->data_end ||
			      e->stored_len > h->data_end - e->offset;
		if (bad)
			return fl_err(-EBADMSG,
				      "%s: chunk %llu: bad index entry at offset %llu",
				      img->path, (unsigned long long)i,
				      (unsigned long long)(h->index_offset +
						i * es));
	}
	if (img->file_size >= h->data_end)
		return 0;
	/* Truncated: name the first chunk that is cut off. */
	for (uint64_t i = 0; i < h->chunk_count; i++) {
		const struct image_entry *e = &img->index[i];

		if (e->kind != IMAGE_ZERO && !v3 &&
		    e->offset + e->stored_len > img->file_size)
			return fl_err(-EBADMSG,
				      "%s: chunk %llu at offset %llu (%u bytes) is past the end of the file (%llu bytes): image truncated",
				      img->path, (unsigned long long)i,
				      (unsigned long long)e->offset,
				      e->stored_len,
				      (unsigned long long)img->file_size);
	}
	return fl_err(-EBADMSG,
		      "%s: file is %llu bytes, header says %llu: image truncated",
		      img->path, (unsigned long long)img->file_size,
		      (unsigned long long)h->data_end);
}

static int image_pread(struct image *img, void *buf, size_t len, uint64_t off)
{
	if (img->read)
		return img->read(img->read_arg, buf, len, off);
	return pread_full(img->fd, buf, len, off);
}

/* XXH3-128 of the header before its id (or hash) and the index region. */
static void content_id(const unsigned char *hb, size_t hlen,
		       const unsigned char *ib, size_t ilen,
		       uint8_t id[IMAGE_ID_LEN])
{
	XXH3_state_t *st = XXH3_createState();
	XXH128_canonical_t c;
	XXH128_hash_t h;

	if (st) {
		XXH3_128bits_reset(st);
		XXH3_128bits_update(st, hb, hlen);
		XXH3_128bits_update(st, ib, ilen);
		h = XXH3_128bits_digest(st);
		XXH3_freeState(st);
	} else {	/* no memory for the state: one buffer instead */
		unsigned char *all = malloc(hlen + ilen);

		if (!all) {
			memset(id, 0, IMAGE_ID_LEN);
			return;
		}
		memcpy(all, hb, hlen);
		memcpy(all + hlen, ib, ilen);
		h = XXH3_128bits(all, hlen + ilen);
		free(all);
	}
	XXH128_canonicalFromHash(&c, h);
	memcpy(id, c.digest, IMAGE_ID_LEN);
}

void image_content_id(const unsigned char *hb, const unsigned char *ib,
		      size_t ilen, uint8_t id[IMAGE_ID_LEN])
{
	uint32_t v = get_le32(hb + H_VERSION);

	content_id(hb, v == IMAGE_VERSION ? H_HEADER_HASH :
		   v == IMAGE_VERSION_DIFF ? H2_CONTENT_ID : H3_CONTENT_ID,
		   ib, ilen, id);
}

/* Read and validate header and index of img (fd or reader set up). */
static int image_load(struct image *img)
{
	unsigned char hb[IMAGE_HEADER_MAX];
	unsigned char *ib = NULL;
	const char *path = img->path;
	uint8_t id[IMAGE_ID_LEN];
	size_t ilen, hlen;
	int ret;

	if (img->file_size < IMAGE_HEADER_SIZE)
		return fl_err(-EBADMSG,
			      "%s: %llu bytes, too short for an image header",
			      path, (unsigned long long)img->file_size);
	hlen = img->file_size < sizeof(hb) ? (size_t)img->file_size :
	       sizeof(hb);
	ret = image_pread(img, hb, hlen, 0);
	if (ret < 0)
		return img->read ? ret :
		       fl_err(ret, "%s: cannot read header: %s", path,
			      strerror(-ret));
	ret = parse_header(img, hb, hlen);
	if (ret < 0)
		return ret;
	if (img->hdr.chunk_count > SIZE_MAX / img->hdr.entry_size ||
	    img->hdr.chunk_count > SIZE_MAX / sizeof(*img->index) ||
	    img->hdr.map_len > SIZE_MAX / 2 -
			       img->hdr.chunk_count * img->hdr.entry_size)
		return fl_err(-EFBIG, "%s: index too large", path);
	ilen = (size_t)img->hdr.chunk_count * img->hdr.entry_size +
	       (size_t)img->hdr.map_len;
	if (img->file_size < img->hdr.index_offset + ilen)
		return fl_err(-EBADMSG,
			      "%s: index at offset %llu (%zu bytes) is past the end of the file (%llu bytes): image truncated",
			      path, (unsigned long long)img->hdr.index_offset,
			      ilen, (unsigned long long)img->file_size);
	ib = malloc(ilen ? ilen : 1);
	img->index = calloc(img->hdr.chunk_count ? img->hdr.chunk_count : 1,
			    sizeof(*img->index));
	if (img->hdr.map_len)
		img->held = malloc(img->hdr.map_len);
	if (!ib || !img->index || (img->hdr.map_len && !img->held)) {
		ret = fl_err(-ENOMEM, "%s: no memory for the index", path);
		goto out;
	}
	ret = image_pread(img, ib, ilen, img->hdr.index_offset);
	if (ret < 0) {
		if (!img->read)
			fl_err(ret, "%s: cannot read index: %s", path,
			       strerror(-ret));
		goto out;
	}
	if (XXH64(ib, ilen, 0) != img->hdr.index_hash) {
		ret = fl_err(-EBADMSG,
			     "%s: index checksum mismatch at offset %llu", path,
			     (unsigned long long)img->hdr.index_offset);
		goto out;
	}
	image_content_id(hb, ib, ilen, id);
	if (img->hdr.version == IMAGE_VERSION) {
		memcpy(img->hdr.id, id, IMAGE_ID_LEN);
	} else if (memcmp(img->hdr.id, id, IMAGE_ID_LEN)) {
		char want[IMAGE_ID_HEX], got[IMAGE_ID_HEX];

		image_id_hex(img->hdr.id, want);
		image_id_hex(id, got);
		ret = fl_err(-EBADMSG, "%s: content id mismatch (stored %s, "
			     "computed %s)", path, want, got);
		goto out;
	}
	if (img->held)
		memcpy(img->held, ib + img->hdr.chunk_count *
		       img->hdr.entry_size, img->hdr.map_len);
	ret = parse_index(img, ib);
out:
	free(ib);
	return ret;
}

int image_open(const char *path, struct image **out)
{
	struct image *img;
	struct stat st;
	int ret;

	img = calloc(1, sizeof(*img));
	if (!img)
		return -ENOMEM;
	snprintf(img->path, sizeof(img->path), "%s", path);
	img->fd = open_regular(path, &st, false);
	if (img->fd < 0) {
		ret = img->fd;
		free(img);
		return ret;
	}
	img->file_size = (uint64_t)st.st_size;
	ret = image_load(img);
	if (ret < 0)
		goto fail;
	*out = img;
	return 0;
fail:
	image_close(img);
	return ret;
}

int image_open_reader(const char *name, uint64_t file_size,
		      int (*read)(void *arg, void *buf, size_t len,
				  uint64_t off),
		      void *arg, struct image **out)
{
	struct image *img = calloc(1, sizeof(*img));
	int ret;

	if (!img)
		return -ENOMEM;
	snprintf(img->path, sizeof(img->path), "%s", name);
	img->fd = -1;
	img->read = read;
	img->read_arg = arg;
	img->file_size = file_size;
	ret = image_load(img);
	if (ret < 0) {
		image_close(img);
		return ret;
	}
	*out = img;
	return 0;
}

void image_close(struct image *img)
{
	if (!img)
		return;
	if (img->fd >= 0)
		close(img->fd);
	if (img->store)
		img->store->ops->close(img->store);
	free(img->index);
	free(img->held);
	free(img);
}

/*
 * Version 3: chunk i's object from the store, decoded, and checked
 * against the SHA-256 that names it.
 */
static int read_store_chunk(struct image *img, uint64_t i, void *dst)
{
	const struct image_entry *e = &img->index[i];
	size_t len = image_chunk_len(img, i), n;
	uint8_t got[IMAGE_HASH_LEN];
	char want_hex[IMAGE_HASH_HEX], got_hex[IMAGE_HASH_HEX];
	struct image_tls *t = NULL;
	void *src = dst;
	int ret;

	image_hash_hex(e->sha, want_hex);
	if (!img->store)
		return fl_err(-ENOENT, "%s: chunk %llu (%s): no chunk store "
			      "opened for the image", img->path,
			      (unsigned long long)i, want_hex);
	if (e->kind == IMAGE_ZSTD) {
		t = tls_get(e->stored_len);
		if (!t)
			return fl_err(-ENOMEM, "%s: chunk %llu: no memory",
				      img->path, (unsigned long long)i);
		src = t->cbuf;
	}
	ret = img->store->ops->get(img->store, e->sha, src, e->stored_len);
	if (ret < 0)
		return ret;	/* the store named the object */
	if (t) {
		n = ZSTD_decompressDCtx(t->dctx, dst, len, src, e->stored_len);
		if ((ZSTD_isError(n) || n != len) && img->store->ops->bad)
			img->store->ops->bad(img->store, e->sha);
		if (ZSTD_isError(n) || n != len)
			return fl_err(-EBADMSG,
				      "%s: chunk %llu (%s, zstd, %u bytes): %s%s",
				      img->path, (unsigned long long)i,
				      want_hex, e->stored_len,
				      ZSTD_isError(n) ? "corrupt zstd data: " :
				      "decompressed to another length",
				      ZSTD_isError(n) ? ZSTD_getErrorName(n) :
				      "");
	}
	if (image_sha256(dst, len, got) < 0)
		return fl_err(-ENOMEM, "%s: chunk %llu: cannot hash",
			      img->path, (unsigned long long)i);
	if (memcmp(got, e->sha, IMAGE_HASH_LEN)) {
		if (img->store->ops->bad)
			img->store->ops->bad(img->store, e->sha);
		image_hash_hex(got, got_hex);
		return fl_err(-EBADMSG, "%s: chunk %llu (%s, %u bytes): "
			      "SHA-256 mismatch (computed %s)", img->path,
			      (unsigned long long)i, want_hex, e->stored_len,
			      got_hex);
	}
	return 0;
}

int image_read_chunk(struct image *img, uint64_t i, void *dst)
{
	const struct image_entry *e;
	struct image_tls *t;
	uint64_t got;
	size_t n, len;
	int ret;

	if (i >= img->hdr.chunk_count)
		return -ERANGE;
	e = &img->index[i];
	len = image_chunk_len(img, i);
	if (e->kind != IMAGE_ZERO && image_in_store(&img->hdr))
		return read_store_chunk(img, i, dst);
	switch (e->kind) {
	case IMAGE_ZERO:
		memset(dst, 0, len);
		return 0;
	case IMAGE_RAW:
		ret = image_pread(img, dst, len, e->offset);
		break;
	default:
		t = tls_get(e->stored_len);
		if (!t)
			return fl_err(-ENOMEM, "%s: chunk %llu: no memory",
				      img->path, (unsigned long long)i);
		ret = image_pread(img, t->cbuf, e->stored_len, e->offset);
		if (ret < 0)
			break;
		n = ZSTD_decompressDCtx(t->dctx, dst, len, t->cbuf,
					e->stored_len);
		if (ZSTD_isError(n))
			return fl_err(-EBADMSG,
				      "%s: chunk %llu at offset %llu: corrupt zstd data: %s",
				      img->path, (unsigned long long)i,
				      (unsigned long long)e->offset,
				      ZSTD_getErrorName(n));
		if (n != len)
			return fl_err(-EBADMSG,
				      "%s: chunk %llu at offset %llu: decompressed to %zu bytes, expected %zu",
				      img->path, (unsigned long long)i,
				      (unsigned long long)e->offset, n, len);
	}
	if (ret < 0 && img->read)
		return ret;	/* the reader named its input */
	if (ret == -EIO)
		return fl_err(-EIO,
			      "%s: chunk %llu at offset %llu: short read: image truncated",
			      img->path, (unsigned long long)i,
			      (unsigned long long)e->offset);
	if (ret < 0)
		return fl_err(ret, "%s: chunk %llu at offset %llu: read: %s",
			      img->path, (unsigned long long)i,
			      (unsigned long long)e->offset, strerror(-ret));
	got = XXH64(dst, len, 0);
	if (got != e->hash)
		return fl_err(-EBADMSG,
			      "%s: chunk %llu at offset %llu (%s, %u bytes): checksum mismatch (stored %016llx, computed %016llx)",
			      img->path, (unsigned long long)i,
			      (unsigned long long)e->offset,
			      kind_names[e->kind], e->stored_len,
			      (unsigned long long)e->hash,
			      (unsigned long long)got);
	return 0;
}

/* ---- inspect / verify --------------------------------------------------- */

void image_tally(const struct image *img, struct image_info *info)
{
	memset(info, 0, sizeof(*info));
	info->hdr = img->hdr;
	info->file_size = img->file_size;
	for (uint64_t i = 0; i < img->hdr.chunk_count; i++) {
		const struct image_entry *e = &img->index[i];

		info->count[e->kind]++;
		info->stored[e->kind] += e->stored_len;
		info->raw_bytes[e->kind] += image_chunk_len(img, i);
	}
	info->pages = image_pages(&img->hdr);
	if (!img->held)
		info->pages_held = info->pages;
	for (uint64_t k = 0; img->held && k < img->hdr.map_len; k++)
		info->pages_held += (uint64_t)__builtin_popcount(img->held[k]);
}

int image_inspect(const char *path, struct image_info *info)
{
	struct image *img;
	int ret = image_open(path, &img);

	if (ret < 0)
		return ret;
	image_tally(img, info);
	image_close(img);
	return 0;
}

int image_verify_chunks(struct image *img, const char *name,
			void (*report)(void *arg, const char *msg), void *arg,
			uint64_t *nbad)
{
	uint64_t bad = 0;
	void *buf = malloc(img->hdr.chunk_size);

	if (nbad)
		*nbad = 0;
	if (!buf)
		return fl_err(-ENOMEM, "%s: no memory", name);
	for (uint64_t i = 0; i < img->hdr.chunk_count; i++) {
		if (img->index[i].kind == IMAGE_ZERO)
			continue;
		if (image_read_chunk(img, i, buf) < 0) {
			bad++;
			if (report)
				report(arg, fl_last_error());
		}
	}
	free(buf);
	if (nbad)
		*nbad = bad;
	if (bad)
		return fl_err(-EBADMSG, "%s: %llu bad chunk%s", name,
			      (unsigned long long)bad, bad == 1 ? "" : "s");
	return 0;
}
