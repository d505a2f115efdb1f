/* SPDX-License-Identifier: Apache-2.0 */
/*
 * guest.S - the test guest: 32-bit protected mode, flat segments, no
 * paging (the VMM sets all of that through KVM_SET_SREGS), one copy of
 * this code shared by every vCPU.
 *
 * %ebx points at the vCPU's parameter block (guest_abi.h).  Each pass
 * touches the pages of the vCPU's slice in the workload's order, one
 * 32-bit word per 4 KiB page, and adds them up.  Page p's word sits at
 * 4 * (p mod 1024) in it, so a page served from the wrong place (or as
 * zeros) adds another word: only pages exchanged with others 4 MiB apart
 * could cancel out.  A write touch is an xadd of 1 (the
 * first access is a write; the sum sees the old word).  After each pass
 * the sum is stored and the guest writes GUEST_PORT_PASS, so the VMM can
 * act between passes; after the last it halts.  With P_DSTEP set
 * (`faultline vmm --reset`) the second pass is no walk but the writes of
 * the dirty set, whose sum is that of the words they replaced: what the
 * snapshot holds there, if the memory was reset.  vmm/workload.h computes
 * the same sums from the memory file.
 *
 * Decision: KVM may emulate this guest instruction by instruction (PVM
 * does), so the time per touch is its instruction count: the linear loop
 * is four instructions, as lean as any guest that reads a word per page,
 * and each variant (read, write, with work) is its own loop, made
 * by the macros below, instead of a branch per touch.
 */
#include "guest_abi.h"

/* %esi: the word's address; %edi: the sum.  Clobber %eax, %edx only. */
.macro	TOUCH_R
	addl	(%esi), %edi
.endm

.macro	TOUCH_W
	movl	$1, %eax
	xaddl	%eax, (%esi)
	addl	%eax, %edi
.endm

/* P_COMPUTE (>= 1) LCG steps the sum does not see. */
.macro	WORK
	movl	P_COMPUTE(%ebx), %edx
	movl	%edi, %eax
.Lwork\@:
	imull	$WL_LCG_A, %eax, %eax
	addl	$WL_LCG_C, %eax
	decl	%edx
	jnz	.Lwork\@
.endm

.macro	TOUCH_RC
	TOUCH_R
	WORK
.endm

.macro	TOUCH_WC
	TOUCH_W
	WORK
.endm

/* %esi = the word of slice page %ecx: base + p * 4096 + 4 * (p & 1023). */
.macro	ADDR
	movl	%ecx, %esi
	addl	P_FIRST(%ebx), %esi
	movl	%esi, %eax
	andl	$1023, %eax
	shll	$12, %esi
	leal	GUEST_MEM_BASE(%esi, %eax, 4), %esi
.endm

/* The five orders, each with touch T; all end at pass_done. */
.macro	PATTERNS name, T
\name\()_linear:
	/* Runs of pages up to the next multiple of 1024, where the word's
	 * offset wraps to 0; within a run the next word is 4100 bytes on. */
	xorl	%ecx, %ecx
	ADDR
	movl	P_NPAGES(%ebx), %ebp
	movl	P_FIRST(%ebx), %eax
	andl	$1023, %eax
	movl	$1024, %ecx
	subl	%eax, %ecx
.Lrun\@:
	cmpl	%ebp, %ecx
	jbe	.Lfull\@
	movl	%ebp, %ecx
.Lfull\@:
	subl	%ecx, %ebp
.Lpage\@:
	\T
	addl	$4100, %esi
	decl	%ecx
	jnz	.Lpage\@
	subl	$4096, %esi
	movl	$1024, %ecx
	testl	%ebp, %ebp
	jnz	.Lrun\@
	jmp	pass_done

\name\()_stride:
	xorl	%ecx, %ecx
.Lstride\@:
	ADDR
	\T
	addl	P_ARG(%ebx), %ecx
	cmpl	P_NPAGES(%ebx), %ecx
	jb	.Lstride\@
	jmp	pass_done

\name\()_sparse:
	xorl	%ecx, %ecx
