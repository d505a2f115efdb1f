// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_trace.c - the working-set trace loader (format/trace.c): the input
 * is the trace file, in a memfd opened by its /proc/self/fd path.
 *
 * Decision: besides the sanitizers, the loaded runs are checked for what
 * replay relies on: non-empty and not wrapping.  They are in the guest's
 * first-touch order, not sorted, and may overlap an earlier run (a range
 * touched again; replay's fill skips pages already there).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "format/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-trace", MFD_CLOEXEC);
	char path[64];
	struct trace t;

	if (fd < 0 || write(fd, data, size) != (ssize_t)size) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (trace_init(&t) == 0) {
		if (trace_load(&t, path) == 0)
			for (size_t i = 0; i < t.n; i++) {
				const struct trace_run *r = &t.runs[i];

				if (!r->len || r->off + r->len < r->off)
					abort();
			}
		trace_free(&t);
	}
	close(fd);
	return 0;
}
