/* SPDX-License-Identifier: Apache-2.0 */
/*
 * blob.S - guest.S, assembled and linked for GUEST_CODE by the Makefile
 * (build/vmm/guest.bin), as bytes the host VMM copies into the guest.
 */
	.section .rodata
	.globl	vmm_guest_code, vmm_guest_code_end
	.balign	16
vmm_guest_code:
	.incbin	GUEST_BIN
vmm_guest_code_end:
	.section .note.GNU-stack, "", @progbits
