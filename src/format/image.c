/*
 * image.c - the compressed chunked snapshot image: reader, writer,
 * inspector and verifier (format in docs/image-format.md).
 *
 * Decisions: the index sits right after the header and its size follows
 * from the header alone, so the writer reserves it, streams chunks after it,
 * and fills header and index in at the end before an atomic rename; the
 * reader validates all of the structure (header hash, index hash, every
 * chunk inside the file) at open, so a truncated image never opens and a
 * read can only fail on a chunk's own bytes.  Every chunk carries an XXH64
 * of its uncompressed bytes, checked on every decompression.  The writer
 * never reads holes (SEEK_DATA) and compresses batches of chunks on a small
 * pool of threads, writing them out in order.
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

#include <xxhash.h>
#include <zstd.h>

#include "faultline.h"
#include "util/error.h"
#include "format/image.h"
#include "util/io.h"

/* ---- little-endian helpers ---------------------------------------------- */

static void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_le32(const unsigned char *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get_le64(const unsigned char *p)
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
#define H_HEADER_HASH	72

/* Index entry field offsets ("Chunk index"). */
#define E_OFFSET	0
#define E_STORED_LEN	8
#define E_KIND		12
#define E_RESERVED	13
#define E_HASH		16

static const char *const kind_names[IMAGE_NKINDS] = { "zero", "raw", "zstd" };

static void encode_header(unsigned char *b, const struct image_header *h)
{
	memset(b, 0, IMAGE_HEADER_SIZE);
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
	put_le64(b + H_HEADER_HASH, XXH64(b, H_HEADER_HASH, 0));
}

static void encode_entry(unsigned char *b, const struct image_entry *e)
{
	memset(b, 0, IMAGE_ENTRY_SIZE);
	put_le64(b + E_OFFSET, e->offset);
	put_le32(b + E_STORED_LEN, e->stored_len);
	b[E_KIND] = e->kind;
	put_le64(b + E_HASH, e->hash);
}

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

int image_check_chunk(uint64_t cs)
{
	if (cs < IMAGE_MIN_CHUNK || cs > IMAGE_MAX_CHUNK || (cs & (cs - 1)))
		return -EINVAL;
	return 0;
}

static int parse_header(struct image *img, const unsigned char *b)
{
	struct image_header *h = &img->hdr;
	const char *p = img->path;
	uint64_t hh;

	if (memcmp(b + H_MAGIC, IMAGE_MAGIC, IMAGE_MAGIC_LEN))
		return fl_err(-EINVAL, "%s: not a faultline image (bad magic)",
			      p);
	h->version = get_le32(b + H_VERSION);
	if (h->version != IMAGE_VERSION)
		return fl_err(-EPROTONOSUPPORT,
			      "%s: image version %u not supported (this build reads version %u)",
			      p, h->version, IMAGE_VERSION);
	hh = XXH64(b, H_HEADER_HASH, 0);
	if (get_le64(b + H_HEADER_HASH) != hh)
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

	if (h->flags)
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
	if (h->index_offset != IMAGE_HEADER_SIZE ||
	    h->chunk_count > (UINT64_MAX - IMAGE_HEADER_SIZE) /
			     IMAGE_ENTRY_SIZE ||
	    h->data_end < h->index_offset + h->chunk_count * IMAGE_ENTRY_SIZE)
		return fl_err(-EBADMSG, "%s: bad index geometry", p);
	return 0;
}

/* Decode and check the index; entries must describe chunks inside data. */
static int parse_index(struct image *img, const unsigned char *b)
{
	const struct image_header *h = &img->hdr;
	uint64_t data_start = h->index_offset + h->chunk_count *
			      IMAGE_ENTRY_SIZE;

	for (uint64_t i = 0; i < h->chunk_count; i++) {
		const unsigned char *r = b + i * IMAGE_ENTRY_SIZE;
		struct image_entry *e = &img->index[i];
		size_t len = image_chunk_len(img, i);
		bool bad;

		e->offset = get_le64(r + E_OFFSET);
		e->stored_len = get_le32(r + E_STORED_LEN);
		e->kind = r[E_KIND];
		e->hash = get_le64(r + E_HASH);
		if (r[E_RESERVED] || r[E_RESERVED + 1] || r[E_RESERVED + 2])
			bad = true;
		else if (e->kind == IMAGE_ZERO)
			bad = e->offset || e->stored_len || e->hash;
		else if (e->kind == IMAGE_RAW)
			bad = e->stored_len != len;
		else if (e->kind == IMAGE_ZSTD)
			bad = !e->stored_len || e->stored_len >= len;
		else
			bad = true;
		if (!bad && e->kind != IMAGE_ZERO)
			bad = e->offset < data_start ||
			      e->offset > h->data_end ||
			      e->stored_len > h->data_end - e->offset;
		if (bad)
			return fl_err(-EBADMSG,
				      "%s: chunk %llu: bad index entry at offset %llu",
				      img->path, (unsigned long long)i,
				      (unsigned long long)(h->index_offset +
						i * IMAGE_ENTRY_SIZE));
	}
	if (img->file_size >= h->data_end)
		return 0;
	/* Truncated: name the first chunk that is cut off. */
	for (uint64_t i = 0; i < h->chunk_count; i++) {
		const struct image_entry *e = &img->index[i];

		if (e->kind != IMAGE_ZERO &&
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

/* Read and validate header and index of img (fd or reader set up). */
static int image_load(struct image *img)
{
	unsigned char hb[IMAGE_HEADER_SIZE];
	unsigned char *ib = NULL;
	const char *path = img->path;
	size_t ilen;
	int ret;

	if (img->file_size < IMAGE_HEADER_SIZE)
		return fl_err(-EBADMSG,
			      "%s: %llu bytes, too short for an image header",
			      path, (unsigned long long)img->file_size);
	ret = image_pread(img, hb, sizeof(hb), 0);
	if (ret < 0)
		return img->read ? ret :
		       fl_err(ret, "%s: cannot read header: %s", path,
			      strerror(-ret));
	ret = parse_header(img, hb);
	if (ret < 0)
		return ret;
	if (img->hdr.chunk_count > SIZE_MAX / IMAGE_ENTRY_SIZE ||
	    img->hdr.chunk_count > SIZE_MAX / sizeof(*img->index))
		return fl_err(-EFBIG, "%s: index too large", path);
	ilen = (size_t)img->hdr.chunk_count * IMAGE_ENTRY_SIZE;
	if (img->file_size < img->hdr.index_offset + ilen)
		return fl_err(-EBADMSG,
			      "%s: index at offset %llu (%zu bytes) is past the end of the file (%llu bytes): image truncated",
			      path, (unsigned long long)img->hdr.index_offset,
			      ilen, (unsigned long long)img->file_size);
	ib = malloc(ilen ? ilen : 1);
	img->index = calloc(img->hdr.chunk_count ? img->hdr.chunk_count : 1,
			    sizeof(*img->index));
	if (!ib || !img->index) {
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
	free(img->index);
	free(img);
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

static void tally(const struct image *img, struct image_info *info)
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
}

int image_inspect(const char *path, struct image_info *info)
{
	struct image *img;
	int ret = image_open(path, &img);

	if (ret < 0)
		return ret;
	tally(img, info);
	image_close(img);
	return 0;
}

int image_verify(const char *path,
		 void (*report)(void *arg, const char *msg), void *arg,
		 uint64_t *nbad)
{
	struct image *img;
	uint64_t bad = 0;
	void *buf;
	int ret = image_open(path, &img);

	if (nbad)
		*nbad = 0;
	if (ret < 0)
		return ret;
	buf = malloc(img->hdr.chunk_size);
	if (!buf) {
		image_close(img);
		return fl_err(-ENOMEM, "%s: no memory", path);
	}
	for (uint64_t i = 0; i < img->hdr.chunk_count; i++) {
		if (img->index[i].kind == IMAGE_ZERO)
			continue;
		ret = image_read_chunk(img, i, buf);
		if (ret < 0) {
			bad++;
			if (report)
				report(arg, fl_last_error());
		}
	}
	free(buf);
	image_close(img);
	if (nbad)
		*nbad = bad;
	if (bad)
		return fl_err(-EBADMSG, "%s: %llu bad chunk%s", path,
			      (unsigned long long)bad, bad == 1 ? "" : "s");
	return 0;
}

/* ---- create ------------------------------------------------------------- */

/* One chunk of a batch on its way from the raw file to the image. */
struct job {
	uint64_t idx;
	size_t len;
	bool hole;		/* known zero from SEEK_DATA: not read */
	void *in;		/* len bytes read from the raw file */
	void *out;		/* compressed bytes */
	size_t out_len;
	uint8_t kind;
	uint64_t hash;
};

struct pool {
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	unsigned int gen;
	unsigned int active;	/* workers still on the current batch */
	bool quit;
	atomic_uint next;	/* next job to take */
	unsigned int njobs;
	struct job *jobs;
	size_t out_cap;
	int level;
};

struct worker {
	struct pool *p;
	pthread_t tid;
	ZSTD_CCtx *cctx;
};

/* memcmp against a zero block: glibc's vector memcmp, early exit on data. */
static bool all_zero(const void *buf, size_t len)
{
	static const unsigned char zeros[4096];
	const unsigned char *p = buf;

	while (len) {
		size_t n = len < sizeof(zeros) ? len : sizeof(zeros);

		if (memcmp(p, zeros, n))
			return false;
		p += n;
		len -= n;
	}
	return true;
}

static void compress_job(struct pool *p, struct job *j, ZSTD_CCtx *cctx)
{
	size_t n;

	j->out_len = 0;
	if (j->hole || all_zero(j->in, j->len)) {
		j->kind = IMAGE_ZERO;
		j->hash = 0;
		return;
	}
	j->hash = XXH64(j->in, j->len, 0);
	n = ZSTD_compressCCtx(cctx, j->out, p->out_cap, j->in, j->len,
			      p->level);
	/* Compression pays only if it saves at least 1/16 of the chunk. */
	if (!ZSTD_isError(n) && n < j->len - j->len / 16) {
		j->kind = IMAGE_ZSTD;
		j->out_len = n;
	} else {
		j->kind = IMAGE_RAW;
	}
}

static void run_batch(struct pool *p, ZSTD_CCtx *cctx)
{
	unsigned int k;

	while ((k = atomic_fetch_add(&p->next, 1)) < p->njobs)
		compress_job(p, &p->jobs[k], cctx);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct pool *p = w->p;
	unsigned int gen = 0;

	for (;;) {
		pthread_mutex_lock(&p->mu);
		while (p->gen == gen && !p->quit)
			pthread_cond_wait(&p->go, &p->mu);
		if (p->quit) {
			pthread_mutex_unlock(&p->mu);
			break;
		}
		gen = p->gen;
		pthread_mutex_unlock(&p->mu);
		run_batch(p, w->cctx);
		pthread_mutex_lock(&p->mu);
		if (--p->active == 0)
			pthread_cond_signal(&p->done);
		pthread_mutex_unlock(&p->mu);
	}
	return NULL;
}

static void pool_run(struct pool *p, unsigned int nworkers, ZSTD_CCtx *cctx)
{
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->next, 0);
	p->active = nworkers;
	p->gen++;
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	run_batch(p, cctx);
	pthread_mutex_lock(&p->mu);
	while (p->active)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

/* Where the raw file's data is, from SEEK_DATA / SEEK_HOLE, cached. */
struct extent {
	int fd;
	uint64_t size;
	uint64_t data;		/* [data, hole) is data, none before */
	uint64_t hole;
	bool valid;
};

static bool has_data(struct extent *x, uint64_t off, uint64_t end)
{
	if (!x->valid || off >= x->hole) {
		off_t d = lseek(x->fd, (off_t)off, SEEK_DATA);
		off_t h;

		if (d < 0) {
			if (errno != ENXIO) {	/* no SEEK_DATA */
				x->data = 0;
				x->hole = UINT64_MAX;
				x->valid = true;
				return true;
			}
			d = (off_t)x->size;
		}
		h = (uint64_t)d < x->size ? lseek(x->fd, d, SEEK_HOLE) : d;
		x->data = (uint64_t)d;
		x->hole = h < 0 ? x->size : (uint64_t)h;
		if (x->hole <= x->data)
			x->hole = x->data + 1;
		x->valid = true;
	}
	return x->data < end;
}

int image_create(const char *raw_path, const char *image_path,
		 const struct image_create_opts *opts, struct image_info *info)
{
	struct image_create_opts o = { 0 };
	struct image_header h = { 0 };
	struct image_entry *index = NULL;
	struct worker *workers = NULL;
	unsigned char hb[IMAGE_HEADER_SIZE];
	unsigned char *ib = NULL;
	struct pool p = { 0 };
	ZSTD_CCtx *cctx = NULL;
	unsigned int nworkers = 0, batch = 0;
	struct extent x = { 0 };
	char *tmp = NULL;
	uint64_t pos, i;
	struct stat st;
	int rfd = -1, wfd = -1, ret;
	size_t ilen;

	if (opts)
		o = *opts;
	if (!o.chunk_size)
		o.chunk_size = IMAGE_DEFAULT_CHUNK;
	if (!o.level)
		o.level = IMAGE_DEFAULT_LEVEL;
	if (image_check_chunk(o.chunk_size))
		return fl_err(-EINVAL,
			      "chunk size %u: must be a power of two from 4K to 16M",
			      o.chunk_size);
	if (o.level < ZSTD_minCLevel() || o.level > ZSTD_maxCLevel())
		return fl_err(-EINVAL, "zstd level %d: must be %d..%d",
			      o.level, ZSTD_minCLevel(), ZSTD_maxCLevel());
	if (!o.threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		o.threads = n < 1 ? 1 : n > 8 ? 8 : (unsigned int)n;
	}

	rfd = open_regular(raw_path, &st, false);
	if (rfd < 0)
		return rfd;
	posix_fadvise(rfd, 0, 0, POSIX_FADV_SEQUENTIAL);

	h.version = IMAGE_VERSION;
	h.page_size = 4096;
	h.chunk_size = o.chunk_size;
	h.total_size = (uint64_t)st.st_size;
	h.chunk_count = (h.total_size + o.chunk_size - 1) / o.chunk_size;
	h.index_offset = IMAGE_HEADER_SIZE;
	h.level = (uint32_t)o.level;
	if (h.chunk_count > SIZE_MAX / IMAGE_ENTRY_SIZE) {
		ret = fl_err(-EFBIG, "%s: too large", raw_path);
		goto out;
	}
	ilen = (size_t)h.chunk_count * IMAGE_ENTRY_SIZE;

	/* Batches of about 4 MiB (cache sized), >= 2 chunks per thread. */
	batch = (4u << 20) / o.chunk_size;
	if (batch < 2 * o.threads)
		batch = 2 * o.threads;
	p.level = o.level;
	p.out_cap = ZSTD_compressBound(o.chunk_size);
	p.jobs = calloc(batch, sizeof(*p.jobs));
	index = calloc(h.chunk_count ? h.chunk_count : 1, sizeof(*index));
	ib = calloc(1, ilen ? ilen : 1);
	cctx = ZSTD_createCCtx();
	if (!p.jobs || !index || !ib || !cctx) {
		ret = fl_err(-ENOMEM, "%s: no memory", raw_path);
		goto out;
	}
	for (unsigned int k = 0; k < batch; k++) {
		p.jobs[k].in = malloc(o.chunk_size);
		p.jobs[k].out = malloc(p.out_cap);
		if (!p.jobs[k].in || !p.jobs[k].out) {
			ret = fl_err(-ENOMEM, "%s: no memory", raw_path);
			goto out;
		}
	}
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.go, NULL);
	pthread_cond_init(&p.done, NULL);
	workers = calloc(o.threads, sizeof(*workers));
	if (!workers) {
		ret = fl_err(-ENOMEM, "%s: no memory", raw_path);
		goto out;
	}
	for (unsigned int k = 0; k + 1 < o.threads; k++) {
		workers[k].p = &p;
		workers[k].cctx = ZSTD_createCCtx();
		if (!workers[k].cctx ||
		    pthread_create(&workers[k].tid, NULL, worker_main,
				   &workers[k])) {
			ZSTD_freeCCtx(workers[k].cctx);
			break;
		}
		nworkers++;
	}

	if (asprintf(&tmp, "%s.tmp.XXXXXX", image_path) < 0) {
		tmp = NULL;
		ret = -ENOMEM;
		goto out;
	}
	wfd = mkostemp(tmp, O_CLOEXEC);
	if (wfd < 0) {
		ret = fl_err(-errno, "%s: cannot create: %m", tmp);
		free(tmp);
		tmp = NULL;
		goto out;
	}
	fchmod(wfd, 0644);

	x.fd = rfd;
	x.size = h.total_size;
	pos = IMAGE_HEADER_SIZE + ilen;
	for (i = 0; i < h.chunk_count;) {
		unsigned int n = 0;
		bool work = false;

		for (; n < batch && i < h.chunk_count; n++, i++) {
			struct job *j = &p.jobs[n];
			uint64_t off = i * o.chunk_size;

			j->idx = i;
			j->len = h.total_size - off < o.chunk_size ?
				 (size_t)(h.total_size - off) : o.chunk_size;
			j->hole = !has_data(&x, off, off + j->len);
			if (j->hole) {
				j->kind = IMAGE_ZERO;
				j->hash = 0;
				continue;
			}
			work = true;
			ret = pread_full(rfd, j->in, j->len, off);
			if (ret < 0) {
				fl_err(ret, "%s: read at offset %llu: %s",
				       raw_path, (unsigned long long)off,
				       ret == -EIO ? "file shrank" :
				       strerror(-ret));
				goto out;
			}
		}
		p.njobs = n;
		if (work)
			pool_run(&p, nworkers, cctx);
		for (unsigned int k = 0; k < n; k++) {
			struct job *j = &p.jobs[k];
			struct image_entry *e = &index[j->idx];
			bool z = j->kind == IMAGE_ZSTD;
			const void *src = z ? j->out : j->in;
			size_t len = z ? j->out_len : j->len;

			e->kind = j->kind;
			e->hash = j->hash;
			if (j->kind == IMAGE_ZERO)
				continue;
			e->offset = pos;
			e->stored_len = (uint32_t)len;
			ret = pwrite_full(wfd, src, len, pos);
			if (ret < 0) {
				fl_err(ret, "%s: write: %s", tmp,
				       strerror(-ret));
				goto out;
			}
			pos += len;
		}
	}

	for (i = 0; i < h.chunk_count; i++)
		encode_entry(ib + i * IMAGE_ENTRY_SIZE, &index[i]);
	h.data_end = pos;
	h.index_hash = XXH64(ib, ilen, 0);
	encode_header(hb, &h);
	ret = pwrite_full(wfd, ib, ilen, IMAGE_HEADER_SIZE);
	if (!ret)
		ret = pwrite_full(wfd, hb, sizeof(hb), 0);
	if (!ret && ftruncate(wfd, (off_t)pos) < 0)
		ret = -errno;
	if (!ret && fdatasync(wfd) < 0)
		ret = -errno;
	if (ret < 0) {
		fl_err(ret, "%s: write: %s", tmp, strerror(-ret));
		goto out;
	}
	if (close(wfd) < 0) {
		wfd = -1;
		ret = fl_err(-errno, "%s: close: %m", tmp);
		goto out;
	}
	wfd = -1;
	if (rename(tmp, image_path) < 0) {
		ret = fl_err(-errno, "%s: cannot rename to %s: %m", tmp,
			     image_path);
		goto out;
	}
	free(tmp);
	tmp = NULL;
	if (info) {
		struct image img = { .hdr = h, .index = index,
				     .file_size = pos };

		tally(&img, info);
	}
	ret = 0;
out:
	if (workers) {
		pthread_mutex_lock(&p.mu);
		p.quit = true;
		pthread_cond_broadcast(&p.go);
		pthread_mutex_unlock(&p.mu);
		for (unsigned int k = 0; k < nworkers; k++) {
			pthread_join(workers[k].tid, NULL);
			ZSTD_freeCCtx(workers[k].cctx);
		}
		free(workers);
		pthread_mutex_destroy(&p.mu);
		pthread_cond_destroy(&p.go);
		pthread_cond_destroy(&p.done);
	}
	if (wfd >= 0)
		close(wfd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	if (p.jobs)
		for (unsigned int k = 0; k < batch; k++) {
			free(p.jobs[k].in);
			free(p.jobs[k].out);
		}
	free(p.jobs);
	ZSTD_freeCCtx(cctx);
	free(index);
	free(ib);
	close(rfd);
	return ret;
}
