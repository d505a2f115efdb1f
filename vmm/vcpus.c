// SPDX-License-Identifier: Apache-2.0
/*
 * vcpus.c - the vCPU threads of one VM: each creates its vCPU (or, for a
 * process guest, does the touches itself), then runs the guest each time
 * it is told, all released at one instant, until told to quit; and the
 * check of the sums a run reported.
 *
 * Decision: a thread lives as long as the VM, so a vCPU is always run by
 * the thread that created it (KVM moves a vCPU to another thread at a
 * cost), and a run is two barriers: start and done.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "vcpus.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t thread_faults(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) < 0)
		return 0;
	return ru.ru_minflt + ru.ru_majflt;
}

void vm_write_params(struct vm_run *run, const struct vcpu *v)
{
	uint32_t *p = (uint32_t *)(run->vm.low + GUEST_PARAMS +
				   v->id * P_SIZE);

	memset(p, 0, P_SIZE);
	p[P_FIRST / 4] = v->s.first;
	p[P_NPAGES / 4] = v->s.npages;
	p[P_KIND / 4] = v->s.kind;
	p[P_ARG / 4] = v->s.arg;
	p[P_WRITE / 4] = v->s.write;
	p[P_COMPUTE / 4] = v->s.compute;
	p[P_PASSES / 4] = run->passes;
	p[P_SEED / 4] = v->s.seed;
	p[P_DFIRST / 4] = v->s.dfirst;
	p[P_DCOUNT / 4] = v->s.dcount;
	p[P_DSTEP / 4] = v->s.dstep;
}

static void read_sums(struct vm_run *run, struct vcpu *v)
{
	const uint32_t *p = (const uint32_t *)(run->vm.low + GUEST_PARAMS +
					       v->id * P_SIZE);

	for (unsigned int i = 0; i < run->passes; i++)
		v->sum[i] = p[P_SUM / 4 + i];
}

struct touch_ctx {
	const struct vmm_slice *s;
	uint8_t *mem;
	bool write;
	uint32_t sum;
};

/* The process guest's touch: what guest.S's touch does, in C. */
static void process_touch(void *arg, uint32_t j)
{
	struct touch_ctx *t = arg;
	uint32_t *w = (uint32_t *)(t->mem + vmm_touch_offset(t->s, j));
	uint32_t v, x;

	if (t->write)
		v = __atomic_fetch_add(w, 1, __ATOMIC_RELAXED);
	else
		v = *(volatile uint32_t *)w;
	t->sum = vmm_sum_step(t->sum, v);
	x = t->sum;
	for (uint32_t i = t->s->compute; i; i--) {
		x = x * (uint32_t)WL_LCG_A + WL_LCG_C;
		__asm__ volatile("" : "+r"(x));
	}
}

/* One pass: 1 at its end, 0 when the guest halted, or -errno. */
static int vcpu_pass(struct vcpu *v, unsigned int pass)
{
	struct touch_ctx t = { .s = &v->s, .mem = v->run->mem.addr,
			       .write = v->s.write };

	if (v->run->kvm)
		return kvm_vcpu_run(&v->kv);
	if (pass == v->run->passes)
		return 0;		/* the process guest's halt */
	if (pass == 1 && v->s.dstep) {	/* guest.S's dirty pass */
		t.write = true;
		vmm_dirty_walk(&v->s, process_touch, &t);
	} else {
		vmm_walk(&v->s, process_touch, &t);
	}
	v->sum[pass] = t.sum;
	return 1;
}

/* Between passes: every vCPU waits while vCPU 0 discards. */
static void between_passes(struct vcpu *v)
{
	struct vm_run *run = v->run;
	const struct vmm_config *c = run->c;
	int ret;

	pthread_barrier_wait(&run->pass);
	if (v->id == 0 && c->discard_len) {
		ret = vmm_mem_discard(&run->mem, c->discard_off,
				      c->discard_len);
		if (ret < 0 && !v->err)
			v->err = ret;
	}
	pthread_barrier_wait(&run->pass);
}

