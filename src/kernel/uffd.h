/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uffd.h - the kernel layer: the only code that issues userfaultfd ioctls.
 *
 * Every call returns 0 (or a count) on success and -errno on failure.  The
 * range operations (COPY, ZEROPAGE, MOVE, CONTINUE, POISON) resume partial
 * progress themselves and report the bytes done through *done, so callers
 * only ever see the error that stopped them:
 *   -EAGAIN  a non-cooperative event is pending: read and apply events, retry
 *   -EEXIST  the page at dst + *done is already populated: WAKE it, skip it
 *   -ESRCH   the process owning the memory has exited
 *   -ENOENT  the range is no longer registered (VMA gone)
 */
#ifndef FAULTLINE_UFFD_H
#define FAULTLINE_UFFD_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include "kernel/uapi/uffd_compat.h"

/* Features faultline asks for in-process when the kernel offers them. */
#define UFFD_WANT_FEATURES (UFFD_FEATURE_EVENT_REMOVE | \
			    UFFD_FEATURE_EVENT_UNMAP | \
			    UFFD_FEATURE_EVENT_REMAP | \
			    UFFD_FEATURE_MISSING_HUGETLBFS | \
			    UFFD_FEATURE_MISSING_SHMEM | \
			    UFFD_FEATURE_MINOR_SHMEM | \
			    UFFD_FEATURE_MINOR_HUGETLBFS | \
			    UFFD_FEATURE_THREAD_ID | \
			    UFFD_FEATURE_EXACT_ADDRESS | \
			    UFFD_FEATURE_POISON | \
			    UFFD_FEATURE_MOVE)

enum uffd_fill_op {
	UFFD_OP_COPY,
	UFFD_OP_ZEROPAGE,
	UFFD_OP_MOVE,
	UFFD_OP_CONTINUE,
	UFFD_OP_POISON,
};

/* What the running kernel offers (filled by uffd_query()). */
struct uffd_caps {
	uint64_t features;	/* every feature bit UFFDIO_API reported */
	uint64_t api_ioctls;	/* ioctls bitmask from UFFDIO_API */
	uint64_t range_ioctls;	/* ioctls for a registered anonymous range */
	const char *open_via;	/* "syscall" or "/dev/userfaultfd" */
};

/* Open a uffd: userfaultfd(2) first, then /dev/userfaultfd. */
int uffd_open(int flags);
/*
 * What an error of uffd_open(), uffd_create() or uffd_query() means, for a
 * message: strerror(), but for a refusal (-EPERM, -EACCES) what would let
 * this user create one.
 */
const char *uffd_strerror(int err);
/* UFFDIO_API handshake; asks for want & what the kernel has. */
int uffd_api(int fd, uint64_t want, uint64_t *features, uint64_t *ioctls);
/*
 * The features another party's uffd was set up with (its UFFDIO_API), from
 * /proc/self/fdinfo: 0; -ENOTTY if fd is no userfaultfd, -ENOTCONN if its
 * UFFDIO_API handshake was never done.
 */
int uffd_fd_features(int fd, uint64_t *features);
#ifndef UFFD_FEATURE_INITIALIZED
#define UFFD_FEATURE_INITIALIZED	(1u << 31)	/* fdinfo only: API done */
#endif
/* Open a uffd and complete the handshake in one go; returns the fd. */
int uffd_create(uint64_t want, uint64_t *features);
/* What the kernel supports, learnt on a throw-away uffd. */
int uffd_query(struct uffd_caps *caps);

int uffd_register(int fd, uint64_t start, uint64_t len, uint64_t mode,
		  uint64_t *ioctls);
int uffd_unregister(int fd, uint64_t start, uint64_t len);
int uffd_wake(int fd, uint64_t start, uint64_t len);
int uffd_writeprotect(int fd, uint64_t start, uint64_t len, bool wp,
		      bool dontwake);

/* The one helper every range operation goes through. */
int uffd_fill(int fd, enum uffd_fill_op op, uint64_t dst, uint64_t src,
	      uint64_t len, uint64_t mode, uint64_t *done);

static inline int uffd_copy(int fd, uint64_t dst, const void *src,
			    uint64_t len, uint64_t mode, uint64_t *done)
{
	return uffd_fill(fd, UFFD_OP_COPY, dst, (uintptr_t)src, len, mode, done);
}

static inline int uffd_zeropage(int fd, uint64_t dst, uint64_t len,
				uint64_t mode, uint64_t *done)
{
	return uffd_fill(fd, UFFD_OP_ZEROPAGE, dst, 0, len, mode, done);
}

static inline int uffd_move(int fd, uint64_t dst, uint64_t src, uint64_t len,
			    uint64_t mode, uint64_t *done)
{
	return uffd_fill(fd, UFFD_OP_MOVE, dst, src, len, mode, done);
}

static inline int uffd_continue(int fd, uint64_t dst, uint64_t len,
				uint64_t mode, uint64_t *done)
{
	return uffd_fill(fd, UFFD_OP_CONTINUE, dst, 0, len, mode, done);
}

static inline int uffd_poison(int fd, uint64_t dst, uint64_t len,
			      uint64_t mode, uint64_t *done)
{
	return uffd_fill(fd, UFFD_OP_POISON, dst, 0, len, mode, done);
}

/* Read up to max messages; 0 when none are pending (non-blocking fd). */
int uffd_read(int fd, struct uffd_msg *msgs, int max);

/* Names for feature bits and ioctl bits, for probe output. */
const char *uffd_feature_name(int bit);
const char *uffd_ioctl_name(int bit);

#endif
