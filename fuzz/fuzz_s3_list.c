// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_s3_list.c - a ListObjectsV2 answer (store/s3.c's
 * s3_list_parse()), which `image gc --store s3://` reads from the bucket
 * and the lock of every create and gc reads too.
 *
 * Input: the body, not NUL-terminated (an exact-size copy, so ASan sees
 * a read past it).  What must hold: each key handed on is a C string of
 * at most S3_KEY_MAX bytes without control characters; a page that asks
 * for more carries a token, NUL-terminated within its buffer; a refusal
 * says why in one line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "faultline.h"
#include "store/s3.h"

static int on_key(void *arg, const char *name, uint64_t size)
{
	size_t n = strnlen(name, S3_KEY_MAX + 1);

	(void)size;
	if (n > S3_KEY_MAX)
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20)
			abort();
	(*(int *)arg)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct s3_list_page pg;
	char *body = malloc(size ? size : 1);
	int keys = 0, ret;

	if (!body)
		return 0;
	memcpy(body, data, size);
	ret = s3_list_parse(body, size, &pg, on_key, &keys);
	if (ret == 0 && pg.more &&
	    (!pg.token[0] || strnlen(pg.token, sizeof(pg.token)) ==
	     sizeof(pg.token)))
		abort();
	if (ret < 0 && strchr(fl_last_error(), '\n'))
		abort();
	free(body);
	return 0;
}