static void run_passes(struct vcpu *v)
{
	struct vm_run *run = v->run;
	uint64_t f0 = thread_faults();
	int ret = 0;

	for (unsigned int pass = 0; pass <= run->passes; pass++) {
		if (!v->err && !atomic_load(&run->err)) {
			ret = vcpu_pass(v, pass);
			if (ret < 0)
				v->err = ret;
			else if (ret != (pass < run->passes))
				v->err = vmm_fail(-EPROTO, "vCPU %d: the guest "
						  "%s after pass %u", v->id,
						  ret ? "went on" : "halted",
						  pass);
		}
		if (pass + 1 < run->passes)
			between_passes(v);
	}
	v->t_end = now();
	v->faults += thread_faults() - f0;
	if (v->err)
		atomic_store(&run->err, v->err);
	if (run->kvm)
		read_sums(run, v);
}

static void *vcpu_main(void *arg)
{
	struct vcpu *v = arg;
	struct vm_run *run = v->run;

	if (run->kvm)
		v->err = kvm_vcpu_open(&run->vm, v->id, &v->kv);
	for (;;) {
		pthread_barrier_wait(&run->start);
		if (atomic_load(&run->quit))
			break;
		run_passes(v);
		pthread_barrier_wait(&run->done);
		/* Ready for another run: no pass done, at the first insn. */
		if (run->kvm && !v->err) {
			vm_write_params(run, v);
			v->err = kvm_vcpu_restart(&v->kv, v->id);
		}
	}
	if (run->kvm)
		kvm_vcpu_close(&run->vm, &v->kv);
	return NULL;
}

int vm_run_once(struct vm_run *run, double *ms)
{
	double t0, t1 = 0;

	t0 = now();
	pthread_barrier_wait(&run->start);
	pthread_barrier_wait(&run->done);
	for (unsigned int i = 0; i < run->nvcpus; i++)
		if (run->v[i].t_end > t1)
			t1 = run->v[i].t_end;
	*ms = (t1 - t0) * 1e3;
	return atomic_load(&run->err);
}

void vm_vcpus_start(struct vm_run *run)
{
	pthread_barrier_init(&run->start, NULL, run->nvcpus + 1);
	pthread_barrier_init(&run->done, NULL, run->nvcpus + 1);
	pthread_barrier_init(&run->pass, NULL, run->nvcpus);
	for (unsigned int i = 0; i < run->nvcpus; i++)
		if (pthread_create(&run->v[i].th, NULL, vcpu_main,
				   &run->v[i])) {
			/* never seen with 8 threads; say so */
			fprintf(stderr, "faultline vmm: cannot start vCPU "
				"threads\n");
			_exit(1);
		}
}

uint64_t vm_vcpus_stop(struct vm_run *run)
{
	uint64_t faults = 0;

	atomic_store(&run->quit, true);
	pthread_barrier_wait(&run->start);
	for (unsigned int i = 0; i < run->nvcpus; i++) {
		pthread_join(run->v[i].th, NULL);
		faults += run->v[i].faults;
	}
	pthread_barrier_destroy(&run->start);
	pthread_barrier_destroy(&run->done);
	pthread_barrier_destroy(&run->pass);
	return faults;
}

bool vm_sums_ok(const struct vm_run *run, const char *what)
{
	bool ok = true;

	for (unsigned int i = 0; i < run->nvcpus; i++)
		for (unsigned int pass = 0; pass < run->passes; pass++) {
			const struct vcpu *v = &run->v[i];

			if (v->sum[pass] == v->want[pass])
				continue;
			fprintf(stderr, "faultline vmm: %svCPU %u pass %u%s: "
				"guest checksum 0x%08x, the memory file says "
				"0x%08x\n", what, i, pass,
				pass == 1 && v->s.dstep ?
				" (the dirty set, before its writes)" : "",
				v->sum[pass], v->want[pass]);
			ok = false;
		}
	return ok;
}
