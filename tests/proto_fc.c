// SPDX-License-Identifier: Apache-2.0
/*
 * proto_fc.c - the Firecracker handshake parser on its own: what the
 * daemon logs about a bad handshake is plain ASCII whatever the client
 * sent (no terminal escapes in the log), NUL bytes are not whitespace,
 * and a handshake parses the same in any pieces.
 *
 * Decision: the parser (src/daemon/proto_fc.c) is called directly, so
 * each byte sequence is exact (a C string could not carry the NULs).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "daemon/proto_fc.h"
#include "faultline.h"
#include "tap.h"

#define REGION "{\"base_host_virt_addr\":4096,\"size\":4096,\"offset\":0," \
	       "\"page_size\":4096}"

/* Feed buf in pieces of step bytes (0: at once); the last return. */
static int parse(const char *buf, size_t len, size_t step,
		 struct fl_region_desc *d)
{
	struct fc_parser *p;
	int ret = -EAGAIN;

	if (fc_parser_new(&p) < 0)
		BAIL("fc_parser_new");
	for (size_t off = 0; off < len && ret == -EAGAIN;) {
		size_t n = step && len - off > step ? step : len - off;

		ret = fc_parser_feed(p, buf + off, n, 1 << 20, d, 4);
		off += n;
	}
	fc_parser_free(p);
	return ret;
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

int main(void)
{
	static const char nul_first[] = "\0\0[" REGION "]";
	static const char esc_first[] = "\x1b[2J\x1b[31mowned";
	static const char esc_inside[] = "[\"\x1b[2J\x7f\xc3\xa9\"]";
	static const char good[] = "  [" REGION "]";
	struct fl_region_desc d[4];
	int ret;

	ret = parse(nul_first, sizeof(nul_first) - 1, 0, d);
	ok(ret == -EINVAL && strstr(fl_last_error(), "'\\x00' at byte 0"),
	   "leading NUL bytes are refused, not skipped (%d: %s)", ret,
	   fl_last_error());
	ret = parse(esc_first, sizeof(esc_first) - 1, 0, d);
	ok(ret == -EINVAL && strstr(fl_last_error(), "'\\x1b' at byte 0") &&
	   printable(fl_last_error()),
	   "an escape sequence is logged as \\x1b: %s", fl_last_error());
	ret = parse(esc_inside, sizeof(esc_inside) - 1, 0, d);
	ok(ret == -EINVAL && printable(fl_last_error()),
	   "a JSON string with escapes and non-ASCII bytes is logged as "
	   "ASCII: %s", fl_last_error());
	for (size_t step = 0; step <= 7; step++) {
		ret = parse(good, sizeof(good) - 1, step, d);
		ok(ret == 1 && d[0].addr == 4096 && d[0].len == 4096,
		   "a handshake in pieces of %zu bytes parses (%d)", step, ret);
	}
	return done_testing();
}
