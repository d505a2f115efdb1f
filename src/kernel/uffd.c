// SPDX-License-Identifier: Apache-2.0
/*
 * uffd.c - the kernel layer: open, handshake, register, and the range
 * operations with the kernel's partial-progress rules folded in.
 *
 * Decision: every range ioctl funnels through uffd_fill(), which resumes a
 * short operation from where the kernel stopped (EAGAIN with bytes done) and
 * otherwise hands the first real error back.  EAGAIN with nothing done means
 * an event is pending; the engine, not this layer, must apply it first, so it
 * is returned rather than retried here.
 */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernel/uffd.h"

int uffd_open(int flags)
{
	int fd = (int)syscall(__NR_userfaultfd, flags);

	if (fd >= 0)
		return fd;
	if (errno != EPERM && errno != ENOSYS)
		return -errno;

	/* unprivileged_userfaultfd=0 without CAP_SYS_PTRACE: the device. */
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);

	if (dev < 0)
		return -errno;
	fd = ioctl(dev, USERFAULTFD_IOC_NEW, flags);
	int err = errno;

	close(dev);
	return fd < 0 ? -err : fd;
}

const char *uffd_strerror(int err)
{
	if (err == -EPERM || err == -EACCES)
		return "Permission denied: creating a userfaultfd that takes "
		       "kernel faults needs root (CAP_SYS_PTRACE), sysctl "
		       "vm.unprivileged_userfaultfd=1, or read-write access to "
		       "/dev/userfaultfd";
	return strerror(-err);
}

int uffd_api(int fd, uint64_t want, uint64_t *features, uint64_t *ioctls)
{
	struct uffdio_api api = { .api = UFFD_API, .features = want };

	if (ioctl(fd, UFFDIO_API, &api) < 0)
		return -errno;
	if (features)
		*features = api.features;
	if (ioctls)
		*ioctls = api.ioctls;
	return 0;
}

static int fdinfo_api(int fd, unsigned int *feat)
{
	char path[48], line[128];
	unsigned long long api, ioctls;
	int ret = -ENOTTY;	/* not a userfaultfd */
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "API:\t%llx:%x:%llx", &api, feat, &ioctls) == 3)
			ret = 0;
	fclose(f);
	return ret;
}

/* Does this kernel show UFFD_FEATURE_INITIALIZED in fdinfo (5.15+)? */
static bool init_shown;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void probe_init_shown(void)
{
	unsigned int feat = 0;
	int fd = uffd_create(0, NULL);

	if (fd >= 0 && fdinfo_api(fd, &feat) == 0)
		init_shown = feat & UFFD_FEATURE_INITIALIZED;
	if (fd >= 0)
		close(fd);
}

int uffd_fd_features(int fd, uint64_t *features)
{
	unsigned int feat = 0;
	int ret = fdinfo_api(fd, &feat);

	if (ret < 0)
		return ret;
	pthread_once(&init_once, probe_init_shown);
	*features = feat & ~UFFD_FEATURE_INITIALIZED;
	/* UFFDIO_API not done yet: nothing could be read from it. */
	return init_shown && !(feat & UFFD_FEATURE_INITIALIZED) ? -ENOTCONN : 0;
}

