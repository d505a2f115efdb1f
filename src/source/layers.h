/* SPDX-License-Identifier: Apache-2.0 */
/*
 * layers.h - a base snapshot with diffs over it, read as one source
 * (layers.c): each byte from the topmost layer that holds it.
 */
#ifndef FAULTLINE_SOURCE_LAYERS_H
#define FAULTLINE_SOURCE_LAYERS_H

#include "source/source.h"

/*
 * base under layers[0..n) (layers[0] just above the base, the last on
 * top), taking over the caller's references to all of them, also on
 * failure.  A layer of another size than the base is refused.  0 or
 * -errno with the reason set.
 */
int source_layers_open(struct fl_source *base,
		       struct fl_source *const *layers, unsigned int n,
		       struct fl_source **out);

#endif
