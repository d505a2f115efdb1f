// SPDX-License-Identifier: Apache-2.0
/*
 * kvm.c - one VM, its memslots and its vCPUs, for the test guest.
 *
 * Decision: no firmware, no guest page tables, no interrupt controller.
 * Each vCPU starts at guest.S in 32-bit protected mode with flat 4 GiB
 * segments set through KVM_SET_SREGS (paging off), so the guest reaches
 * its memory at GUEST_MEM_BASE by physical address, and a halt is a plain
 * KVM_EXIT_HLT.  That runs on every KVM seen here: PVM (shadow paging),
 * and kvm_amd under QEMU's TCG.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "error.h"
#include "guest_abi.h"
#include "kvm.h"

extern const unsigned char vmm_guest_code[], vmm_guest_code_end[];

int kvm_probe(void)
{
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (ioctl(fd, KVM_GET_API_VERSION, 0) != KVM_API_VERSION)
		ret = -ENOTSUP;
	close(fd);
	return ret;
}

static bool have_module(const char *name)
{
	char path[64];

	snprintf(path, sizeof(path), "/sys/module/%s", name);
	return access(path, F_OK) == 0;
}

const char *kvm_describe(char *buf, int len)
{
	static const char *const mods[] = { "kvm_pvm", "kvm_amd", "kvm_intel" };
	const char *mod = NULL;
	char tdp = '?';
	int ret = kvm_probe();
	FILE *f;

	if (ret < 0) {
		snprintf(buf, len, "none: /dev/kvm: %s", strerror(-ret));
		return buf;
	}
	for (unsigned int i = 0; i < sizeof(mods) / sizeof(*mods); i++)
		if (have_module(mods[i]))
			mod = mods[i];
	f = fopen("/sys/module/kvm/parameters/tdp_mmu", "r");
	if (f) {
		if (fscanf(f, " %c", &tdp) != 1)
			tdp = '?';
		fclose(f);
	}
	if (mod && !strcmp(mod, "kvm_pvm"))
		snprintf(buf, len, "kvm_pvm, shadow paging");
	else
		snprintf(buf, len, "%s, tdp_mmu=%c", mod ? mod : "kvm", tdp);
	return buf;
}

int kvm_vm_add_memory(struct kvm_vm *vm, int slot, uint64_t gpa, void *host,
		      uint64_t size)
{
	struct kvm_userspace_memory_region r = {
		.slot = slot,
		.guest_phys_addr = gpa,
		.memory_size = size,
		.userspace_addr = (uintptr_t)host,
	};

	if (ioctl(vm->fd, KVM_SET_USER_MEMORY_REGION, &r) < 0)
		return vmm_fail(-errno, "KVM_SET_USER_MEMORY_REGION %llu bytes "
				"at 0x%llx: %s", (unsigned long long)size,
				(unsigned long long)gpa, strerror(errno));
	if (gpa == GUEST_MEM_BASE)
		vm->mem_size = size;
	return 0;
}

int kvm_vm_open(struct kvm_vm *vm)
{
	size_t code = vmm_guest_code_end - vmm_guest_code;
	int ret;

	memset(vm, 0, sizeof(*vm));
	vm->fd = -1;
	vm->kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (vm->kvm < 0)
		return vmm_fail(-errno, "/dev/kvm: %s", strerror(errno));
	vm->fd = ioctl(vm->kvm, KVM_CREATE_VM, 0);
	if (vm->fd < 0) {
		ret = vmm_fail(-errno, "KVM_CREATE_VM: %s", strerror(errno));
		goto fail;
	}
	vm->run_size = ioctl(vm->kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	vm->low = mmap(NULL, GUEST_LOW_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (vm->run_size <= 0 || vm->low == MAP_FAILED) {
		if (vm->low != MAP_FAILED)
			munmap(vm->low, GUEST_LOW_SIZE);
		vm->low = NULL;
		ret = vmm_fail(-ENOMEM, "KVM: cannot set up low memory");
		goto fail;
	}
	memcpy(vm->low + GUEST_CODE, vmm_guest_code, code);
	ret = kvm_vm_add_memory(vm, 0, 0, vm->low, GUEST_LOW_SIZE);
	if (ret == 0)
		return 0;
fail:
	kvm_vm_close(vm);
	return ret;
}

void kvm_vm_close(struct kvm_vm *vm)
{
	if (vm->low)
		munmap(vm->low, GUEST_LOW_SIZE);
	if (vm->fd >= 0)
		close(vm->fd);
	if (vm->kvm >= 0)
		close(vm->kvm);
	vm->low = NULL;
	vm->fd = vm->kvm = -1;
}

static void flat_segment(struct kvm_segment *s, uint16_t sel, uint8_t type)
{
	memset(s, 0, sizeof(*s));
	s->base = 0;
	s->limit = 0xffffffff;
	s->selector = sel;
	s->type = type;
	s->present = 1;
	s->s = 1;
	s->db = 1;
	s->g = 1;
}

static int vcpu_set_state(struct kvm_vcpu *v, int id)
{
	struct kvm_sregs sr;
	struct kvm_regs r;

	if (ioctl(v->fd, KVM_GET_SREGS, &sr) < 0)
		return -errno;
	flat_segment(&sr.cs, 0x08, 0xb);	/* code: execute/read */
	flat_segment(&sr.ds, 0x10, 0x3);	/* data: read/write */
	sr.es = sr.fs = sr.gs = sr.ss = sr.ds;
	sr.cr0 = 0x11;		/* PE, ET: no paging, caches on (not CD/NW) */
	sr.cr4 = 0;
	sr.efer = 0;
	if (ioctl(v->fd, KVM_SET_SREGS, &sr) < 0)
		return -errno;
	memset(&r, 0, sizeof(r));
	r.rip = GUEST_CODE;
	r.rflags = 2;
	r.rbx = GUEST_PARAMS + id * P_SIZE;
	r.rsp = GUEST_STACKS + (id + 1) * 4096;
	if (ioctl(v->fd, KVM_SET_REGS, &r) < 0)
		return -errno;
	return 0;
}

