/* SPDX-License-Identifier: Apache-2.0 */
/*
 * guest_abi.h - what the VMM and the guest code (guest.S) agree on: where
 * the guest's code, parameter blocks and stacks sit in guest-physical
 * memory, the layout of one vCPU's parameter block, and the I/O port the
 * guest writes at the end of each pass.
 *
 * Included by C and by the assembler (through cpp), so: #defines only,
 * outside the __ASSEMBLER__ part.
 */
#ifndef FAULTLINE_VMM_GUEST_ABI_H
#define FAULTLINE_VMM_GUEST_ABI_H

/* Low memory (its own memslot, always prepopulated). */
#define GUEST_CODE	0x1000		/* guest.S is linked to run here */
#define GUEST_PARAMS	0x8000		/* vCPU i's block at + i * P_SIZE */
#define GUEST_STACKS	0x10000		/* vCPU i's stack top: + (i+1) * 4 KiB */
#define GUEST_LOW_SIZE	0x20000

/*
 * Guest memory proper: up to 3 GiB from 256 MiB, so that it ends below
 * 0xfec00000, where KVM keeps the IO-APIC and local APIC pages (guest
 * memory over 0xfee00000 is never mapped: an MMIO exit).
 */
#define GUEST_MEM_BASE	0x10000000

#define GUEST_PORT_PASS	0x10		/* out %al: one pass is done */

/* Workload kinds (P_KIND). */
#define WL_LINEAR	0
#define WL_STRIDE	1
#define WL_SPARSE	2
#define WL_RANDOM	3
#define WL_SPARSE_RANDOM 4	/* sparse's runs, the runs in random order */
#define WL_KINDS	5

/* Sparse: 1 MiB runs (256 pages) every 16 MiB (4096 pages). */
#define WL_SPARSE_RUN	256
#define WL_SPARSE_SHIFT	12
#define WL_SPARSE_EVERY	(1 << WL_SPARSE_SHIFT)

/* Random order: x = (x * A + C) mod 2^k, a full-period permutation. */
#define WL_LCG_A	1103515245
#define WL_LCG_C	12345

/* One vCPU's parameter block: 32-bit words at these byte offsets. */
#define P_FIRST		4	/* in: index of that page in guest memory */
#define P_NPAGES	8	/* in: 4 KiB pages in the slice */
#define P_KIND		12	/* in: WL_* */
#define P_ARG		16	/* in: stride; random: 2^k - 1 >= npages - 1;
				 * sparse-random: >= runs - 1 */
#define P_WRITE		20	/* in: 1: each touch is a read-modify-write */
#define P_COMPUTE	24	/* in: LCG steps of work after each touch */
#define P_PASSES	28	/* in: passes (1 or 2) */
#define P_SEED		32	/* in: random: first x */
#define P_PASS		36	/* out: passes done */
#define P_SUM		40	/* out: checksum of pass i at + 4 * i */
#define P_X		48	/* guest's: sparse-random's x */
#define P_LEFT		52	/* guest's: sparse-random's steps left */
/*
 * in: with P_DSTEP non-zero, pass 1 writes the dirty set instead of
 * walking the workload again (`faultline vmm --reset`): slice pages
 * P_DFIRST + k * P_DSTEP for k < P_DCOUNT, an xadd of 1 to each one's
 * word, summing the words it replaced
 */
#define P_DFIRST	56
#define P_DCOUNT	60
#define P_DSTEP		64
#define P_SIZE		128
#define P_MAX_PASSES	2

#endif
