// SPDX-License-Identifier: Apache-2.0
/*
 * proto_fc.c - parse and validate Firecracker's UFFD handshake.
 *
 * The message is the JSON text of an array of
 *   {"base_host_virt_addr": u64, "size": u64, "offset": u64,
 *    "page_size": u64, "page_size_kib": u64}
 * with no length prefix and no terminator.  json-c's tokener is fed bytes as
 * they arrive and says when the array is complete.  page_size wins over
 * page_size_kib (which, despite its name, carries bytes); with neither the
 * page size is 4096.  Everything is checked before anything is served: types,
 * alignment, page size, overflow, the memory file's bounds and overlaps.
 * Below the parser, Firecracker as the daemon's protocol (proto.h): exactly
 * one fd, the uffd; one client; nothing sent while serving; what the
 * supervisor keeps of an unfinished handshake is the bytes fed so far (a
 * json-c tokener cannot be saved, only fed again).
 */
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/proto.h"
#include "daemon/proto_fc.h"
#include "util/error.h"

struct fc_parser {
	json_tokener *tok;
	size_t total;
	bool started;		/* the opening '[' was seen */
};

int fc_parser_new(struct fc_parser **out)
{
	struct fc_parser *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->tok = json_tokener_new_ex(8);
	if (!p->tok) {
		free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void fc_parser_free(struct fc_parser *p)
{
	if (!p)
		return;
	json_tokener_free(p->tok);
	free(p);
}

/* Short printable rendering of a JSON value for messages (ASCII only). */
static const char *show(json_object *v)
{
	static __thread char buf[48];
	const char *s = v ? json_object_to_json_string_ext(v,
					JSON_C_TO_STRING_PLAIN) : "missing";

	snprintf(buf, sizeof(buf), "%.40s%s", s, strlen(s) > 40 ? "..." : "");
	for (char *c = buf; *c; c++)	/* a client's bytes, into our log */
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			*c = '?';
	return buf;
}

/* Field key of region i as a u64; absent is -ENOENT. */
static int get_u64(json_object *obj, int i, const char *key, uint64_t *out)
{
	json_object *v;

	if (!json_object_object_get_ex(obj, key, &v) || !v)
		return -ENOENT;
	if (!json_object_is_type(v, json_type_int))
		return fl_err(-EINVAL,
			      "handshake region %d: field '%s' must be an unsigned integer, got %s",
			      i, key, show(v));
	errno = 0;
	if (json_object_get_int64(v) < 0)
		return fl_err(-EINVAL,
			      "handshake region %d: field '%s' must not be negative, got %s",
			      i, key, show(v));
	*out = json_object_get_uint64(v);
	/* json-c saturates numbers beyond 2^64-1; none of ours can be that. */
	if (errno || *out == UINT64_MAX)
		return fl_err(-EINVAL,
			      "handshake region %d: field '%s' out of range (above 2^64-2): %s",
			      i, key, show(v));
	return 0;
}

static int need_u64(json_object *obj, int i, const char *key, uint64_t *out)
{
	int ret = get_u64(obj, i, key, out);

	if (ret == -ENOENT)
		return fl_err(-EINVAL, "handshake region %d: field '%s' is missing",
			      i, key);
	return ret;
}

static int parse_region(json_object *obj, int i, uint64_t src_size,
			struct fl_region_desc *d)
{
	uint64_t ps = 4096;
	int ret;

	if (!json_object_is_type(obj, json_type_object))
		return fl_err(-EINVAL,
			      "handshake region %d: must be an object, got %s",
			      i, show(obj));
	memset(d, 0, sizeof(*d));
	if ((ret = need_u64(obj, i, "base_host_virt_addr", &d->addr)) < 0 ||
	    (ret = need_u64(obj, i, "size", &d->len)) < 0 ||
	    (ret = need_u64(obj, i, "offset", &d->src_offset)) < 0)
		return ret;
	ret = get_u64(obj, i, "page_size", &ps);
	if (ret == -ENOENT)
		ret = get_u64(obj, i, "page_size_kib", &ps);
	if (ret < 0 && ret != -ENOENT)
		return ret;
	d->page_size = ps;
	if (ps != 4096 && ps != (2u << 20))
		return fl_err(-EINVAL,
			      "handshake region %d: page_size %" PRIu64 ": must be 4096 or 2097152",
			      i, ps);
	if (!d->len || d->len % ps)
		return fl_err(-EINVAL,
			      "handshake region %d: size %" PRIu64 ": must be a non-zero multiple of page_size %" PRIu64,
			      i, d->len, ps);
	if (d->addr % ps)
		return fl_err(-EINVAL,
			      "handshake region %d: base_host_virt_addr 0x%" PRIx64 ": not aligned to page_size %" PRIu64,
			      i, d->addr, ps);
	if (d->addr + d->len < d->addr || d->addr + d->len > (1ull << 57))
		return fl_err(-EINVAL,
			      "handshake region %d: base_host_virt_addr 0x%" PRIx64 " + size %" PRIu64 ": outside the address space",
			      i, d->addr, d->len);
	if (d->src_offset % 4096)
		return fl_err(-EINVAL,
			      "handshake region %d: offset %" PRIu64 ": not page aligned",
			      i, d->src_offset);
	if (d->src_offset > src_size || d->len > src_size - d->src_offset)
		return fl_err(-EINVAL,
			      "handshake region %d: offset %" PRIu64 " + size %" PRIu64 ": beyond the memory file (%" PRIu64 " bytes)",
			      i, d->src_offset, d->len, src_size);
	return 0;
}

static int check_overlaps(const struct fl_region_desc *d, int n)
{
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			if (d[i].addr < d[j].addr + d[j].len &&
			    d[j].addr < d[i].addr + d[i].len)
				return fl_err(-EINVAL,
					      "handshake region %d: base_host_virt_addr 0x%" PRIx64 " overlaps region %d",
					      i, d[i].addr, j);
	return 0;
}

static int parse_array(json_object *arr, uint64_t src_size,
		       struct fl_region_desc *out, int max)
{
	if (!json_object_is_type(arr, json_type_array))
		return fl_err(-EINVAL, "handshake: expected a JSON array of regions, got %s",
			      show(arr));
	size_t n = json_object_array_length(arr);

	if (n == 0)
		return fl_err(-EINVAL, "handshake: the region array is empty");
	if (n > (size_t)max || n > FC_REGIONS_MAX)
		return fl_err(-E2BIG, "handshake: %zu regions: at most %d allowed",
			      n, max < FC_REGIONS_MAX ? max : FC_REGIONS_MAX);
	for (size_t i = 0; i < n; i++) {
		int ret = parse_region(json_object_array_get_idx(arr, i),
				       (int)i, src_size, &out[i]);

		if (ret < 0)
			return ret;
	}
	int ret = check_overlaps(out, (int)n);

	return ret < 0 ? ret : (int)n;
}

/* JSON's whitespace; not strchr(), which finds a NUL byte in any string. */
static bool is_json_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/*
 * A client's byte for the log: '[' when printable, else \xNN, so that no
 * client can write terminal escapes (or newlines) into the daemon's log.
 */
static const char *byte_desc(char c, char buf[8])
{
	unsigned char u = (unsigned char)c;

	if (u >= 0x20 && u < 0x7f && u != '\\' && u != '\'')
		snprintf(buf, 8, "'%c'", c);
	else
		snprintf(buf, 8, "'\\x%02x'", u);
	return buf;
}

int fc_parser_feed(struct fc_parser *p, const char *buf, size_t len,
		   uint64_t src_size, struct fl_region_desc *out, int max)
{
	/*
	 * The message is an array: say so at its first byte rather than wait
	 * for the end of a number or literal that may never come.
	 */
	for (size_t i = 0; !p->started && i < len; i++) {
		char what[8];

		if (is_json_space(buf[i]))
			continue;
		if (buf[i] != '[')
			return fl_err(-EINVAL,
				      "handshake: expected a JSON array of regions, got %s at byte %zu",
				      byte_desc(buf[i], what), p->total + i);
		p->started = true;
	}
	p->total += len;
	if (p->total > FC_HANDSHAKE_MAX)
		return fl_err(-E2BIG, "handshake: longer than %d bytes",
			      FC_HANDSHAKE_MAX);

	json_object *v = json_tokener_parse_ex(p->tok, buf, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(p->tok);

	if (!v && jerr == json_tokener_continue)
		return -EAGAIN;
	if (!v)
		return fl_err(-EINVAL, "handshake: not valid JSON: %s at byte %zu",
			      json_tokener_error_desc(jerr),
			      p->total - len + json_tokener_get_parse_end(p->tok));

	size_t used = json_tokener_get_parse_end(p->tok);
	int ret = 0;

	for (size_t i = used; i < len; i++)
		if (!strchr(" \t\r\n", buf[i]))
			ret = fl_err(-EINVAL, "handshake: unexpected bytes after the JSON array");
	if (ret == 0)
		ret = parse_array(v, src_size, out, max);
	json_object_put(v);
	return ret;
}

/* ---- the daemon's protocol (proto.h) ------------------------------------ */

struct fc_state {
	struct fc_parser *p;
	uint64_t src_size;
	char *seen;		/* every byte fed: what keep() hands over */
	size_t nseen;
	int uffd;		/* the one fd, until client() hands it on */
	int nfds;		/* fds received in all */
	int nregs;		/* > 0: complete */
	bool handed;		/* client() gave the uffd to the session */
	struct fl_region_desc regs[FC_REGIONS_MAX];
};

static int fc_open(void **out, uint64_t src_size, const void *arg)
{
	(void)arg;
	struct fc_state *st = calloc(1, sizeof(*st));

	if (!st || fc_parser_new(&st->p) < 0) {
		free(st);
		return -ENOMEM;
	}
	st->src_size = src_size;
	st->uffd = -1;
	*out = st;
	return 0;
}

static void fc_free(void *arg)
{
	struct fc_state *st = arg;

	if (!st)
		return;
	if (st->uffd >= 0)
		close(st->uffd);
	fc_parser_free(st->p);
	free(st->seen);
	free(st);
}

static int fc_feed(void *arg, const char *buf, size_t len, const int *fds,
		   int nfds)
{
	struct fc_state *st = arg;

	for (int i = 0; i < nfds; i++, st->nfds++) {
		if (st->uffd < 0)
			st->uffd = fds[i];
		else
			close(fds[i]);
	}
	if (st->nfds > 1)
		return fl_err(-EINVAL, "%d fds in SCM_RIGHTS, expected "
			      "exactly one", st->nfds);
	if (st->nregs)
		return 1;
	if (!len)
		return 0;
	/* Kept for the supervisor; the parser refuses more than this. */
	if (st->nseen + len <= FC_HANDSHAKE_MAX + 4096) {
		char *n = realloc(st->seen, st->nseen + len);

		if (!n)
			return fl_err(-ENOMEM, "out of memory");
		memcpy(n + st->nseen, buf, len);
		st->seen = n;
		st->nseen += len;
	}
	int ret = fc_parser_feed(st->p, buf, len, st->src_size, st->regs,
				 FC_REGIONS_MAX);

	if (ret == -EAGAIN)
		return 0;
	if (ret < 0)
		return ret;
	st->nregs = ret;
	return 1;
}

static int fc_client(void *arg, int i, struct proto_client *out)
{
	struct fc_state *st = arg;

	if (i != 0 || !st->nregs)
		return -EINVAL;
	*out = (struct proto_client){ .uffd = st->uffd, .pid = 0,
				      .nregions = st->nregs,
				      .regions = st->regs };
	st->uffd = -1;	/* the session's now */
	st->handed = true;
	return 0;
}

/*
 * Until the session has the uffd: the bytes fed and the uffd (a next
 * server feeds them again, and serves a handshake that was complete); a
 * session serving keeps nothing here (its regions are the session's).
 */
static int fc_keep(void *arg, struct proto_keep *k)
{
	struct fc_state *st = arg;

	*k = (struct proto_keep){ 0 };
	if (st->handed)
		return 0;
	if (st->nseen) {
		k->blob = malloc(st->nseen);
		if (!k->blob)
			return -ENOMEM;
		memcpy(k->blob, st->seen, st->nseen);
		k->len = st->nseen;
	}
	if (st->uffd >= 0)
		k->fds[k->nfds++] = st->uffd;
	return 0;
}

static int fc_restore(void *st, const void *blob, size_t len,
		      const int *fds, int nfds)
{
	return fc_feed(st, blob, len, fds, nfds);
}

const struct proto_ops proto_fc = {
	.name		= "firecracker",
	.max_fds	= 1,
	.unfinished	= "incomplete JSON array",
	.open		= fc_open,
	.feed		= fc_feed,
	.client		= fc_client,
	.input		= NULL,	/* Firecracker sends nothing more */
	.keep		= fc_keep,
	.restore	= fc_restore,
	.free		= fc_free,
};
