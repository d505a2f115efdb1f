// SPDX-License-Identifier: Apache-2.0
/*
 * verify.c - `faultline image verify` by path: the image opened, a
 * version 3 image's directory store attached (the format's reader never
 * looks for its store itself), every chunk read and checked.
 */
#include <stddef.h>

#include "author/create.h"
#include "format/image.h"
#include "store/store.h"

int image_verify(const char *path,
		 void (*report)(void *arg, const char *msg), void *arg,
		 uint64_t *nbad)
{
	struct image *img;
	int ret = image_open(path, &img);

	if (nbad)
		*nbad = 0;
	if (ret == 0 && (ret = store_attach_at(img, path, NULL)) < 0)
		image_close(img);
	if (ret < 0)
		return ret;
	ret = image_verify_chunks(img, path, report, arg, nbad);
	image_close(img);
	return ret;
}
