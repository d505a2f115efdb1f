/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcg.h - KVM tests on machines without /dev/kvm: the test program re-runs
 * itself, unchanged, inside a small VM (qemu-system-x86_64 -accel tcg
 * -cpu max), whose emulated nested SVM gives it a real, slow KVM.
 *
 * A test is written once against /dev/kvm; the two kinds of machine differ
 * only in the tcg_reexec() call at the top of its main().
 */
#ifndef FAULTLINE_TESTLIB_TCG_H
#define FAULTLINE_TESTLIB_TCG_H

#include <stdbool.h>

/*
 * /dev/kvm opens read-write and reports API version 12, and FL_FORCE_TCG
 * is unset (or "0").
 */
bool tcg_kvm_usable(void);

/*
 * Call first in main(). Returns at once where KVM is usable, or inside the
 * VM (FL_IN_TCG is set). Otherwise boots the VM with this program (at the
 * same absolute path), each of files (NULL-terminated, may be NULL; paths
 * relative to the cwd stay so), their shared libraries and the kvm modules,
 * runs the program there with the same argv, cwd and environment, copies
 * its TAP to stdout and exits with its status. Where the VM cannot run it,
 * prints "Bail out! ..." and exits 1.
 *
 * The VM's kernel: a Debian linux-image package extracted under
 * $FL_TCG_ROOT (default build/tcg, `make tcg-kernel`), else an installed
 * one. FL_TCG_TIMEOUT: seconds before the VM is killed (240). KEEP_LOGS:
 * keep the VM's initramfs and logs.
 */
void tcg_reexec(int argc, char **argv, const char *const *files);

#endif
