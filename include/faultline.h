/* SPDX-License-Identifier: Apache-2.0 */
/*
 * faultline.h - serve userfaultfd page faults from a snapshot.
 *
 * One engine serves one userfaultfd: either one it creates for memory in this
 * process, or one adopted from another process (a VMM that sent its uffd over
 * a socket).  Regions tie a registered address range to a source (a snapshot
 * file) at an offset.  The engine runs on its own threads
 * (fl_engine_start) or is driven from the caller's event loop
 * (fl_engine_uffd + fl_engine_process).
 *
 * Every function returns 0 (or a count) on success and -errno on failure;
 * fl_last_error() explains the most recent failure on the calling thread in
 * one line.  docs/api.md is the guide; the comments here are the contract.
 *
 * The ABI grows without a soname bump: the structs a caller fills in end
 * in reserved space that must be zero (new fields come out of it), the
 * statistics are copied by size, and symbols carry a version node per
 * release (docs/api.md, "Versions and the ABI").
 */
#ifndef FAULTLINE_H
#define FAULTLINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FL_VERSION_MAJOR	0
#define FL_VERSION_MINOR	6
#define FL_VERSION_PATCH	0
#define FL_VERSION		"0.6.0"

/* The version of the library linked at run time ("0.6.0"). */
const char *fl_version(void);
/* Its major and minor numbers (0.6). */
int fl_version_major(void);
int fl_version_minor(void);
/*
 * 0 if the library linked at run time is major.minor or newer (as
 * liburing's check, but -errno rather than true when it is too old):
 * -EOPNOTSUPP, fl_last_error() naming both versions.
 */
int fl_check_version(int major, int minor);

struct fl_engine;
struct fl_source;

/* ---- sources ------------------------------------------------------------ */

/*
 * Open a snapshot source.  spec is a path to a raw memory file (the regions'
 * contents concatenated, as Firecracker writes it) or to a faultline image
 * (docs/image-format.md, recognised by its magic), an http(s):// URL of
 * either, or s3://BUCKET/KEY (credentials from the environment: a missing
 * one is -EINVAL naming it; docs/api.md lists them), or the images
 * directory of a CRIU dump (its tasks' lazy pages end to end, each task's
 * place in them from fl_source_criu_task() below).  A diff image brings
 * its chain of parents (-ELOOP past FL_MAX_LAYERS).  Sources are reference
 * counted and may be shared by many engines.
 */
int fl_source_open(const char *spec, struct fl_source **out);

/*
 * Options: a local cache of remote blocks, and layers: spec is the base and
 * layers[0..nlayers) diffs over it, the last on top, each page read from
 * the topmost layer that holds it (docs/api.md says what a raw file or an
 * image holds); each layer the size of the base, else -EINVAL naming it.
 */
struct fl_source_opts {
	const char *cache_dir;		/* NULL: no local block cache */
	uint64_t cache_max_bytes;	/* bound on the cache; 0: FL_DEFAULT_CACHE_MAX */
	/*
	 * Called, from any thread, with one line while a remote source waits
	 * for its origin (at most about once a second per source), and for
	 * what the local cache skips or cannot do.  NULL: quiet.
	 */
	void (*note)(void *arg, const char *line);
	void *note_arg;
	/* 0.4: nlayers specs over spec, bottom first (see above) */
	const char *const *layers;
	unsigned int nlayers;		/* 0: spec alone */
	uint32_t reserved32;		/* zero */
	uint64_t reserved[6];	/* zero (new options come from here) */
};

#define FL_DEFAULT_CACHE_MAX	(4ull << 30)
#define FL_MAX_LAYERS		64

/* fl_source_open with options (opts may be NULL; reserved must be zero). */
int fl_source_open_ex(const char *spec, const struct fl_source_opts *opts,
		      struct fl_source **out);
