/* SPDX-License-Identifier: Apache-2.0 */
/*
 * supervise.h - faultline serve's supervisor (supervise.c); the records it
 * keeps are store.h's.
 */
#ifndef FAULTLINE_SUPERVISE_H
#define FAULTLINE_SUPERVISE_H

/* The server's end of the store channel, and the listener, by number. */
#define STORE_FD_ENV	"FAULTLINE_STORE_FD"
#define LISTEN_FD_ENV	"FAULTLINE_LISTEN_FD"

/*
 * Run `faultline serve` as the supervisor: start the server (this binary,
 * argv again, with the store channel), keep every session's descriptors,
 * restart the server when it dies, re-execute it on SIGHUP.  Returns the
 * exit status.
 */
int supervise_run(char **argv);

#endif
