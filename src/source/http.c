// SPDX-License-Identifier: Apache-2.0
/*
 * http.c - a raw memory file or an image behind an http:// or https:// URL,
 * read with range requests (transfers in store/http_xfer.c).
 *
 * Decisions: fixed 512 KiB aligned blocks, so the local cache
 * (store/http_cache.c) and a small in-memory cache of recent blocks work per
 * block; the object's validator is learnt at open and every block must
 * match it, so an object replaced under a restore fails the read, never
 * mixes into it.  The full story (retries, deadlines, validators, secrets
 * in URLs) is in docs/architecture.md, Sources.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <xxhash.h>

#include "faultline.h"
#include "util/error.h"
#include "util/io.h"
#include "store/http_cache.h"
#include "format/image.h"
#include "source/impl.h"
#include "store/http_state.h"
#include "util/clock.h"

#define HTTP_SLOTS	16		/* in-memory blocks for partial reads */

enum { SLOT_EMPTY, SLOT_FILLING, SLOT_READY };

struct xfer_slot {
	void *buf;		/* HTTP_BLOCK bytes, allocated on first use */
	uint64_t block;
	uint64_t used;		/* LRU clock */
	unsigned int pins;
	int state;
};

/* The source: its object's origin, and recent blocks in memory. */
struct source_http {
	struct fl_source base;
	struct http_origin o;	/* o.size is base.size; o.note base.note */
	uint64_t key;		/* the object's name in the local cache */
	pthread_mutex_t mu;	/* guards the slots' bookkeeping */
	uint64_t clock;
	struct xfer_slot slots[HTTP_SLOTS];
};

#define to_http(s) ((struct source_http *)(s))

/* ---- reads ---------------------------------------------------------------- */

/* What one block of a read needs. */
struct piece {
	uint64_t block;
	size_t blen;		/* the block's length (the last may be short) */
	size_t from, n;		/* the part of the block the read wants */
	char *out;		/* where that part goes */
	char *dst;		/* where the whole block is fetched to */
	struct xfer_slot *slot;	/* dst is this slot's buffer */
	bool tmp;		/* dst is a private buffer */
	bool have;
};

static size_t block_len(const struct source_http *h, uint64_t b)
{
	uint64_t start = b * HTTP_BLOCK, left = h->base.size - start;

	return left < HTTP_BLOCK ? (size_t)left : HTTP_BLOCK;
}

/* Serve p from memory, or claim a slot for it (mu held). */
static void plan_piece(struct source_http *h, struct piece *p)
{
	struct xfer_slot *victim = NULL;

	for (int k = 0; k < HTTP_SLOTS; k++) {
		struct xfer_slot *sl = &h->slots[k];

		if (sl->state == SLOT_READY && sl->block == p->block) {
			sl->pins++;
			sl->used = ++h->clock;
			p->slot = sl;
			p->have = true;
			return;
		}
		if (!sl->pins && sl->state != SLOT_FILLING &&
		    (!victim || sl->state == SLOT_EMPTY ||
		     (victim->state == SLOT_READY && sl->used < victim->used)))
			victim = sl;
	}
	if (p->n == p->blen)
		return;		/* fetched straight into the caller's buffer */
	if (victim && (victim->buf || (victim->buf = malloc(HTTP_BLOCK)))) {
		victim->state = SLOT_FILLING;
		victim->block = p->block;
		victim->pins = 1;
		p->slot = victim;
		p->dst = victim->buf;
	}
}