uint64_t fl_source_size(const struct fl_source *src);
struct fl_source *fl_source_get(struct fl_source *src);
void fl_source_put(struct fl_source *src);
/*
 * The bytes src, or the source it reads through, fetched from its origin
 * and read from its cache: 0, or -ENODATA for a source that is not remote.
 */
int fl_source_remote_bytes(const struct fl_source *src, uint64_t *fetched,
			   uint64_t *cached);

struct fl_region_desc;
/*
 * A source opened from a CRIU dump's images directory (docs/api.md): its
 * number of tasks (pstree.img's), or -ENODATA for any other source.
 */
int fl_source_criu_tasks(const struct fl_source *src);
/*
 * Task i of such a source (0 <= i < fl_source_criu_tasks()): its pid as
 * the images name it (the dump's pid namespace), and its lazy memory as
 * *nregions regions of src, for fl_engine_add_region() (4 KiB pages; the
 * array is src's, valid while src is held; none for a zombie).  Any out
 * pointer may be NULL.  0, -ENODATA, or -EINVAL for i out of range.
 */
int fl_source_criu_task(const struct fl_source *src, int i, pid_t *pid,
			const struct fl_region_desc **regions,
			unsigned int *nregions);

/* ---- engine ------------------------------------------------------------- */

/* What to do with a page whose contents cannot be read from the source. */
enum fl_on_error {
	FL_ON_ERROR_POISON = 0,	/* SIGBUS in the faulting thread */
	FL_ON_ERROR_KILL,	/* kill the client (pid from the options) */
};

/*
 * A zeroed struct fl_engine_opts is a working default: an engine that
 * creates its own uffd for memory of this process, default chunk,
 * prefetch and background restore.  reserved and reserved_* must be zero,
 * and flags only FL_ENGINE_* bits defined below (else -EINVAL).
 *
 * The client (whose memory the uffd serves) is named by client_pid and
 * FL_ENGINE_CLIENT_REMOTE, each case explicit:
 *   client_pid 0                          this process (the default)
 *   client_pid > 0                        that process (this one if it is
 *                                         getpid())
 *   client_pid 0, FL_ENGINE_CLIENT_REMOTE another process whose pid is not
 *                                         known: its memory is never looked
 *                                         at, it is never killed, failed
 *                                         pages are poisoned
 *   client_pid < 0, or REMOTE with our own pid: -EINVAL.
 */
struct fl_engine_opts {
	int uffd;		/* with FL_ENGINE_ADOPT: serve this uffd (any
				 * fd, 0 too); else 0 or -1: create one */
	uint32_t reserved_4;	/* zero (0.5; padding before, see docs/api.md) */
	uint64_t chunk_size;	/* bytes served per fault, fixed; 0: adaptive,
				 * from FL_DEFAULT_CHUNK up to FL_MAX_CHUNK */
	enum fl_on_error on_error;
	pid_t client_pid;	/* the client, for FL_ON_ERROR_KILL and to look
				 * at its memory (see above); pinned by a
				 * pidfd when the engine is created, else its
				 * failed pages are poisoned */
	unsigned int flags;	/* FL_ENGINE_* */
	uint32_t reserved_28;	/* zero (0.5; padding before) */
	uint64_t readahead_max;	/* largest prefetch window; 0: FL_DEFAULT_READAHEAD */
	unsigned int quiet_ms;	/* background restore starts after this long
				 * without faults; 0: FL_DEFAULT_QUIET_MS */
	int state_fd;		/* FL_ENGINE_SHARED_STATE: a memfd of one byte
				 * per page of every region, in the order they
				 * are added, that outlives this process */
	int client_pidfd;	/* FL_ENGINE_CLIENT_PIDFD: a pidfd of client_pid
				 * (the engine keeps a dup); -1: none, never
				 * kill by pid (poison instead) */
	uint32_t reserved_52;	/* zero (0.5; padding before) */
	uint64_t reserved[8];	/* zero (new options come from here) */
};

