/*
 * image_write.c - `faultline image create`: a raw memory file into a
 * compressed chunked image (docs/image-format.md).
 *
 * Decisions: the index sits right after the header and its size follows
 * from the header alone, so the writer reserves it, streams chunks after
 * it, and fills header and index in at the end before an atomic rename.
 * Holes are never read (SEEK_DATA); batches of chunks are compressed on a
 * small pool of threads and written out in order.
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
#include "format/image.h"
#include "format/layout.h"
#include "util/error.h"
#include "util/io.h"
#include "util/zero.h"

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

struct compressor {
	struct pool *p;
	pthread_t tid;
	ZSTD_CCtx *cctx;
};


static void compress_job(struct pool *p, struct job *j, ZSTD_CCtx *cctx)
{
	size_t n;

	j->out_len = 0;
	if (j->hole || is_zero(j->in, j->len)) {
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
	struct compressor *w = arg;
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
	struct compressor *workers = NULL;
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

		image_tally(&img, info);
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