static int read_pieces(struct source_http *h, struct piece *ps, int np,
		      uint64_t deadline)
{
	struct xfer xs[HTTP_BATCH];
	int nx = 0, ret = 0;

	pthread_mutex_lock(&h->mu);
	for (int i = 0; i < np; i++)
		plan_piece(h, &ps[i]);
	pthread_mutex_unlock(&h->mu);

	for (int i = 0; i < np; i++) {
		struct piece *p = &ps[i];

		if (p->have) {
			memcpy(p->out, (char *)p->slot->buf + p->from, p->n);
			continue;
		}
		if (!p->dst && p->n == p->blen) {
			p->dst = p->out;
		} else if (!p->dst) {
			p->dst = malloc(p->blen);
			p->tmp = true;
			if (!p->dst) {
				ret = -ENOMEM;
				goto out;
			}
		}
		if (h->o.cache && http_cache_get(h->o.cache, h->key, p->block,
						 p->dst, p->blen)) {
			atomic_fetch_add(&h->base.bytes_cached, p->blen);
			p->have = true;
			continue;
		}
		xs[nx] = (struct xfer){
			.off = p->block * HTTP_BLOCK, .dst = p->dst,
			.len = p->blen, .whole = p->blen == h->base.size,
		};
		nx++;
	}
	if (nx)
		ret = http_fetch(&h->o, xs, nx, deadline);
	for (int i = 0, k = 0; i < np; i++) {
		struct piece *p = &ps[i];

		if (p->have)
			continue;
		if (xs[k++].state != X_DONE)
			continue;
		p->have = true;
		atomic_fetch_add(&h->base.bytes_fetched, p->blen);
		if (h->o.cache)
			http_cache_put(h->o.cache, h->key, p->block, p->dst,
				       p->blen);
	}
	for (int i = 0; i < np; i++) {
		struct piece *p = &ps[i];

		if (p->have && p->dst && p->dst != p->out)
			memcpy(p->out, p->dst + p->from, p->n);
	}
out:
	pthread_mutex_lock(&h->mu);
	for (int i = 0; i < np; i++) {
		struct xfer_slot *sl = ps[i].slot;

		if (!sl)
			continue;
		if (sl->state == SLOT_FILLING) {
			sl->state = ps[i].have ? SLOT_READY : SLOT_EMPTY;
			sl->used = ++h->clock;
		}
		sl->pins--;
	}
	pthread_mutex_unlock(&h->mu);
	for (int i = 0; i < np; i++)
		if (ps[i].tmp)
			free(ps[i].dst);
	return ret;
}

static int http_read(struct fl_source *s, void *buf, size_t len, uint64_t off)
{
	struct source_http *h = to_http(s);
	struct piece ps[HTTP_BATCH];
	uint64_t deadline = http_deadline();
	char *out = buf;

	if (off > s->size || len > s->size - off)
		return -ERANGE;
	while (len) {
		int np = 0, ret;

		while (len && np < HTTP_BATCH) {
			struct piece *p = &ps[np++];
			uint64_t b = off / HTTP_BLOCK;

			*p = (struct piece){ .block = b, .blen = block_len(h, b),
					     .from = off - b * HTTP_BLOCK,
					     .out = out };
			p->n = p->blen - p->from < len ? p->blen - p->from :
							 len;
			out += p->n;
			off += p->n;
			len -= p->n;
		}
		ret = read_pieces(h, ps, np, deadline);
		if (ret < 0)
			return ret;
	}
	return 0;
}

static void http_destroy(struct fl_source *s)
{
	struct source_http *h = to_http(s);

	for (int k = 0; k < HTTP_SLOTS; k++)
		free(h->slots[k].buf);
	http_cache_close(h->o.cache);
	curl_slist_free_all(h->o.cond);
	pthread_mutex_destroy(&h->mu);
	if (h->o.s3) {
		s3_target_free(h->o.s3);
		free(h->o.s3);
	}
	free(h->o.url);
	free(h);
}

static const struct fl_source_ops http_ops = {
	.name = "http",
	.read = http_read,
	.destroy = http_destroy,
};

/* ---- open ----------------------------------------------------------------- */

/* The URL for messages: no user info, no query string, no fragment. */
static void url_name(const char *url, char *buf, size_t n)
{
	const char *host = strstr(url, "://");
	const char *at, *path;
	size_t keep;

	host = host ? host + 3 : url;
	path = host + strcspn(host, "/?#");
	at = memrchr(host, '@', (size_t)(path - host));	/* "p@ss@host" */
	keep = strcspn(url, "?#");
	if (at)
		snprintf(buf, n, "%.*s%.*s", (int)(host - url), url,
			 (int)(url + keep - (at + 1)), at + 1);
	else
		snprintf(buf, n, "%.*s", (int)keep, url);
	if (url[keep] == '?')
		snprintf(buf + strlen(buf), n - strlen(buf), "?...");
}