#define FL_DEFAULT_READAHEAD	(32u << 20)
#define FL_DEFAULT_QUIET_MS	100

/* The engine closes an adopted uffd when it is destroyed. */
#define FL_ENGINE_OWN_UFFD	(1u << 0)
/* No readahead of sequential fault streams (on by default). */
#define FL_ENGINE_NO_PREFETCH	(1u << 1)
/* No background restore when faults go quiet (on by default). */
#define FL_ENGINE_NO_BACKGROUND	(1u << 2)
/*
 * In-process engines only (uffd created here, kernel with UFFDIO_MOVE):
 * move the pages read from the source into place instead of copying them a
 * second time.  Off by default (docs/api.md says why).
 */
#define FL_ENGINE_MOVE		(1u << 3)
/*
 * Keep page states in state_fd, so that another process can take the
 * uffd over with them (faultline serve's supervisor holds both).
 */
#define FL_ENGINE_SHARED_STATE	(1u << 4)
/*
 * Take over a uffd another process served until it died: page states as
 * state_fd has them (a fill it had under way is done again; EEXIST says a
 * page is there), and at start one wake of every region, for the threads
 * asleep on faults the dead process had read.
 */
#define FL_ENGINE_TAKEOVER	(1u << 5)
/* Serve opts.uffd, a uffd made elsewhere (a client's, over SCM_RIGHTS). */
#define FL_ENGINE_ADOPT		(1u << 6)
/* opts.client_pidfd names the client: else one is opened from client_pid. */
#define FL_ENGINE_CLIENT_PIDFD	(1u << 7)
/* The client is another process; with client_pid 0, one whose pid is unknown. */
#define FL_ENGINE_CLIENT_REMOTE	(1u << 8)
/*
 * Write tracking (fl_engine_track_writes) by synchronous write-protect
 * faults the engine handles, even where the kernel has WP_ASYNC and
 * PAGEMAP_SCAN (for tests, and to compare the two).
 */
#define FL_ENGINE_TRACK_SYNC	(1u << 9)

#define FL_DEFAULT_CHUNK	(64u << 10)
#define FL_MAX_CHUNK		(2u << 20)

struct fl_region_desc {
	uint64_t addr;		/* host virtual address, page aligned */
	uint64_t len;		/* bytes, a multiple of page_size */
	uint64_t page_size;	/* 4096 (or 0: 4096), or 2 MiB for hugetlb memory */
	uint64_t src_offset;	/* where this region's data starts in the source */
	unsigned int flags;	/* FL_REGION_* */
	int memfd;		/* FL_REGION_MINOR: the memfd/shmem file mapped
				 * MAP_SHARED at addr */
	uint64_t memfd_offset;	/* file offset of addr in memfd */
	uint64_t reserved[4];	/* zero (new fields come from here) */
};

/* Register the range with the engine's uffd (in-process use). */
#define FL_REGION_REGISTER	(1u << 0)
/*
 * Minor-fault mode for shared memory (4 KiB shmem/memfd pages): pages are
 * written once into memfd's page cache and mapped with UFFDIO_CONTINUE;
 * pages already in the page cache (a clone sharing the memfd) are mapped
 * without any copy.  With FL_REGION_REGISTER the range is registered
 * MISSING | MINOR.
 */
#define FL_REGION_MINOR		(1u << 1)

int fl_engine_create(const struct fl_engine_opts *opts, struct fl_engine **out);
/* The uffd the engine serves (for registering more memory yourself). */
int fl_engine_uffd(const struct fl_engine *e);
/* Add a region served from src (the engine takes its own reference). */
int fl_engine_add_region(struct fl_engine *e, const struct fl_region_desc *r,
			 struct fl_source *src);