int kvm_vcpu_open(struct kvm_vm *vm, int id, struct kvm_vcpu *v)
{
	int ret;

	v->run = NULL;
	v->mem_size = vm->mem_size;
	v->fd = ioctl(vm->fd, KVM_CREATE_VCPU, id);
	if (v->fd < 0)
		return vmm_fail(-errno, "KVM_CREATE_VCPU %d: %s", id,
				strerror(errno));
	v->run = mmap(NULL, vm->run_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		      v->fd, 0);
	if (v->run == MAP_FAILED) {
		v->run = NULL;
		ret = vmm_fail(-errno, "vCPU %d: mmap kvm_run: %s", id,
			       strerror(errno));
		goto fail;
	}
	ret = vcpu_set_state(v, id);
	if (ret == 0)
		return 0;
	vmm_fail(ret, "vCPU %d: cannot set its registers: %s", id,
		 strerror(-ret));
fail:
	kvm_vcpu_close(vm, v);
	return ret;
}

int kvm_vcpu_restart(struct kvm_vcpu *v, int id)
{
	int ret = vcpu_set_state(v, id);

	if (ret < 0)
		return vmm_fail(ret, "vCPU %d: cannot set its registers again: "
				"%s", id, strerror(-ret));
	return 0;
}

/*
 * KVM turns an access it cannot back with a host page into an MMIO exit:
 * outside guest memory, a guest bug; inside, memory that never came (a
 * page its handler poisoned, or hugetlb pages that ran out).
 */
static int mmio_exit(const struct kvm_vcpu *v, uint64_t gpa)
{
	uint64_t off = gpa - GUEST_MEM_BASE;

	if (gpa >= GUEST_MEM_BASE && off < v->mem_size)
		return vmm_fail(-EFAULT, "guest memory at offset %llu could "
				"not be mapped: its page was poisoned or "
				"never came", (unsigned long long)off);
	return vmm_fail(-EFAULT, "guest access at 0x%llx, outside its memory",
			(unsigned long long)gpa);
}

/*
 * A poisoned page (UFFDIO_POISON) reaches the VMM differently per KVM: an
 * MMIO exit (PVM), SIGBUS to the vCPU thread (hwpoison, TDP KVM), EFAULT
 * from KVM_RUN, or KVM_EXIT_MEMORY_FAULT (6.8+).  All say the same.
 */
#define KVM_EXIT_MEMORY_FAULT_NR	39

static __thread volatile sig_atomic_t vcpu_sigbus;
static __thread void *vcpu_sigbus_addr;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)ctx;
	vcpu_sigbus = 1;
	vcpu_sigbus_addr = si->si_addr;
}

static void install_sigbus(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus,
				.sa_flags = SA_SIGINFO };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

static void catch_sigbus(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, install_sigbus);
}

static int not_mapped(const char *how)
{
	return vmm_fail(-EFAULT, "guest memory could not be mapped: its page "
			"was poisoned or never came (%s)", how);
}

int kvm_vcpu_run(struct kvm_vcpu *v)
{
	struct kvm_run *run = v->run;

	catch_sigbus();
	for (;;) {
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR && vcpu_sigbus)
				return not_mapped("SIGBUS");
			if (errno == EINTR || errno == EAGAIN)
				continue;
			if (errno == EFAULT)
				return not_mapped("KVM_RUN: Bad address");
			return vmm_fail(-errno, "KVM_RUN: %s", strerror(errno));
		}
		if (run->exit_reason == KVM_EXIT_MEMORY_FAULT_NR)
			return not_mapped("KVM_EXIT_MEMORY_FAULT");
		switch (run->exit_reason) {
		case KVM_EXIT_HLT:
			return 0;
		case KVM_EXIT_IO:
			if (run->io.port == GUEST_PORT_PASS &&
			    run->io.direction == KVM_EXIT_IO_OUT)
				return 1;
			return vmm_fail(-EFAULT, "guest I/O to port 0x%x",
					run->io.port);
		case KVM_EXIT_MMIO:
			return mmio_exit(v, run->mmio.phys_addr);
		case KVM_EXIT_INTR:
			continue;
		case KVM_EXIT_SHUTDOWN:
			return vmm_fail(-EFAULT, "guest stopped: triple fault");
		case KVM_EXIT_INTERNAL_ERROR:
			return vmm_fail(-EFAULT, "guest stopped: KVM internal "
					"error %u", run->internal.suberror);
		default:
			return vmm_fail(-EFAULT, "guest stopped: KVM exit %u",
					run->exit_reason);
		}
	}
}

void kvm_vcpu_close(struct kvm_vm *vm, struct kvm_vcpu *v)
{
	if (v->run)
		munmap(v->run, vm->run_size);
	if (v->fd >= 0)
		close(v->fd);
	v->run = NULL;
	v->fd = -1;
}