/* Query parameters that sign a URL rather than name the object. */
static bool signing_param(const char *p, size_t len)
{
	static const char *const prefixes[] = {
		"X-Amz-", "X-Goog-", "AWSAccessKeyId=", "Signature=",
		"Expires=", "Policy=", "Key-Pair-Id=", "GoogleAccessId=",
	};

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(*prefixes); i++) {
		size_t pl = strlen(prefixes[i]);

		if (len >= pl && !strncasecmp(p, prefixes[i], pl))
			return true;
	}
	return false;
}

/*
 * The object's cache key: its URL without signing parameters (a presigned
 * URL is re-signed for every restore), its size, and its validator.
 */
static uint64_t cache_key(const char *url, uint64_t size,
			  const char *validator)
{
	XXH64_state_t *st = XXH64_createState();
	size_t q = strcspn(url, "?#");
	const char *p = url + q;
	uint64_t key;

	XXH64_reset(st, 0);
	XXH64_update(st, url, q);
	if (*p == '?') {
		p++;
		while (*p && *p != '#') {
			size_t n = strcspn(p, "&#");

			if (!signing_param(p, n)) {
				XXH64_update(st, "&", 1);
				XXH64_update(st, p, n);
			}
			p += n;
			if (*p == '&')
				p++;
		}
	}
	XXH64_update(st, &size, sizeof(size));
	XXH64_update(st, validator, strlen(validator));
	key = XXH64_digest(st);
	XXH64_freeState(st);
	return key;
}

/*
 * Keep the probe's ETag and Last-Modified, make the precondition header
 * every block GET carries, and the cache key.
 */
static int set_validator(struct source_http *h, const struct xfer *x)
{
	char line[sizeof(h->o.etag) + 32], validator[sizeof(h->o.etag) + 8];

	memcpy(h->o.etag, x->etag, sizeof(h->o.etag));
	memcpy(h->o.lm, x->lm, sizeof(h->o.lm));
	line[0] = 0;
	if (h->o.etag[0] && strncmp(h->o.etag, "W/", 2))
		snprintf(line, sizeof(line), "If-Match: %s", h->o.etag);
	else if (h->o.lm[0])	/* If-Match compares strongly: never a weak tag */
		snprintf(line, sizeof(line), "If-Unmodified-Since: %s", h->o.lm);
	if (line[0] && !(h->o.cond = curl_slist_append(NULL, line)))
		return -ENOMEM;
	/* as before these checks, so existing caches stay valid */
	if (h->o.etag[0])
		snprintf(validator, sizeof(validator), "etag %s", h->o.etag);
	else if (h->o.lm[0])
		snprintf(validator, sizeof(validator), "lm %s", h->o.lm);
	else
		validator[0] = 0;
	h->key = cache_key(h->o.url, h->base.size, validator);
	return 0;
}

/* ---- the object's identity beside the cache ------------------------------ */

/*
 * DIR/KKKKKKKKKKKKKKKK.object (K: the URL without signing parameters) holds
 * the size and validator the object had when it was last opened, so that a
 * warm cache can serve a restore while the origin is down: the cache's own
 * files are keyed by the same size and validator, so what it serves is
 * that object's bytes and nothing else.
 */
static void identity_path(const char *url, char *buf, size_t n)
{
	snprintf(buf, n, "%016" PRIx64 ".object", cache_key(url, 0, "object"));
}

