/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dir_store.h - a store in a directory (dir_store.c), opened by
 * store_open() (store.h), which every other caller goes through.
 */
#ifndef FAULTLINE_STORE_DIR_STORE_H
#define FAULTLINE_STORE_DIR_STORE_H

struct store;

/*
 * The store at dir (STORE_CREATE: made, with chunks/; STORE_EXISTING:
 * chunks/ must be there).  0 with *out, or -errno with one line.
 */
int dir_store_open(const char *dir, unsigned int flags, struct store **out);

#endif