/*
 * Working-set traces (REAP).  fl_engine_record() starts recording, as
 * snapshot offsets, every chunk a fault fills, in order; record with
 * FL_ENGINE_NO_PREFETCH | FL_ENGINE_NO_BACKGROUND so that every first touch
 * faults.  fl_engine_save_trace() writes the trace.  fl_engine_replay()
 * loads one, keeping the order it was first touched in (runs that touch
 * are merged), and has the filler threads fill those runs, in that order,
 * as soon as the engine runs; it may be called before or after
 * fl_engine_start().
 */
int fl_engine_record(struct fl_engine *e);
int fl_engine_save_trace(struct fl_engine *e, const char *path);
int fl_engine_replay(struct fl_engine *e, const char *path);
/* 0 if path is a working-set trace that can be read, else -errno. */
int fl_trace_check(const char *path);
/*
 * Add the trace in part to the one in into (none yet: part alone), and
 * write into anew (whole, renamed over it): the working set of several
 * engines, e.g. every task of one restore.  0, or -errno.
 */
int fl_trace_merge(const char *into, const char *part);

/*
 * Serve on nthreads threads of the engine's own until fl_engine_stop(), plus
 * filler threads for prefetch and background restore, one per CPU, at most
 * two (none if both are disabled).  The caller-driven mode below has no
 * filler.
 */
int fl_engine_start(struct fl_engine *e, unsigned int nthreads);
/* Or drive it yourself: poll fl_engine_uffd() for POLLIN, then process. */
/* Handle everything pending without blocking; returns messages handled. */
int fl_engine_process(struct fl_engine *e);
/*
 * Stop the engine's threads (idempotent); a stopped engine does not start
 * again, but fl_engine_process() still serves it.  Until then faults on
 * its regions wait, and so do munmap/madvise/mremap of them (each waits
 * for its event to be read): destroy the engine before unmapping its
 * memory, and never change the regions from the thread that calls
 * fl_engine_process().
 */
int fl_engine_stop(struct fl_engine *e);
/*
 * The client is done with its memory: from when this returns the engine
 * issues no userfaultfd ioctl again (no fill, poison or wake; an ioctl
 * under way has ended), and its threads finish.  Fast: it does not wait
 * for a source read.  The kernel lets any uffd of a process fill any of
 * its registered memory, so call it before the client may map new memory
 * at the same addresses and hand it to another engine.  destroy does it.
 */
int fl_engine_detach(struct fl_engine *e);
/*
 * Stop, close the uffd if the engine owns it, free everything.  Pages not
 * restored by then read as zeros afterwards (the kernel's answer once the
 * uffd is closed): destroy when the restore is complete, or the memory no
 * longer matters.
 */
void fl_engine_destroy(struct fl_engine *e);
/* Whether the engine is done with its client, and why. */
enum fl_finished {
	FL_FINISHED_NOT = 0,	/* still serving it */
	FL_FINISHED_GONE,	/* the client went away (ESRCH) */
	FL_FINISHED_KILLED,	/* the engine killed it (FL_ON_ERROR_KILL, or
				 * a page it could neither fill nor poison) */
};
enum fl_finished fl_engine_finished(const struct fl_engine *e);
/*
 * The first failure that made the engine poison pages or kill its client,
 * in one line ("" if none): the engine's threads hit it, so the caller's
 * fl_last_error() never saw it.
 */
const char *fl_engine_error(struct fl_engine *e);

/* ---- reset to the snapshot ---------------------------------------------- */

/*
 * In-process engines only (-EOPNOTSUPP for another process's memory), and
 * not for FL_REGION_MINOR regions.  docs/api.md has the details.
 *
 * fl_engine_track_writes(): from now on, record which pages are written,
 * by the best mechanism the kernel has (returned, > 0), else -EOPNOTSUPP
 * with fl_last_error() saying why.  It may be called at any time: pages
 * filled before it, and pages the client discards, are dropped at the next
 * reset whatever the tracking says.
 *
 * fl_engine_reset(): afterwards every page of every region reads what the
 * snapshot holds, as if just restored: written and discarded pages are
 * dropped and fault in again (with FL_RESET_EAGER they are filled again
 * before it returns); without tracking, every page filled so far is
 * dropped.  Other threads may run meanwhile.  The engine's threads
 * (fl_engine_start) must be running, else -EINVAL.  Returns the pages
 * reset, or -errno.
 */
