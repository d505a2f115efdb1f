/* SPDX-License-Identifier: Apache-2.0 */
/*
 * beside.h - a copy beside the guest, for benchmarks: the work of any
 * copying restore, done while the guest runs, without the guest ever
 * waiting for it.
 */
#ifndef FAULTLINE_VMM_BESIDE_H
#define FAULTLINE_VMM_BESIDE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct vmm_beside {
	int uffd;
	uint8_t *dst;
	const uint8_t *src;
	uint64_t len;
	pthread_t th;
	bool running;
};

/* Map the file (in the page cache) and scratch memory registered MISSING. */
int vmm_beside_open(struct vmm_beside *b, int fd, uint64_t len);
/* Start copying: one thread, UFFDIO_COPY 2 MiB at a time, once. */
int vmm_beside_start(struct vmm_beside *b);
/* Wait for the copy and free everything. */
void vmm_beside_close(struct vmm_beside *b);

#endif
