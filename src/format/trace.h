/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trace.h - working-set traces: the order in which a client first touched
 * its memory, recorded as source ranges, and replayed as sorted, coalesced
 * runs when the next client starts (REAP, ASPLOS'21).
 */
#ifndef FAULTLINE_TRACE_H
#define FAULTLINE_TRACE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct trace_run {
	uint64_t off;		/* source offset */
	uint64_t len;		/* bytes */
};

struct trace {
	pthread_mutex_t lock;
	struct trace_run *runs;
	size_t n, cap;
};

int trace_init(struct trace *t);
void trace_free(struct trace *t);
/* Append a first touch (thread-safe). */
int trace_add(struct trace *t, uint64_t off, uint64_t len);
/* Write in touch order; the file format is described in trace.c. */
int trace_save(struct trace *t, const char *path);
/* Read a trace file into t in touch order, merging runs that touch. */
int trace_load(struct trace *t, const char *path);

#endif