enum fl_track {
	FL_TRACK_WP_ASYNC = 1,	/* the kernel's WP_ASYNC and PAGEMAP_SCAN (6.7+) */
	FL_TRACK_WP_SYNC,	/* write-protect faults the engine resolves */
};
int fl_engine_track_writes(struct fl_engine *e);

#define FL_RESET_EAGER		(1u << 0)
int fl_engine_reset(struct fl_engine *e, unsigned int flags);

/* ---- stats -------------------------------------------------------------- */

#define FL_LAT_BUCKETS 32	/* bucket i: latency in [2^i, 2^(i+1)) ns */

/*
 * The engine's counters, each named once: the struct below, the engine's
 * own atomics, fl_engine_stats() and fl_stats_json() are made from this
 * list.  New counters are appended to its end, never inserted: a reader
 * built against an older header reads the prefix it knows.  What each
 * counts: docs/api.md.
 */
#define FL_STATS_COUNTERS(X)						\
	X(faults) X(events) X(pages_copied) X(pages_zeroed)		\
	X(pages_poisoned) X(pages_prefetched) X(pages_background)	\
	X(pages_replayed) X(pages_moved) X(bytes_copied) X(eexist)	\
	X(eagain) X(source_errors) X(pages_gone)			\
	X(write_tracking) X(resets) X(pages_reset) X(reset_runs)	\
	X(reset_scan_ns) X(reset_drop_ns) X(reset_refill_ns)		\
	X(wp_faults)

/* The fixed fields first, the growing list of counters last. */
struct fl_stats {
	uint64_t restore_complete;	/* 1 once nothing is left missing */
	uint64_t restore_ms;	/* fl_engine_start() to restore complete */
	uint64_t lat_ns_sum;	/* fault read to wake, every fault served */
	uint64_t lat_ns_max;
	uint64_t lat_hist[FL_LAT_BUCKETS];
#define FL_STATS_FIELD(name)	uint64_t name;
	FL_STATS_COUNTERS(FL_STATS_FIELD)
#undef FL_STATS_FIELD
};

/*
 * Copy the engine's statistics into out, size bytes of it: the library
 * fills min(size, its own sizeof(struct fl_stats)) bytes and zeroes the
 * rest, so a reader built against an older header (a shorter struct) or
 * a newer one (counters this library does not have: they read 0) works
 * with any library of this soname.  size must be at least the fixed
 * fields' (offsetof(struct fl_stats, faults)), else -EINVAL.  Call it
 * through fl_engine_stats(), which passes the size the caller was
 * compiled with.
 */
int fl_engine_stats_sized(const struct fl_engine *e, struct fl_stats *out,
			  size_t size);
#define fl_engine_stats(e, out)	\
	fl_engine_stats_sized((e), (out), sizeof(*(out)))
/*
 * Restore progress: bytes of all regions not filled yet (removed memory
 * counts as done) and bytes in all.  It scans the page state maps (a byte
 * per page, 256 KiB per GiB): call it a few times a second, not per fault.
 * Never waits: -EBUSY while the engine is applying events (try later).
 * A scan that finds nothing missing marks the restore complete (stats
 * restore_complete; restore_ms up to the last page filled), also when
 * background restore is off or never had a quiet moment.
 */
int fl_engine_progress(struct fl_engine *e, uint64_t *missing,
		       uint64_t *total);