int uffd_create(uint64_t want, uint64_t *features)
{
	struct uffd_caps caps;
	int ret = uffd_query(&caps);

	if (ret < 0)
		return ret;
	int fd = uffd_open(O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return fd;
	ret = uffd_api(fd, want & caps.features, features, NULL);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	return fd;
}

int uffd_query(struct uffd_caps *caps)
{
	/* A second UFFDIO_API on one fd is EINVAL: ask on a throw-away fd. */
	int fd = (int)syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	memset(caps, 0, sizeof(*caps));
	caps->open_via = "syscall";
	if (fd < 0) {
		fd = uffd_open(O_CLOEXEC | O_NONBLOCK);
		caps->open_via = "/dev/userfaultfd";
	}
	if (fd < 0)
		return fd;

	int ret = uffd_api(fd, 0, &caps->features, &caps->api_ioctls);

	if (ret == 0) {
		long psz = sysconf(_SC_PAGESIZE);
		void *p = mmap(NULL, psz, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p != MAP_FAILED) {
			uffd_register(fd, (uintptr_t)p, psz,
				      UFFDIO_REGISTER_MODE_MISSING,
				      &caps->range_ioctls);
			munmap(p, psz);
		}
	}
	close(fd);
	return ret;
}

int uffd_register(int fd, uint64_t start, uint64_t len, uint64_t mode,
		  uint64_t *ioctls)
{
	struct uffdio_register reg = {
		.range = { .start = start, .len = len },
		.mode = mode,
	};

	if (ioctl(fd, UFFDIO_REGISTER, &reg) < 0)
		return -errno;
	if (ioctls)
		*ioctls = reg.ioctls;
	return 0;
}

int uffd_unregister(int fd, uint64_t start, uint64_t len)
{
	struct uffdio_range r = { .start = start, .len = len };

	return ioctl(fd, UFFDIO_UNREGISTER, &r) < 0 ? -errno : 0;
}

int uffd_wake(int fd, uint64_t start, uint64_t len)
{
	struct uffdio_range r = { .start = start, .len = len };

	return ioctl(fd, UFFDIO_WAKE, &r) < 0 ? -errno : 0;
}

int uffd_writeprotect(int fd, uint64_t start, uint64_t len, bool wp,
		      bool dontwake)
{
	struct uffdio_writeprotect w = {
		.range = { .start = start, .len = len },
		.mode = (wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0) |
			(dontwake ? UFFDIO_WRITEPROTECT_MODE_DONTWAKE : 0),
	};

	return ioctl(fd, UFFDIO_WRITEPROTECT, &w) < 0 ? -errno : 0;
}

/* One ioctl of a range operation; returns its s64 result field. */
static int64_t fill_once(int fd, enum uffd_fill_op op, uint64_t dst,
			 uint64_t src, uint64_t len, uint64_t mode, int *err)
{
	union {
		struct uffdio_copy copy;
		struct uffdio_zeropage zero;
		struct uffdio_move move;
		struct uffdio_continue cont;
		struct uffdio_poison poison;
	} a;
	unsigned long req;
	__s64 *res;

	memset(&a, 0, sizeof(a));
	switch (op) {
	case UFFD_OP_COPY:
		a.copy = (struct uffdio_copy){ dst, src, len, mode, 0 };
		req = UFFDIO_COPY;
		res = &a.copy.copy;
		break;
	case UFFD_OP_ZEROPAGE:
		a.zero = (struct uffdio_zeropage){ { dst, len }, mode, 0 };
		req = UFFDIO_ZEROPAGE;
		res = &a.zero.zeropage;
		break;
	case UFFD_OP_MOVE:
		a.move = (struct uffdio_move){ dst, src, len, mode, 0 };
		req = UFFDIO_MOVE;
		res = &a.move.move;
		break;
	case UFFD_OP_CONTINUE:
		a.cont = (struct uffdio_continue){ { dst, len }, mode, 0 };
		req = UFFDIO_CONTINUE;
		res = &a.cont.mapped;
		break;
	case UFFD_OP_POISON:
		a.poison = (struct uffdio_poison){ { dst, len }, mode, 0 };
		req = UFFDIO_POISON;
		res = &a.poison.updated;
		break;
	default:
		*err = EINVAL;
		return -EINVAL;
	}
	*err = 0;
	if (ioctl(fd, req, &a) == 0)
		return (int64_t)len;
	*err = errno;
	return *res;
}

int uffd_fill(int fd, enum uffd_fill_op op, uint64_t dst, uint64_t src,
	      uint64_t len, uint64_t mode, uint64_t *done)
{
	uint64_t off = 0;
	int ret = 0;

	while (off < len) {
		int err;
		int64_t res = fill_once(fd, op, dst + off,
					src ? src + off : 0, len - off, mode,
					&err);

		if (res > 0) {
			/* Full success, or EAGAIN after partial progress. */
			off += (uint64_t)res;
			continue;
		}
		/* The field holds -errno, or 0 if the kernel never got to it. */
		ret = res < 0 ? (int)res : -(err ? err : EIO);
		break;
	}
	if (done)
		*done = off;
	return ret;
}

int uffd_read(int fd, struct uffd_msg *msgs, int max)
{
	ssize_t n;

	do {
		n = read(fd, msgs, sizeof(*msgs) * (size_t)max);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN ? 0 : -errno;
	return (int)(n / (ssize_t)sizeof(*msgs));
}

static const char *const feature_names[] = {
	"PAGEFAULT_FLAG_WP", "EVENT_FORK", "EVENT_REMAP", "EVENT_REMOVE",
	"MISSING_HUGETLBFS", "MISSING_SHMEM", "EVENT_UNMAP", "SIGBUS",
	"THREAD_ID", "MINOR_HUGETLBFS", "MINOR_SHMEM", "EXACT_ADDRESS",
	"WP_HUGETLBFS_SHMEM", "WP_UNPOPULATED", "POISON", "WP_ASYNC", "MOVE",
};

static const char *const ioctl_names[] = {
	"REGISTER", "UNREGISTER", "WAKE", "COPY", "ZEROPAGE", "MOVE",
	"WRITEPROTECT", "CONTINUE", "POISON",
};

const char *uffd_feature_name(int bit)
{
	if (bit >= 0 && bit < (int)(sizeof(feature_names) / sizeof(*feature_names)))
		return feature_names[bit];
	return NULL;
}

const char *uffd_ioctl_name(int bit)
{
	if (bit == 0x3F)
		return "API";
	if (bit >= 0 && bit < (int)(sizeof(ioctl_names) / sizeof(*ioctl_names)))
		return ioctl_names[bit];
	return NULL;
}
