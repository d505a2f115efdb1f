// SPDX-License-Identifier: Apache-2.0
/*
 * create.c - `faultline image create`: a raw memory file into a
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
#include "author/create.h"
#include "format/image.h"
#include "format/layout.h"
#include "store/chunk_store.h"
#include "author/registry.h"
#include "author/parent.h"
#include "store/store.h"
#include "util/error.h"
#include "util/io.h"
#include "util/zero.h"

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
	uint8_t sha[IMAGE_HASH_LEN];	/* into a store */
	bool exists;		/* into a store: there already, out_len bytes */
	int err;		/* into a store: cannot hash, or ask the store */
	bool put;		/* into a bucket: put by the worker, as: */
	bool wrote;		/* ours went in (not one put beside us) */
	uint64_t put_size;	/* the object's size in the bucket */
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
	struct store *store;	/* into a store, or NULL */
	/* the first store error of a worker: the others stop */
	atomic_bool failed;
	int err;		/* under mu */
	char why[512];
};

struct compressor {
	struct pool *p;
	pthread_t tid;
	ZSTD_CCtx *cctx;
};


/* A worker's store error: said once, and the others stop. */
static void pool_fail(struct pool *p, struct job *j, int ret)
{
	j->err = ret;
	pthread_mutex_lock(&p->mu);
	if (!p->err) {
		p->err = ret;
		snprintf(p->why, sizeof(p->why), "%s", fl_last_error());
	}
	pthread_mutex_unlock(&p->mu);
	atomic_store(&p->failed, true);
}

/*
 * The worker puts the object itself, so that the writes of a batch go
 * out side by side (a bucket's PUT is a round trip each; one at a time,
 * a distant bucket would bound the create), whatever the store.
 */
static void put_job(struct pool *p, struct job *j)
{
	bool z = j->kind == IMAGE_ZSTD;
	char name[128];
	int ret;

	if (!p->store || j->exists || j->err || j->kind == IMAGE_ZERO)
		return;
	store_chunk_name(j->sha, name, sizeof(name));
	ret = p->store->ops->put(p->store, name, z ? j->out : j->in,
				 z ? j->out_len : j->len, 0, &j->put_size,
				 &j->wrote);
	if (ret < 0)
		pool_fail(p, j, ret);
	else
		j->put = true;
}