/*
 * Wait until the restore is complete (every page filled, or removed; a
 * poisoned page counts as filled: see stats pages_poisoned): 0;
 * -ETIMEDOUT after timeout_ms (< 0: no limit); -ESRCH if the client went
 * away or was killed before it was.  It polls fl_engine_progress() every
 * 2 ms: for a VMM that wants to drop its snapshot file, or time a restore.
 */
int fl_engine_wait(struct fl_engine *e, int timeout_ms);
/*
 * Latency percentile (0..100) from the histogram, in ns: an upper bound
 * (the end of the power-of-two bucket it falls in, or the largest latency
 * seen if that is less), so never above latency max.  It reads only the
 * fixed fields (first in the struct): any size of fl_stats will do.
 */
uint64_t fl_stats_percentile(const struct fl_stats *s, double pct);
/*
 * Render as a JSON object into a malloc'd string (free() it): the
 * counters of the first size bytes of s (as fl_engine_stats_sized());
 * call it through fl_stats_json(), which passes the caller's size.
 */
char *fl_stats_json_sized(const struct fl_stats *s, size_t size);
#define fl_stats_json(s)	fl_stats_json_sized((s), sizeof(*(s)))

/* ---- servers of several clients ------------------------------------------ */
/*
 * What a server of many clients needs beyond one engine per client (the
 * daemon is written on these): a client that forks while it is served
 * (CRIU's restored tasks: their uffds ask for UFFD_FEATURE_EVENT_FORK)
 * has each child's uffd handed to whoever serves the child; prefetch
 * held back until a client's memory is in place; a client of unknown pid
 * watched; a restore's completion told on an eventfd; background
 * restore's state shown (docs/api.md).
 */

/*
 * A forked child, the handler's to keep: its uffd; state_fd, a memfd of
 * the page states of every region in order (an engine created over it
 * with FL_ENGINE_TAKEOVER starts where the parent was); the regions
 * (malloc'd: free() them), whose source is the parent's.
 */
struct fl_engine_child {
	int uffd;
	int state_fd;
	int nregions;
	struct fl_region_desc *regions;
};
/*
 * Called on the engine thread that read the FORK event, with the engine
 * locked (it must not call the engine): 0 if it took the child, else
 * -errno and the engine closes what it was given.
 */
typedef int fl_engine_fork_fn(void *arg, struct fl_engine_child *c);
/* fl_engine_create(), and an adopted uffd may ask for fork events. */
int fl_engine_create_forking(const struct fl_engine_opts *opts,
			     fl_engine_fork_fn *fn, void *arg,
			     struct fl_engine **out);
/*
 * Readahead and background restore as flags (FL_ENGINE_NO_PREFETCH,
 * FL_ENGINE_NO_BACKGROUND) say, from now on, for an engine created with
 * both off: 0, or -errno if no filler thread could start.
 */
int fl_engine_prefetch_release(struct fl_engine *e, unsigned int flags);
/*
 * Is a client of unknown pid (FL_ENGINE_CLIENT_REMOTE) still there?  A
 * ZEROPAGE that changes nothing fails once its memory is gone, and the
 * engine then finishes: 1 while it is there, else 0.
 */
int fl_engine_client_alive(struct fl_engine *e);
/*
 * efd (an eventfd the caller keeps open) is written 1 each time the
 * restore completes.  Set before fl_engine_start().
 */
void fl_engine_notify_restored(struct fl_engine *e, int efd);

/* Where background restore is (a glance: it may change at once). */
enum fl_background {
	FL_BACKGROUND_OFF,	/* disabled (FL_ENGINE_NO_BACKGROUND, recording) */
	FL_BACKGROUND_WAITING,	/* for faults to pause (the quiet period) */
	FL_BACKGROUND_RUNNING,	/* the fillers are restoring */
	FL_BACKGROUND_STOPPED,	/* hugetlb pool empty: faults only */
	FL_BACKGROUND_DONE,	/* nothing left missing */
};
enum fl_background fl_engine_background(struct fl_engine *e);

