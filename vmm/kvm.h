/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvm.h - the little of KVM the test VMM needs: one VM with guest.S in low
 * memory, memslots, and vCPUs started directly in 32-bit protected mode.
 */
#ifndef FAULTLINE_VMM_KVM_H
#define FAULTLINE_VMM_KVM_H

#include <stdbool.h>
#include <stdint.h>

struct kvm_vm {
	int kvm;		/* /dev/kvm */
	int fd;			/* the VM */
	int run_size;		/* bytes of each vCPU's struct kvm_run */
	uint8_t *low;		/* GUEST_LOW_SIZE bytes at guest-physical 0 */
	uint64_t mem_size;	/* guest memory at GUEST_MEM_BASE */
};

struct kvm_vcpu {
	int fd;
	struct kvm_run *run;
	uint64_t mem_size;	/* the VM's, for its error messages */
};

/* 0 if /dev/kvm opens and speaks KVM_API_VERSION 12, else -errno. */
int kvm_probe(void);

/*
 * What KVM this machine has, in a few words ("kvm_pvm, shadow paging",
 * "kvm_amd, tdp_mmu=Y", "none: /dev/kvm: No such file or directory").
 */
const char *kvm_describe(char *buf, int len);

/* A VM with guest.S copied to GUEST_CODE; -errno (vmm_error() says). */
int kvm_vm_open(struct kvm_vm *vm);
/* Map host memory at gpa as memslot slot. */
int kvm_vm_add_memory(struct kvm_vm *vm, int slot, uint64_t gpa, void *host,
		      uint64_t size);
void kvm_vm_close(struct kvm_vm *vm);

/* vCPU id, at GUEST_CODE with %ebx = its parameter block. */
int kvm_vcpu_open(struct kvm_vm *vm, int id, struct kvm_vcpu *v);
/*
 * After a halt: at GUEST_CODE again, as kvm_vcpu_open() left it (KVM has
 * no interrupt controller here, so a halted vCPU runs on at KVM_RUN).
 */
int kvm_vcpu_restart(struct kvm_vcpu *v, int id);
/*
 * Run until the guest halts (returns 0) or writes GUEST_PORT_PASS
 * (returns 1); -errno, or -EFAULT for any other exit (errors say which).
 */
int kvm_vcpu_run(struct kvm_vcpu *v);
void kvm_vcpu_close(struct kvm_vm *vm, struct kvm_vcpu *v);

#endif
