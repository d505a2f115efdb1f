/*
 * source.h - where page contents come from, behind one small vtable.
 *
 * A source is a byte-addressable snapshot of known size.  read() fills a
 * buffer; map() offers the bytes for the kernel to copy; hole() reports
 * ranges known to be zero without reading them; hint() announces a future
 * read.
 * Implementations: source_file.c (raw memory file), source_image.c
 * (compressed chunked image, docs/image-format.md), source_http.c (either
 * of them behind an http:// or https:// URL).
 */
#ifndef FAULTLINE_SOURCE_H
#define FAULTLINE_SOURCE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct fl_source;
struct fl_source_opts;

struct fl_source_ops {
	const char *name;
	/* Read exactly len bytes at off into buf: 0, or -errno. */
	int (*read)(struct fl_source *s, void *buf, size_t len, uint64_t off);
	/*
	 * Optional: a pointer to [off, off+len) that UFFDIO_COPY may copy
	 * from directly (one copy instead of two), or NULL.  Never read in
	 * user space: the kernel turns a fault on it (a truncated file) into
	 * EFAULT, where a user-space read would be SIGBUS.
	 */
	const void *(*map)(struct fl_source *s, uint64_t off, size_t len);
	/* Optional: true if [off, off+len) is known to read as zeros. */
	bool (*hole)(struct fl_source *s, uint64_t off, size_t len);
	/* Optional: [off, off+len) will be read soon. */
	void (*hint)(struct fl_source *s, uint64_t off, size_t len);
	void (*destroy)(struct fl_source *s);
};

struct fl_source {
	const struct fl_source_ops *ops;
	uint64_t size;
	atomic_int refs;
	char desc[256];		/* for messages: the path or URL, no secrets */
};

/* Initialise the common part; refs starts at 1. */
void source_init(struct fl_source *s, const struct fl_source_ops *ops,
		 uint64_t size, const char *desc);

/*
 * Open a memory file or image for reading: a regular file only (a FIFO
 * would block the open until a writer came; a device is no snapshot).
 * The fd, or -errno with the error set (fl_last_error) when quiet is false.
 * *st (if st) is the file's stat.
 */
int source_open_file(const char *path, struct stat *st, bool quiet);

/* Read exactly len bytes at off: 0, -errno, or -EIO at end of file. */
int source_pread_full(int fd, void *buf, size_t len, uint64_t off);

/* Constructors, one per implementation; return 0 or -errno. */
int source_file_open(const char *path, struct fl_source **out);
int source_image_open(const char *path, struct fl_source **out);
/* tcp://HOST:PORT[?retry_ms=N]: a live post-copy sender (source_peer.c). */
int source_peer_open(const char *spec, struct fl_source **out);
/*
 * An image whose bytes are read from lower (takes over the caller's
 * reference, also on failure); name is used in messages.
 */
int source_image_over(struct fl_source *lower, const char *name,
		      struct fl_source **out);
/* An http:// or https:// URL of a raw memory file or an image. */
int source_http_open(const char *url, const struct fl_source_opts *o,
		     struct fl_source **out);

#endif
