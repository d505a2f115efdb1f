/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reset.h - `faultline vmm --reset N`'s two loops (reset.c): N runs from
 * one snapshot with the engine's reset between them, then N each after a
 * fresh restore.
 */
#ifndef FAULTLINE_VMM_RESET_H
#define FAULTLINE_VMM_RESET_H

#include "vcpus.h"

/*
 * Once the vCPU threads wait for their first run and the memory started
 * (vmm_mem_start()): the runs into r->reset, r->checksum_ok whether each
 * read the snapshot, r->engine the reset loop's stats.  0 or -errno.
 */
int vmm_reset_loops(struct vm_run *run, struct vmm_result *r);

#endif
