/* SPDX-License-Identifier: Apache-2.0 */
/*
 * concat.h - several raw files read as one source, end to end (concat.c):
 * the pages files of a CRIU dump, one per task, so that every session of
 * the daemon shares one source and a region's offset says where its bytes
 * are, as with a memory file.
 */
#ifndef FAULTLINE_SOURCE_CONCAT_H
#define FAULTLINE_SOURCE_CONCAT_H

#include "source/source.h"

/*
 * paths[0..n) concatenated (empty files take no room); desc names it in
 * messages.  0 or -errno with the reason set.
 */
int source_concat_open(const char *const *paths, int n, const char *desc,
		       struct fl_source **out);

#endif
