/* SPDX-License-Identifier: Apache-2.0 */
/*
 * supervise.h - faultline serve's supervisor (supervise.c); the records it
 * keeps are supchan.h's.
 */
#ifndef FAULTLINE_SUPERVISE_H
#define FAULTLINE_SUPERVISE_H

#include <signal.h>

/* The server's end of the supervisor channel, and the listener, by number. */
#define SUP_FD_ENV	"FAULTLINE_STORE_FD"
#define LISTEN_FD_ENV	"FAULTLINE_LISTEN_FD"
/*
 * Set by a supervisor that accepts the listener's clients for its server
 * (SUP_WANT, SUP_ACCEPTED) and answers SUP_ACK (SUP_KEPT).
 */
#define SUP_ACCEPTS_ENV	"FAULTLINE_SUPERVISOR_ACCEPTS"
/* Set for a server started after another: a restart or a handover. */
#define RESTART_ENV	"FAULTLINE_RESTARTED"

/*
 * SIGTERM and SIGINT reach the server from the supervisor as this
 * real-time signal, the original's number its value.  A terminal's
 * Ctrl-C and `systemctl stop` signal the server too; it ignores those
 * (one signal would count twice), but while one is pending the kernel
 * merges a forwarded SIGINT into it, and the server saw only the one it
 * ignores: the first Ctrl-C did nothing.  Real-time signals queue apart.
 */
#define SUPERVISE_STOP_SIG	(SIGRTMIN + 1)

/*
 * Run `faultline serve` as the supervisor: start the server (this binary,
 * argv again, with the supervisor channel), keep every session's descriptors,
 * restart the server when it dies, re-execute it on SIGHUP.  Returns the
 * exit status.
 */
int supervise_run(char **argv);

#endif
