// SPDX-License-Identifier: Apache-2.0
/*
 * file.c - a raw memory file (Firecracker's snapshot layout: the
 * regions' contents concatenated).
 *
 * Decision: the file is also mapped read-only, and map() hands that mapping
 * to UFFDIO_COPY, which copies page-cache pages straight into the client
 * (one copy).  faultline itself never reads the mapping: a snapshot
 * truncated under a running daemon would kill it with SIGBUS, where the
 * kernel's copy reports EFAULT and the page is poisoned by policy.  Bytes
 * faultline must look at (is this chunk zero?) come through pread.  Holes
 * (SEEK_DATA) are reported so sparse snapshots are served as zero pages
 * without reading.  The same holes, in a file used as a layer over a base
 * (a Firecracker diff snapshot), are what it does not hold (extent()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "faultline.h"
#include "util/error.h"
#include "source/impl.h"
#include "util/io.h"

struct source_file {
	struct fl_source base;
	int fd;
	void *map;		/* whole file, PROT_READ, MAP_SHARED; or NULL */
	bool sparse;		/* the file has holes: SEEK_DATA is worth asking */
};

#define to_file(s) ((struct source_file *)(s))

static int file_read(struct fl_source *s, void *buf, size_t len, uint64_t off)
{
	if (off > s->size || len > s->size - off)
		return -ERANGE;
	return pread_full(to_file(s)->fd, buf, len, off);
}

static const void *file_map(struct fl_source *s, uint64_t off, size_t len)
{
	struct source_file *f = to_file(s);

	if (!f->map || off > s->size || len > s->size - off)
		return NULL;
	return (const char *)f->map + off;
}

static bool file_hole(struct fl_source *s, uint64_t off, size_t len)
{
	struct source_file *f = to_file(s);

	if (!f->sparse)
		return false;
	off_t data = lseek(f->fd, (off_t)off, SEEK_DATA);
	struct stat st;

	if (data >= 0)
		return (uint64_t)data >= off + len;
	if (errno != ENXIO)
		return false;
	/*
	 * No data from off to the end: a hole, unless the end moved (the
	 * file cut short under us, where SEEK_DATA says ENXIO too).  Those
	 * bytes are lost, not zeros: the read fails and the page is
	 * poisoned by policy.
	 */
	return fstat(f->fd, &st) == 0 && (uint64_t)st.st_size >= off + len;
}

/*
 * As a layer: a Firecracker diff writes the pages dirtied since its base
 * and leaves holes elsewhere (a page the guest zeroed is written: data).
 */
static uint64_t file_extent(struct fl_source *s, uint64_t off, uint64_t len,
			    bool *held)
{
	struct source_file *f = to_file(s);
	off_t data, hole;
	struct stat st;

	*held = true;
	if (!f->sparse)
		return len;
	data = lseek(f->fd, (off_t)off, SEEK_DATA);
	if (data < 0) {
		/*
		 * ENXIO: no data from off to the end, unless the end moved
		 * (as in file_hole()): then held, so that the read fails
		 * rather than the layers below showing through.
		 */
		*held = !(errno == ENXIO && fstat(f->fd, &st) == 0 &&
			  (uint64_t)st.st_size >= off + len);
		return len;
	}
	if ((uint64_t)data > off) {
		*held = false;
		return (uint64_t)data - off < len ? (uint64_t)data - off : len;
	}
	hole = lseek(f->fd, (off_t)off, SEEK_HOLE);
	if (hole <= (off_t)off)		/* failed: held, the read will tell */
		return len;
	return (uint64_t)hole - off < len ? (uint64_t)hole - off : len;
}

static void file_hint(struct fl_source *s, uint64_t off, size_t len)
{
	posix_fadvise(to_file(s)->fd, (off_t)off, (off_t)len,
		      POSIX_FADV_WILLNEED);
}

static void file_destroy(struct fl_source *s)
{
	struct source_file *f = to_file(s);

	if (f->map)
		munmap(f->map, s->size);
	close(f->fd);
	free(f);
}

static const struct fl_source_ops file_ops = {
	.name = "file",
	.read = file_read,
	.map = file_map,
	.hole = file_hole,
	.hint = file_hint,
	.extent = file_extent,
	.destroy = file_destroy,
};

int source_file_open(const char *path, struct fl_source **out)
{
	struct source_file *f;
	struct stat st;
	int fd = open_regular(path, &st, false);
	off_t hole;

	if (fd < 0)
		return fd;
	f = calloc(1, sizeof(*f));
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	f->fd = fd;
	/*
	 * Where the first hole is: at the end, none (a file with holes may
	 * still have as many blocks as bytes, which st_blocks cannot tell).
	 */
	hole = st.st_size ? lseek(fd, 0, SEEK_HOLE) : 0;
	f->sparse = hole >= 0 ? hole < st.st_size :
		    (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size;
	if (st.st_size > 0) {
		f->map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED,
			      fd, 0);
		if (f->map == MAP_FAILED)
			f->map = NULL;
	}
	source_init(&f->base, &file_ops, (uint64_t)st.st_size, path);
	*out = &f->base;
	return 0;
}
