/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uffd_compat.h - userfaultfd and KVM definitions newer than the Linux 6.1
 * headers this project builds against.
 *
 * Values are from the Linux 6.18 UAPI (include/uapi/linux/userfaultfd.h,
 * include/uapi/linux/kvm.h, include/uapi/linux/fs.h).  Nothing here is
 * used unless the running kernel reports the matching feature bit or
 * ioctl bit at UFFDIO_API time (PAGEMAP_SCAN: unless a first call works).
 */
#ifndef FAULTLINE_UAPI_UFFD_COMPAT_H
#define FAULTLINE_UAPI_UFFD_COMPAT_H

#include <linux/types.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>

#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED	(1 << 13)
#endif
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON		(1 << 14)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC		(1 << 15)
#endif
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE		(1 << 16)
#endif

#ifndef _UFFDIO_MOVE
#define _UFFDIO_MOVE			(0x05)
struct uffdio_move {
	__u64 dst;
	__u64 src;
	__u64 len;
#define UFFDIO_MOVE_MODE_DONTWAKE		((__u64)1 << 0)
#define UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES	((__u64)1 << 1)
	__u64 mode;
	__s64 move;
};
#define UFFDIO_MOVE	_IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
#endif

#ifndef _UFFDIO_POISON
#define _UFFDIO_POISON			(0x08)
struct uffdio_poison {
	struct uffdio_range range;
#define UFFDIO_POISON_MODE_DONTWAKE	((__u64)1 << 0)
	__u64 mode;
	__s64 updated;
};
#define UFFDIO_POISON	_IOWR(UFFDIO, _UFFDIO_POISON, struct uffdio_poison)
#endif

/* PAGEMAP_SCAN on /proc/PID/pagemap (Linux 6.7, include/uapi/linux/fs.h). */
#ifndef PAGEMAP_SCAN
struct page_region {
	__u64 start;
	__u64 end;
	__u64 categories;
};

struct pm_scan_arg {
	__u64 size;
	__u64 flags;
	__u64 start;
	__u64 end;
	__u64 walk_end;
	__u64 vec;
	__u64 vec_len;
	__u64 max_pages;
	__u64 category_inverted;
	__u64 category_mask;
	__u64 category_anyof_mask;
	__u64 return_mask;
};
#define PM_SCAN_WP_MATCHING	(1 << 0)
#define PM_SCAN_CHECK_WPASYNC	(1 << 1)
#define PAGE_IS_WPALLOWED	(1 << 0)
#define PAGE_IS_WRITTEN		(1 << 1)
#define PAGEMAP_SCAN		_IOWR('f', 16, struct pm_scan_arg)
#endif

#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW		_IO(0xAA, 0x00)
#endif

/* KVM_PRE_FAULT_MEMORY (Linux 6.10). */
#ifndef KVM_CAP_PRE_FAULT_MEMORY
#define KVM_CAP_PRE_FAULT_MEMORY	236
struct kvm_pre_fault_memory {
	__u64 gpa;
	__u64 size;
	__u64 flags;
	__u64 padding[5];
};
#define KVM_PRE_FAULT_MEMORY	_IOWR(0xAE, 0xd5, struct kvm_pre_fault_memory)
#endif

#endif
