/* SPDX-License-Identifier: Apache-2.0 */
/*
 * parent.h - the parent of a diff image `image create --parent` writes
 * (author/parent.c).
 */
#ifndef FAULTLINE_AUTHOR_PARENT_H
#define FAULTLINE_AUTHOR_PARENT_H

#include <sys/stat.h>

#include "format/image.h"

/*
 * The header of the parent pp of a diff image to be written at image_path
 * from the raw file raw_path (raw: its stat): an image of any version (a
 * diff too) of the raw file's size, and not image_path itself.  0 or
 * -errno with a message.
 */
int create_open_parent(const char *pp, const char *image_path,
		       const char *raw_path, const struct stat *raw,
		       struct image_header *out);

#endif