/* DIR (opened as given) and a file in it opened beneath it; NULL or f. */
static FILE *identity_open(const char *dir, const char *name, bool write,
			   int *dfd)
{
	FILE *f = NULL;
	int fd = -1;

	*dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*dfd >= 0)
		fd = io_open_beneath(*dfd, name, write ? O_WRONLY | O_CREAT |
				     O_TRUNC : O_RDONLY, 0600);
	if (fd >= 0 && !(f = fdopen(fd, write ? "w" : "r")))
		close(fd);
	if (!f && *dfd >= 0)
		close(*dfd);
	return f;
}

static void identity_save(const char *dir, const struct source_http *h)
{
	char path[64], tmp[96];
	FILE *f;
	int dfd;

	identity_path(h->o.url, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	f = identity_open(dir, tmp, true, &dfd);
	if (!f)
		return;		/* only costs an offline restore later */
	fprintf(f, "size %" PRIu64 "\netag %s\nlm %s\n", h->base.size,
		h->o.etag, h->o.lm);
	if (fclose(f) != 0 || renameat(dfd, tmp, dfd, path) < 0)
		unlinkat(dfd, tmp, 0);
	close(dfd);
}

/* The identity as x's headers would have given it; 0 or -ENOENT. */
static int identity_load(const char *dir, const char *url, uint64_t *size,
			 struct xfer *x)
{
	char path[64], line[256];
	int have = 0, dfd;
	FILE *f;

	identity_path(url, path, sizeof(path));
	f = identity_open(dir, path, false, &dfd);
	if (!f)
		return -ENOENT;
	close(dfd);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "size %" SCNu64, size) == 1)
			have = 1;
		else if (!strncmp(line, "etag ", 5))
			snprintf(x->etag, sizeof(x->etag), "%.*s",
				 (int)sizeof(x->etag) - 1, line + 5);
		else if (!strncmp(line, "lm ", 3))
			snprintf(x->lm, sizeof(x->lm), "%.*s",
				 (int)sizeof(x->lm) - 1, line + 3);
	}
	fclose(f);
	return have && (x->etag[0] || x->lm[0]) ? 0 : -ENOENT;
}

/*
 * The origin gave no answer at open (err): with a cache that holds this
 * object's identity and its first block, serve from the cache, and say so
 * in the source's name.  Blocks it lacks are still asked of the origin.
 */
static int open_offline(struct source_http *h, const struct fl_source_opts *o,
			char *first, struct xfer *x, int err)
{
	char why[sizeof(h->o.name)];
	uint64_t size = 0;
	void *blk;
	bool hit;

	memset(x, 0, sizeof(*x));
	if (identity_load(o->cache_dir, h->o.url, &size, x) < 0 || !size)
		return err;
	h->base.size = h->o.size = size; /* set_validator's key needs it */
	if (set_validator(h, x) < 0 || http_cache_open(o->cache_dir, o->cache_max_bytes ?
			    o->cache_max_bytes : FL_DEFAULT_CACHE_MAX,
			    &h->base.note, &h->o.cache) < 0)
		return err;
	blk = malloc(HTTP_BLOCK);
	hit = blk && http_cache_get(h->o.cache, h->key, 0, blk, size < HTTP_BLOCK ?
				    size : HTTP_BLOCK);
	if (hit) {
		memcpy(first, blk, size < HTTP_PROBE ? size : HTTP_PROBE);
		x->got = size < HTTP_PROBE ? size : HTTP_PROBE;
	}
	free(blk);
	if (!hit)
		return err;
	snprintf(why, sizeof(why), "%s (origin unreachable at open: from "
		 "the cache)", h->o.name);
	snprintf(h->o.name, sizeof(h->o.name), "%s", why);
	snprintf(h->base.desc, sizeof(h->base.desc), "%s", why);
	return 0;
}

/* The open's answer was not the object's first bytes: -EIO saying so. */
static int status_error(const struct source_http *h, const struct xfer *x)
{
	char why[CURL_ERROR_SIZE];

	if (http_status_text(x, why, sizeof(why)))	/* S3's own word */
		return fl_err(-EIO, "%s: at open: %s", h->o.name, why);
	return fl_err(-EIO, "%s: %s at open (expected 206, or 200 with a length)",
		      h->o.name, why);
}

