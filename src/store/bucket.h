/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bucket.h - a store in a bucket, s3://BUCKET[/PREFIX] (bucket.c),
 * opened by store_open() (store.h), which every other caller goes
 * through.
 */
#ifndef FAULTLINE_STORE_BUCKET_H
#define FAULTLINE_STORE_BUCKET_H

struct store;

/*
 * The store at spec, credentials from the environment (s3.c).  0 with
 * *out, or -errno with one line naming what is missing.
 */
int bucket_open(const char *spec, struct store **out);

#endif
