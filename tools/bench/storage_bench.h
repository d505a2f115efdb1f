/* SPDX-License-Identifier: Apache-2.0 */
/*
 * storage_bench.h - what the files of `faultline bench storage` share:
 * its sizes, the rows and the context (storage_build.c makes the data
 * and the images, storage.c restores them and makes the table).
 */
#ifndef FAULTLINE_BENCH_STORAGE_H
#define FAULTLINE_BENCH_STORAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "bench.h"
#include "http_util.h"

#define DAYS		10
#define DIRTY_PCT	2
#define RUN_MIN		16	/* pages: 64 KiB */
#define RUN_MAX		512	/* pages: 2 MiB */
#define BLOCK_PAGES	16	/* the base's kind of data changes per 64 KiB */
#define SESSIONS	16
#define PG		4096ULL

enum { R_WHOLE, R_DIFFS, R_STORE, R_STORE64, R_S1, R_S10, R_MERGED, R_CHAIN, R_SESS1,
       R_SESS16, R_N };

struct st_ctx {
	uint64_t len, npages, sess_len;
	int runs;
	int run;		/* the run under way */
	uint8_t *day;		/* the day each page was written, 0: the base */
	uint64_t *want[DAYS + 1];	/* XXH3 of each page of days 1, 2, 10 */
	struct nginx ng;	/* its directory holds everything */
	bool http;
	char raw[200], local[200], images[200], store[200];
	char url1[256], url10[256], url_sess[256];
	int daemons;		/* daemons started (their socket names) */
	/* the images */
	double t_build[4];	/* whole, diffs, store, store64: seconds */
	uint64_t disk[4];	/* their bytes on disk */
	char store64[200];	/* the store with 64 KiB chunks (not served) */
	uint64_t one_image;	/* mean bytes of one whole image */
	uint64_t raw_nonzero;	/* the base's bytes in non-zero 64 KiB */
	uint64_t stored1, stored10, stored_sess;
	uint64_t floor10;	/* day 10's stored bytes day 1 does not hold */
	double touched;		/* 512 KiB chunks a day writes into, mean */
	/* per run and restore row */
	double *sec[R_N];
	double *orig[R_N];
	bool ok[R_N];
};

/* storage_build.c: the base, the ten days, their images and stores, with
 * their bytes on disk and stored: 0 or -errno. */
int storage_build(struct st_ctx *c);
/* rm -r dir (what it can). */
void storage_rm_tree(const char *dir);
/* Bytes nginx sent for the requests logged after its first from lines. */
uint64_t storage_origin_bytes(const struct nginx *n, long from);

#endif
