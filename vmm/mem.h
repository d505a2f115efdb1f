/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mem.h - guest memory as each backend provides it (vmm.h's enum
 * vmm_backend), from mapping it to handing it back.
 */
#ifndef FAULTLINE_VMM_MEM_H
#define FAULTLINE_VMM_MEM_H

#include "config.h"
#include "faultline.h"
#include "fc_client.h"

struct vmm_mem {
	enum vmm_backend backend;
	uint8_t *addr;
	uint64_t size, page_size;
	struct fc_client fc;		/* VMM_UFFD */
	struct fl_source *src;		/* VMM_INPROC */
	struct fl_engine *e;
	int tracking;			/* --reset: FL_TRACK_*, 0: none */
	char track_note[160];		/* none: why not */
};

/*
 * Map the memory and, for prepopulated memory, read the file into it; a
 * uffd's memory is registered but not yet handed to its handler.  With
 * --reset the engine tracks writes, as well as this kernel can.
 */
int vmm_mem_open(struct vmm_mem *m, const struct vmm_config *c, int fd);
/* Just before the guest runs: the handshake, or the engine's start. */
int vmm_mem_start(struct vmm_mem *m, const struct vmm_config *c);
/*
 * VMM_INPROC: a fresh restore in place of the one there: the engine
 * destroyed, the memory mapped anew at the same address (where the VM's
 * memslot points), a new engine (no write tracking) started.
 */
int vmm_mem_renew(struct vmm_mem *m, const struct vmm_config *c);
/* A balloon's discard of [off, off + len). */
int vmm_mem_discard(struct vmm_mem *m, uint64_t off, uint64_t len);
/* Bytes of anonymous (or hugetlb) memory resident in the guest memory. */
uint64_t vmm_mem_resident(const struct vmm_mem *m);
void vmm_mem_close(struct vmm_mem *m);

#endif
