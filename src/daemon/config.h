/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h - what `faultline serve` is asked to do (its options), read by
 * every file of the server.
 *
 * Decision: apart from serve.h, so that the files serve.c uses (daemon.h's
 * state, the session, its handshake) read the options without including
 * the file above them.
 */
#ifndef FAULTLINE_DAEMON_CONFIG_H
#define FAULTLINE_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct fl_source;

#define SERVE_MAX_UIDS 32

struct serve_config {
	const char *socket_path;	/* NULL: systemd socket activation */
	const char *protocol;		/* proto.h's name; NULL: Firecracker */
	const char *mem_file;
	const char *const *layers;	/* diffs over mem_file, bottom first */
	unsigned int nlayers;
	uint64_t chunk;			/* 0: the engine's default */
	unsigned int threads;		/* engine threads per session */
	const char *stats_json;		/* append one JSON line per session */
	bool once;			/* exit after the first session ends */
	uid_t allow_uids[SERVE_MAX_UIDS];
	int nallow;			/* 0: the daemon's uid, root and
					 * socket_uid */
	bool socket_chown;		/* the socket file given to: */
	uid_t socket_uid;		/* its owner */
	gid_t socket_gid;		/* its group ((gid_t)-1: unchanged) */
	int on_error;			/* enum fl_on_error */
	int handshake_timeout_ms;
	const char *cache_dir;		/* local block cache for a URL source */
	uint64_t cache_max;		/* its bound; 0: FL_DEFAULT_CACHE_MAX */
	const char *record;		/* write each session's trace here */
	const char *replay;		/* replay this trace in every session */
	bool progress;			/* draw restore progress on stderr */
	unsigned int engine_flags;	/* FL_ENGINE_NO_PREFETCH, _NO_BACKGROUND */
	struct fl_source *source;	/* opened by the caller: mem_file unused */
	const void *proto_arg;		/* for the protocol's open() */
	bool one_client;		/* one connection, then no listener; exit
					 * when its sessions (and their forks) end */
	int status_fd;			/* > 0: one '\0' there once listening */
	const char *control_path;	/* the control socket (`faultline
					 * status`); NULL: none */
	const char *metrics_addr;	/* "HOST:PORT" for GET /metrics; NULL */
};

#endif