.Lsparse\@:
	ADDR
	\T
	incl	%ecx
	movl	%ecx, %eax
	andl	$(WL_SPARSE_EVERY - 1), %eax
	cmpl	$WL_SPARSE_RUN, %eax
	jb	.Lsparse_next\@
	orl	$(WL_SPARSE_EVERY - 1), %ecx	/* on to the next run */
	incl	%ecx
.Lsparse_next\@:
	cmpl	P_NPAGES(%ebx), %ecx
	jb	.Lsparse\@
	jmp	pass_done

\name\()_sparsernd:
	/* sparse's runs, the runs in the order of the LCG over their index. */
	movl	P_ARG(%ebx), %eax
	incl	%eax
	movl	%eax, P_LEFT(%ebx)
	movl	P_SEED(%ebx), %eax
	movl	%eax, P_X(%ebx)
.Lsr_run\@:
	movl	P_X(%ebx), %eax
	imull	$WL_LCG_A, %eax, %eax
	addl	$WL_LCG_C, %eax
	andl	P_ARG(%ebx), %eax
	movl	%eax, P_X(%ebx)
	shll	$WL_SPARSE_SHIFT, %eax
	movl	%eax, %ecx
	movl	$WL_SPARSE_RUN, %ebp
.Lsr_page\@:
	cmpl	P_NPAGES(%ebx), %ecx
	jae	.Lsr_next\@
	ADDR
	\T
	incl	%ecx
	decl	%ebp
	jnz	.Lsr_page\@
.Lsr_next\@:
	decl	P_LEFT(%ebx)
	jnz	.Lsr_run\@
	jmp	pass_done

\name\()_random:
	/* 2^k steps of x = x * A + C (mod 2^k) visit each x once. */
	movl	P_ARG(%ebx), %ebp
	incl	%ebp
	movl	P_SEED(%ebx), %ecx
.Lrandom\@:
	imull	$WL_LCG_A, %ecx, %ecx
	addl	$WL_LCG_C, %ecx
	andl	P_ARG(%ebx), %ecx
	cmpl	P_NPAGES(%ebx), %ecx
	jae	.Lrandom_skip\@
	ADDR
	\T
.Lrandom_skip\@:
	decl	%ebp
	jnz	.Lrandom\@
	jmp	pass_done
.endm

	.code32
	.text
	.globl	_start
_start:
pass:
	xorl	%edi, %edi
	cmpl	$0, P_DSTEP(%ebx)
	je	workload
	cmpl	$0, P_PASS(%ebx)
	jne	dirty
workload:
	/* variant = write + 2 * (compute != 0); entry = 5 * variant + kind */
	movl	P_WRITE(%ebx), %eax
	cmpl	$0, P_COMPUTE(%ebx)
	je	1f
	addl	$2, %eax
1:	leal	(%eax, %eax, 4), %eax
	addl	P_KIND(%ebx), %eax
	jmp	*entries(, %eax, 4)

	PATTERNS r, TOUCH_R
	PATTERNS w, TOUCH_W
	PATTERNS rc, TOUCH_RC
	PATTERNS wc, TOUCH_WC

/* --reset's second pass: write the dirty set (guest_abi.h, P_DSTEP). */
dirty:
	movl	P_DCOUNT(%ebx), %ebp
	testl	%ebp, %ebp
	jz	pass_done
	movl	P_DFIRST(%ebx), %ecx
.Ldirty:
	ADDR
	TOUCH_W
	addl	P_DSTEP(%ebx), %ecx
	decl	%ebp
	jnz	.Ldirty
	jmp	pass_done

pass_done:
	movl	P_PASS(%ebx), %eax
	movl	%edi, P_SUM(%ebx, %eax, 4)
	incl	%eax
	movl	%eax, P_PASS(%ebx)
	outb	%al, $GUEST_PORT_PASS
	movl	P_PASS(%ebx), %eax
	cmpl	P_PASSES(%ebx), %eax
	jb	pass
halt:
	hlt
	jmp	halt

	.balign	4
entries:	/* in WL_* order within each variant */
	.long	r_linear, r_stride, r_sparse, r_random, r_sparsernd
	.long	w_linear, w_stride, w_sparse, w_random, w_sparsernd
	.long	rc_linear, rc_stride, rc_sparse, rc_random, rc_sparsernd
	.long	wc_linear, wc_stride, wc_sparse, wc_random, wc_sparsernd