/* ---- clones: one copy of a snapshot per host (0.6) ------------------------ */
/*
 * A snapshot cache holds a snapshot once, in a memfd (mode 0444), filled
 * from its source on demand, each page read from the source once however
 * many clones fault on it.  A clone maps the cache MAP_PRIVATE and is
 * served by UFFDIO_CONTINUE: it reads the cache's pages without a copy,
 * and its first write to a page copies it privately.  The cache's fill
 * map is the only truth of what is filled (anyone who can map the memfd
 * can plant zero pages in its holes).  docs/clones.md is the guide.
 */
struct fl_cache;

struct fl_cache_opts {
	unsigned int flags;	/* FL_CACHE_* */
	uint32_t reserved32;	/* zero */
	uint64_t reserved[7];	/* zero (new options come from here) */
};

/*
 * Fill the cache with pwrite() instead of UFFDIO_COPY into its own
 * MISSING-registered shared mapping (the default, and the faster one: to
 * compare them).
 */
#define FL_CACHE_PWRITE		(1u << 0)

/*
 * A cache of src (4 KiB pages, its size rounded up to one), empty (opts
 * may be NULL).  It holds a reference to src.  0, or -errno.
 */
int fl_cache_create(struct fl_source *src, const struct fl_cache_opts *opts,
		    struct fl_cache **out);
/* The cache's memfd (read-write, the cache's own: do not close it). */
int fl_cache_fd(const struct fl_cache *c);
/*
 * A new read-only descriptor of the cache (O_CLOEXEC) for a clone: what
 * a client of another uid gets cannot be reopened for writing.  The
 * caller closes it.  -errno on failure.
 */
int fl_cache_open_ro(const struct fl_cache *c);
/* The cache's size in bytes (the source's, rounded up to 4 KiB). */
uint64_t fl_cache_size(const struct fl_cache *c);
/*
 * Pages of [off, off+len) in the fill map (filled with the source's
 * bytes), or -EINVAL for a range beyond the cache.
 */
int64_t fl_cache_filled(const struct fl_cache *c, uint64_t off, uint64_t len);
/*
 * Drop the caller's reference: the memfd goes with the last one (clone
 * regions hold theirs).
 */
void fl_cache_destroy(struct fl_cache *c);

/*
 * Clone side, in the clone's process: map len bytes of the cache (fd,
 * from fl_cache_fd or fl_cache_open_ro) at offset off MAP_PRIVATE and
 * MADV_DONTFORK, create a uffd asking for UFFD_FEATURE_MINOR_SHMEM only
 * (never EVENT_REMOVE: each MADV_DONTNEED would wait for its handler) and
 * register the mapping MISSING | MINOR.  *addr and *uffd are the
 * caller's; hand the uffd to whoever serves it (the engine adopts it) and
 * keep it open for the life of the mapping.  0, or -errno.
 */
int fl_clone_map(int fd, uint64_t off, uint64_t len, void **addr, int *uffd);
/*
 * Serve len bytes at addr of the engine's client, a clone mapping of
 * cache c from offset cache_off, from c: a page not in the fill map is
 * filled (waiting for a fill of it under way), then mapped by
 * UFFDIO_CONTINUE; a filled page by CONTINUE alone, MINOR fault or not.
 * flags: 0, or FL_REGION_REGISTER to register the range MISSING | MINOR
 * on the engine's uffd here.  The engine's uffd must not ask for
 * UFFD_FEATURE_EVENT_REMOVE (-EINVAL) and must have MINOR_SHMEM
 * (-EOPNOTSUPP).  Not with write tracking (-EOPNOTSUPP).
 */
int fl_engine_add_clone_region(struct fl_engine *e, uint64_t addr,
			       uint64_t len, struct fl_cache *c,
			       uint64_t cache_off, unsigned int flags);

/* ---- errors ------------------------------------------------------------- */

/* One line describing the last failure on this thread ("" if none). */
const char *fl_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