static void compress_job(struct pool *p, struct job *j, ZSTD_CCtx *cctx)
{
	size_t n;

	j->kind = IMAGE_RAW;	/* until known */
	j->out_len = 0;
	j->exists = false;
	j->err = 0;
	j->put = j->wrote = false;
	if (j->hole || is_zero(j->in, j->len)) {
		j->kind = IMAGE_ZERO;
		j->hash = 0;
		return;
	}
	if (p->store) {
		uint64_t size;
		char name[128];
		int ret;

		if (atomic_load(&p->failed)) {	/* the create fails anyway */
			j->err = -ECANCELED;
			return;
		}
		j->err = image_sha256(j->in, j->len, j->sha);
		store_chunk_name(j->sha, name, sizeof(name));
		/* There already (another snapshot's): not compressed again. */
		ret = j->err ? -ENOENT :
		      p->store->ops->head(p->store, name, &size);
		if (ret < 0 && ret != -ENOENT) {	/* the store's error */
			pool_fail(p, j, ret);
			return;
		}
		if (ret == 0 && size && size <= j->len) {
			j->exists = true;
			j->out_len = (size_t)size;
			j->kind = size == j->len ? IMAGE_RAW : IMAGE_ZSTD;
			return;
		}
	} else {
		j->hash = XXH64(j->in, j->len, 0);
	}
	n = ZSTD_compressCCtx(cctx, j->out, p->out_cap, j->in, j->len,
			      p->level);
	/* Compression pays only if it saves at least 1/16 of the chunk. */
	if (!ZSTD_isError(n) && n < j->len - j->len / 16) {
		j->kind = IMAGE_ZSTD;
		j->out_len = n;
	} else {
		j->kind = IMAGE_RAW;
	}
	put_job(p, j);
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

/* One image being written: the raw file, the temporary, the pool. */
struct writer {
	const char *raw_path, *image_path;
	struct image_create_opts o;
	struct image_header h;
	struct image_entry *index;
	unsigned char *ib;		/* the encoded index */
	size_t ilen;
	struct pool p;
	struct compressor *workers;
	unsigned int nworkers, batch;
	bool pool_up;			/* its lock and conditions made */
	ZSTD_CCtx *cctx;		/* the calling thread's */
	struct extent x;
	int rfd, wfd;
	char *tmp;			/* the temporary's path, until renamed */
	uint64_t pos;			/* where the next chunk is written */
	uint8_t *held;			/* a diff's held-page map, or NULL */
	struct store *store;		/* into a store (o.store), or NULL */
	uint64_t new_chunks, new_bytes;
	bool upload;			/* image_path is remote: put the index */
};

/* Defaults filled in, and what a user can get wrong refused. */
static int writer_opts(struct writer *w, const struct image_create_opts *opts)
{
	if (opts)
		w->o = *opts;
	if (!w->o.chunk_size)
		w->o.chunk_size = IMAGE_DEFAULT_CHUNK;
	if (!w->o.level)
		w->o.level = IMAGE_DEFAULT_LEVEL;
	if (image_check_chunk(w->o.chunk_size))
		return fl_err(-EINVAL,
			      "chunk size %u: must be a power of two from 4K to 16M",
			      w->o.chunk_size);
	if (image_check_level(w->o.level))
		return fl_err(-EINVAL, "zstd level %d: must be %d..%d",
			      w->o.level, ZSTD_minCLevel(), ZSTD_maxCLevel());
	if (!w->o.threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		w->o.threads = n < 1 ? 1 : n > 8 ? 8 : (unsigned int)n;
	}
	return 0;
}

/* The header as far as the raw file's size tells it, and the index. */
static int writer_layout(struct writer *w, uint64_t size,
			 const struct image_header *parent)
{
	struct image_header *h = &w->h;

	h->version = w->o.store ? IMAGE_VERSION_STORE :
		     parent ? IMAGE_VERSION_DIFF : IMAGE_VERSION;
	h->header_size = w->o.store ? IMAGE_HEADER3_SIZE :
			 parent ? IMAGE_HEADER2_SIZE : IMAGE_HEADER_SIZE;
	h->entry_size = w->o.store ? IMAGE_ENTRY3_SIZE : IMAGE_ENTRY_SIZE;
	h->page_size = 4096;
	h->chunk_size = w->o.chunk_size;
	h->total_size = size;
	h->chunk_count = (size + w->o.chunk_size - 1) / w->o.chunk_size;
	h->index_offset = h->header_size;
	h->level = (uint32_t)w->o.level;
	if (parent) {
		const char *slash = strrchr(w->o.parent, '/');

		h->flags = IMAGE_FLAG_DIFF;
		h->parent_size = parent->total_size;
		memcpy(h->parent_id, parent->id, IMAGE_ID_LEN);
		snprintf(h->parent_name, sizeof(h->parent_name), "%s",
			 slash ? slash + 1 : w->o.parent);
		h->map_len = (image_pages(h) + 7) / 8;
	}
	if (w->o.store) {
		int ret = w->store->ops->relative(w->store, w->image_path,
						  h->store_path,
						  sizeof(h->store_path));

		if (ret < 0)
			return ret;
	}
	if (h->chunk_count > SIZE_MAX / h->entry_size - h->map_len)
		return fl_err(-EFBIG, "%s: too large", w->raw_path);
	w->ilen = (size_t)h->chunk_count * h->entry_size + h->map_len;
	w->index = calloc(h->chunk_count ? h->chunk_count : 1,
			  sizeof(*w->index));
	w->ib = calloc(1, w->ilen ? w->ilen : 1);
	if (h->map_len)
		w->held = w->ib + h->chunk_count * h->entry_size;
	return w->index && w->ib ? 0 :
	       fl_err(-ENOMEM, "%s: no memory", w->raw_path);
}

/*
 * A diff's held pages: every page its data extents (SEEK_DATA/SEEK_HOLE)
 * touch, a page written as zeros too; holes are pages not written.
 */
static int writer_map(struct writer *w)
{
	const uint64_t ps = w->h.page_size, size = w->h.total_size;
	uint64_t off = 0;

	while (off < size) {
		off_t d = lseek(w->rfd, (off_t)off, SEEK_DATA), h;

		if (d < 0 && errno == ENXIO)
			break;		/* holes to the end */
		if (d < 0)		/* no SEEK_DATA: all of it is data */
			d = (off_t)off;
		h = lseek(w->rfd, d, SEEK_HOLE);
		if (h < 0 || (uint64_t)h > size)
			h = (off_t)size;
		if (h <= d)
			return fl_err(-EIO, "%s: SEEK_HOLE at %lld: %s",
				      w->raw_path, (long long)d,
				      h < 0 ? strerror(errno) : "no progress");
		for (uint64_t p = (uint64_t)d / ps; p * ps < (uint64_t)h; p++)
			w->held[p / 8] |= (uint8_t)(1u << (p % 8));
		off = (uint64_t)h;
	}
	return 0;
}

/* Does a diff hold any page of [off, off+len)? */
static bool map_any(const struct writer *w, uint64_t off, uint64_t len)
{
	for (uint64_t p = off / w->h.page_size;
	     p * w->h.page_size < off + len; p++)
		if (w->held[p / 8] >> (p % 8) & 1)
			return true;
	return false;
}

/* Batches of about 4 MiB (cache sized), >= 2 chunks per thread. */
static int writer_pool(struct writer *w)
{
	struct pool *p = &w->p;

	w->batch = (4u << 20) / w->o.chunk_size;
	if (w->batch < 2 * w->o.threads)
		w->batch = 2 * w->o.threads;
	p->level = w->o.level;
	p->store = w->store;
	p->out_cap = ZSTD_compressBound(w->o.chunk_size);
	p->jobs = calloc(w->batch, sizeof(*p->jobs));
	w->cctx = ZSTD_createCCtx();
	w->workers = calloc(w->o.threads, sizeof(*w->workers));
	if (!p->jobs || !w->cctx || !w->workers)
		return fl_err(-ENOMEM, "%s: no memory", w->raw_path);
	for (unsigned int k = 0; k < w->batch; k++) {
		p->jobs[k].in = malloc(w->o.chunk_size);
		p->jobs[k].out = malloc(p->out_cap);
		if (!p->jobs[k].in || !p->jobs[k].out)
			return fl_err(-ENOMEM, "%s: no memory", w->raw_path);
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->go, NULL);
	pthread_cond_init(&p->done, NULL);
	w->pool_up = true;
	for (unsigned int k = 0; k + 1 < w->o.threads; k++) {
		struct compressor *c = &w->workers[k];

		c->p = p;
		c->cctx = ZSTD_createCCtx();
		if (!c->cctx ||
		    pthread_create(&c->tid, NULL, worker_main, c)) {
			ZSTD_freeCCtx(c->cctx);
			break;
		}
		w->nworkers++;
	}
	return 0;
}

/* The temporary the image is written to, renamed into place at the end. */
static int writer_open_tmp(struct writer *w)
{
	const char *td = getenv("TMPDIR");
	int n = w->upload ?	/* remote: the index is made here, then put */
		asprintf(&w->tmp, "%s/faultline-index.XXXXXX",
			 td && *td ? td : "/tmp") :
		asprintf(&w->tmp, "%s.tmp.XXXXXX", w->image_path);

	if (n < 0) {
		w->tmp = NULL;
		return -ENOMEM;
	}
	w->wfd = mkostemp(w->tmp, O_CLOEXEC);
	if (w->wfd < 0) {
		int ret = fl_err(-errno, "%s: cannot create: %m", w->tmp);

		free(w->tmp);
		w->tmp = NULL;
		return ret;
	}
	fchmod(w->wfd, 0644);
	return 0;
}

/* Read the next batch of chunks from chunk *i on; holes are not read. */
static int read_batch(struct writer *w, uint64_t *i, bool *work)
{
	const struct image_header *h = &w->h;
	unsigned int n = 0;

	*work = false;
	for (; n < w->batch && *i < h->chunk_count; n++, (*i)++) {
		struct job *j = &w->p.jobs[n];
		uint64_t off = *i * w->o.chunk_size;
		int ret;

		j->idx = *i;
		j->len = h->total_size - off < w->o.chunk_size ?
			 (size_t)(h->total_size - off) : w->o.chunk_size;
		j->hole = w->held ? !map_any(w, off, j->len) :
			  !has_data(&w->x, off, off + j->len);
		if (j->hole) {
			j->kind = IMAGE_ZERO;
			j->hash = 0;
			continue;
		}
		*work = true;
		ret = pread_full(w->rfd, j->in, j->len, off);
		if (ret < 0)
			return fl_err(ret, "%s: read at offset %llu: %s",
				      w->raw_path, (unsigned long long)off,
				      ret == -EIO ? "file shrank" :
				      strerror(-ret));
	}
	w->p.njobs = n;
	return 0;
}

/* Into a store: chunk j's object, unless there already. */
static int store_batch_one(struct writer *w, const struct job *j,
			   struct image_entry *e, const void *src, size_t len)
{
	uint64_t size = j->out_len;
	bool wrote = false;
	int ret;

	if (j->err && w->p.err)		/* the store's, said by a worker */
		return fl_err(w->p.err, "%s", w->p.why);
	if (j->err)
		return fl_err(j->err, "%s: chunk %llu: cannot hash",
			      w->raw_path, (unsigned long long)j->idx);
	memcpy(e->sha, j->sha, IMAGE_HASH_LEN);
	if (j->put) {			/* a worker put it into the store */
		size = j->put_size;
		wrote = j->wrote;
	} else if (!j->exists) {
		char name[128];

		store_chunk_name(j->sha, name, sizeof(name));
		ret = w->store->ops->put(w->store, name, src, len, 0, &size,
					 &wrote);
		if (ret < 0)
			return ret;
	}
	if (!size || size > j->len) {
		char name[128];

		store_chunk_name(j->sha, name, sizeof(name));
		return fl_err(-EBADMSG, "%s/%s: %llu bytes, not an object of a "
			      "%zu-byte chunk: remove it and create again",
			      w->o.store, name, (unsigned long long)size,
			      j->len);
	}
	e->stored_len = (uint32_t)size;
	e->kind = size == j->len ? IMAGE_RAW : IMAGE_ZSTD;
	if (wrote) {
		w->new_chunks++;
		w->new_bytes += size;
	}
	return 0;
}

/* Write a compressed batch out in order, noting each chunk's entry. */
static int write_batch(struct writer *w)
{
	for (unsigned int k = 0; k < w->p.njobs; k++) {
		struct job *j = &w->p.jobs[k];
		struct image_entry *e = &w->index[j->idx];
		bool z = j->kind == IMAGE_ZSTD;
		const void *src = z ? j->out : j->in;
		size_t len = z ? j->out_len : j->len;
		int ret;

		e->kind = j->kind;
		e->hash = j->hash;
		if (j->kind == IMAGE_ZERO)
			continue;
		if (w->store) {
			ret = store_batch_one(w, j, e, src, len);
			if (ret < 0)
				return ret;
			continue;
		}
		e->offset = w->pos;
		e->stored_len = (uint32_t)len;
		ret = pwrite_full(w->wfd, src, len, w->pos);
		if (ret < 0)
			return fl_err(ret, "%s: write: %s", w->tmp,
				      strerror(-ret));
		w->pos += len;
	}
	return 0;
}

/* Index and header in, synced, closed, renamed over image_path or put. */
static int writer_finish(struct writer *w)
{
	unsigned char hb[IMAGE_HEADER_MAX];
	int ret;

	if (w->store && (ret = w->store->ops->sync(w->store)) < 0)
		return ret;	/* objects before the index naming them */
	for (uint64_t i = 0; i < w->h.chunk_count; i++)
		image_encode_entry(w->ib + i * w->h.entry_size, &w->index[i],
				   w->store != NULL);
	w->h.data_end = w->pos;
	w->h.index_hash = XXH64(w->ib, w->ilen, 0);
	image_encode_header(hb, &w->h, w->ib, w->ilen);
	image_content_id(hb, w->ib, w->ilen, w->h.id);
	ret = pwrite_full(w->wfd, w->ib, w->ilen, w->h.header_size);
	if (!ret)
		ret = pwrite_full(w->wfd, hb, w->h.header_size, 0);
	if (!ret && ftruncate(w->wfd, (off_t)w->pos) < 0)
		ret = -errno;
	if (!ret && fdatasync(w->wfd) < 0)
		ret = -errno;
	if (ret < 0)
		return fl_err(ret, "%s: write: %s", w->tmp, strerror(-ret));
	ret = close(w->wfd);
	w->wfd = -1;
	if (ret < 0)
		return fl_err(-errno, "%s: close: %m", w->tmp);
	if (w->store)	/* registered, then renamed or put */
		ret = store_publish(w->store, w->tmp, w->image_path, w->o.parent,
				    hb, w->h.header_size, w->ib, w->ilen);
	else if (rename(w->tmp, w->image_path) < 0)
		ret = fl_err(-errno, "%s: cannot rename to %s: %m", w->tmp,
			     w->image_path);
	if (ret < 0 || w->upload)
		return ret;	/* an upload's temporary: writer_free's */
	free(w->tmp);
	w->tmp = NULL;
	return 0;
}

static void writer_free(struct writer *w)
{
	struct pool *p = &w->p;

	if (w->pool_up) {
		pthread_mutex_lock(&p->mu);
		p->quit = true;
		pthread_cond_broadcast(&p->go);
		pthread_mutex_unlock(&p->mu);
		for (unsigned int k = 0; k < w->nworkers; k++) {
			pthread_join(w->workers[k].tid, NULL);
			ZSTD_freeCCtx(w->workers[k].cctx);
		}
		pthread_mutex_destroy(&p->mu);
		pthread_cond_destroy(&p->go);
		pthread_cond_destroy(&p->done);
	}
	free(w->workers);
	if (w->wfd >= 0)
		close(w->wfd);
	if (w->tmp) {
		unlink(w->tmp);
		free(w->tmp);
	}
	for (unsigned int k = 0; p->jobs && k < w->batch; k++) {
		free(p->jobs[k].in);
		free(p->jobs[k].out);
	}
	free(p->jobs);
	ZSTD_freeCCtx(w->cctx);
	free(w->index);
	free(w->ib);
	if (w->rfd >= 0)
		close(w->rfd);
	store_close(w->store);	/* after the index's rename: gc may go */
}

/* Where the image goes with its store (store.h), and how it gets there. */
static int check_place(struct writer *w)
{
	w->upload = !store_spec_local(w->image_path);
	return store_image_place(w->image_path, w->o.store);
}

/* The image would replace its own input (the same file by another name). */
static int check_not_same(const char *raw_path, const char *image_path,
			  const struct stat *raw)
{
	struct stat st;

	if (stat(image_path, &st) == 0 && st.st_dev == raw->st_dev &&
	    st.st_ino == raw->st_ino)
		return fl_err(-EINVAL, "%s is %s itself: the image would "
			      "replace the memory file", image_path, raw_path);
	return 0;
}

int image_create(const char *raw_path, const char *image_path,
		 const struct image_create_opts *opts, struct image_info *info)
{
	struct writer w = { .raw_path = raw_path, .image_path = image_path,
			    .rfd = -1, .wfd = -1 };
	struct image_header parent;
	struct stat st[1];
	uint64_t i = 0;
	bool work;
	int ret = writer_opts(&w, opts);

	if (ret == 0)
		ret = image_refuse(raw_path, "image create", false);
	if (ret == 0)
		ret = check_place(&w);
	if (ret < 0)
		return ret;
	w.rfd = open_regular(raw_path, &st[0], false);
	if (w.rfd < 0)
		return w.rfd;
	ret = check_not_same(raw_path, image_path, &st[0]);
	if (!ret && w.o.parent)
		ret = create_open_parent(w.o.parent, image_path, raw_path, st,
					 &parent);
	if (ret < 0) {
		close(w.rfd);
		return ret;
	}
	posix_fadvise(w.rfd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (w.o.store) {	/* before the layout: it records its path */
		ret = registry_open_write(w.o.store, &w.store);
	}
	if (!ret)
		ret = writer_layout(&w, (uint64_t)st[0].st_size,
				    w.o.parent ? &parent : NULL);
	if (!ret && w.held)
		ret = writer_map(&w);
	if (!ret)
		ret = writer_pool(&w);
	if (!ret)
		ret = writer_open_tmp(&w);
	w.x = (struct extent){ .fd = w.rfd, .size = w.h.total_size };
	w.pos = w.h.header_size + w.ilen;
	while (!ret && i < w.h.chunk_count) {
		ret = read_batch(&w, &i, &work);
		if (!ret && work)
			pool_run(&w.p, w.nworkers, w.cctx);
		if (!ret)
			ret = write_batch(&w);
		if (!ret && w.o.progress)
			w.o.progress(w.o.progress_arg, i, w.h.chunk_count);
	}
	if (!ret)
		ret = writer_finish(&w);
	if (!ret && info) {
		struct image img = { .hdr = w.h, .index = w.index,
				     .held = w.held, .file_size = w.pos };

		image_tally(&img, info);
		info->new_chunks = w.new_chunks;
		info->new_bytes = w.new_bytes;
	}
	writer_free(&w);
	return ret;
}
