/* SPDX-License-Identifier: Apache-2.0 */
/*
 * huge_lock.h - one test suite at a time in the host's hugetlb pool.
 *
 * Decision: the tests map 2 MiB pages as Firecracker does
 * (MAP_ANONYMOUS|MAP_HUGETLB, vmm/fc_client.c), which draws on the
 * host-wide pool that no hugetlbfs mount's min_size reserves; two suites
 * on one machine would take each other's pages (a SIGBUS, a count of free
 * pages that is not one's own).  So a test's hugetlb part, its
 * nr_hugepages reservation (vmm/hugetlb.h) and its restore run under a
 * host-wide flock, and what it asserts about the pool it reads under it.
 */
#ifndef FAULTLINE_TEST_HUGE_LOCK_H
#define FAULTLINE_TEST_HUGE_LOCK_H

/* Where the lock lives (/tmp where /run is not writable). */
#define HUGE_LOCK_PATH		"/run/faultline-hugetlb.lock"
#define HUGE_LOCK_FALLBACK	"/tmp/faultline-hugetlb.lock"

/*
 * Take the lock, waiting (said in a "# " line, the caller's alarm()
 * paused) while another program holds it; again in the same program:
 * nothing.  Held until
 * huge_unlock() or exit; forked children share it, exec'd ones do not.
 * 0 or -errno (the lock file cannot be opened).
 */
int huge_lock(void);

/* Give back what huge_reserve() added (huge_restore()), then unlock. */
void huge_unlock(void);

#endif