/*
 * url, or with s3 (taken over, also on failure) the s3:// source spec
 * whose URL it is.
 */
static int http_open(const char *url, const char *spec, struct s3_target *s3,
		     const struct fl_source_opts *o, struct fl_source **out)
{
	struct source_http *h;
	char first[HTTP_PROBE];
	struct xfer x;
	uint64_t size;
	int ret;

	h = calloc(1, sizeof(*h));
	if (!h || !(h->o.url = strdup(url))) {
		free(h);
		if (s3) {
			s3_target_free(s3);
			free(s3);
		}
		return -ENOMEM;
	}
	h->o.s3 = s3;
	if (s3)
		snprintf(h->o.name, sizeof(h->o.name), "%s", spec);
	else
		url_name(url, h->o.name, sizeof(h->o.name));
	pthread_mutex_init(&h->mu, NULL);
	source_init(&h->base, &http_ops, 0, h->o.name);
	h->base.remote = true;
	source_set_note(&h->base, o);
	h->o.note = &h->base.note;

	x = (struct xfer){ .off = 0, .dst = first, .len = sizeof(first),
			   .probe = true };
	ret = http_fetch(&h->o, &x, 1, http_deadline());
	if (ret < 0 && !x.status && o->cache_dir &&
	    open_offline(h, o, first, &x, ret) == 0)
		goto opened;
	if (ret < 0) {
		if (x.status >= 400)
			status_error(h, &x);
		goto fail;
	}
	if (x.status == 206 && x.total != UINT64_MAX) {
		size = x.total;
	} else if (x.status == 200) {
		if (x.clen < 0) {
			ret = fl_err(-EIO, "%s: HTTP 200 without a length at open",
				     h->o.name);
			goto fail;
		}
		size = (uint64_t)x.clen;
	} else if (x.status == 416 && x.total != UINT64_MAX) {
		size = x.total;	/* shorter than the probe */
	} else {
		ret = status_error(h, &x);
		goto fail;
	}
	h->base.size = h->o.size = size;
	ret = set_validator(h, &x);
	if (ret < 0)
		goto fail;
	if (o->cache_dir && h->o.cond) {
		ret = http_cache_open(o->cache_dir, o->cache_max_bytes ?
				      o->cache_max_bytes : FL_DEFAULT_CACHE_MAX,
				      &h->base.note, &h->o.cache);
		if (ret < 0)
			goto fail;
		identity_save(o->cache_dir, h);
	} else if (o->cache_dir) {
		/* No validator, so no cache: nor may an old identity serve */
		int dfd = open(o->cache_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		char path[64];

		identity_path(h->o.url, path, sizeof(path));
		if (dfd >= 0) {
			unlinkat(dfd, path, 0);
			close(dfd);
		}
	}
opened:
	size = h->base.size;
	if (size >= IMAGE_MAGIC_LEN && x.got >= IMAGE_MAGIC_LEN &&
	    !memcmp(first, IMAGE_MAGIC, IMAGE_MAGIC_LEN))
		/* an s3:// image's store is found from its spec: signed too */
		return source_image_over(&h->base, h->o.name,
					 h->o.s3 ? h->o.name : h->o.url, o, out);
	*out = &h->base;
	return 0;
fail:
	http_destroy(&h->base);
	return ret;
}

int source_http_open(const char *url, const struct fl_source_opts *o,
		     struct fl_source **out)
{
	int ret = http_init(url);

	if (ret < 0)
		return ret;
	return http_open(url, NULL, NULL, o, out);
}

int source_s3_open(const char *spec, const struct fl_source_opts *o,
		   struct fl_source **out)
{
	struct s3_target *t;
	int ret = http_init(spec);

	if (ret < 0)
		return ret;
	t = malloc(sizeof(*t));
	if (!t)
		return -ENOMEM;
	ret = s3_target_get(spec, t);
	if (ret < 0) {
		free(t);
		return ret;
	}
	return http_open(t->url, spec, t, o, out);
}
