// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_s3_error.c - the <Code> of an S3 error body (store/s3.c's
 * s3_error_code()), which an http(s) or s3:// source reads from whatever
 * answered with an error, and the message built from it
 * (http_status_text()).
 *
 * Input: byte 0 is the size of the code buffer (0 to 255), the rest the
 * body, not NUL-terminated (an exact-size copy, so ASan sees a read past
 * it).  What must hold: a code found is NUL-terminated within the buffer,
 * not empty, only letters, digits and '.', and stood between <Code> and
 * </Code> in the body; none found leaves "" (or nothing with no buffer).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/http_state.h"
#include "store/s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char code[256], tag[256 + 16], msg[CURL_ERROR_SIZE];
	struct xfer x = { .status = 403 };
	size_t n, len;
	char *body;
	bool found;

	if (size < 1)
		return 0;
	n = data[0];
	len = size - 1;
	body = malloc(len ? len : 1);
	if (!body)
		return 0;
	memcpy(body, data + 1, len);
	memset(code, 'x', sizeof(code));
	found = s3_error_code(body, len, code, n);
	if (found) {
		size_t k = strnlen(code, n);

		if (k == 0 || k >= n)
			abort();
		for (size_t i = 0; i < k; i++)
			if (!((code[i] >= 'a' && code[i] <= 'z') ||
			      (code[i] >= 'A' && code[i] <= 'Z') ||
			      (code[i] >= '0' && code[i] <= '9') ||
			      code[i] == '.'))
				abort();
		snprintf(tag, sizeof(tag), "<Code>%s</Code>", code);
		if (!memmem(body, len, tag, strlen(tag)))
			abort();
		(void)s3_error_hint(code);
	} else if (n && code[0]) {
		abort();
	}
	/* the same body as an error response's start, into a message */
	x.elen = len < sizeof(x.ebody) - 1 ? len : sizeof(x.ebody) - 1;
	memcpy(x.ebody, body, x.elen);
	if (http_status_text(&x, msg, sizeof(msg)) !=
	    s3_error_code(x.ebody, x.elen, code, 64))	/* its buffer's size */
		abort();
	if (strchr(msg, '\n') || strchr(msg, '\r'))
		abort();
	free(body);
	return 0;
}
