// SPDX-License-Identifier: Apache-2.0
/*
 * fl_user.c - a user's program, built by tests/install.sh against a staged
 * `make install` through pkg-config alone (never -Iinclude): it checks that
 * the library is at least the header's version, opens a raw memory file as
 * a source and prints the library's version, the header's and the source's
 * size, which the script compares with what it expects.
 *
 * Usage: fl_user RAW_FILE
 */
#include <faultline.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct fl_source *src;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: fl_user RAW_FILE\n");
		return 2;
	}
	r = fl_check_version(FL_VERSION_MAJOR, FL_VERSION_MINOR);
	if (r < 0 || fl_version_major() != FL_VERSION_MAJOR ||
	    fl_version_minor() != FL_VERSION_MINOR) {
		fprintf(stderr, "fl_user: library %d.%d, header %s (%s)\n",
			fl_version_major(), fl_version_minor(), FL_VERSION,
			fl_last_error());
		return 1;
	}
	r = fl_source_open(argv[1], &src);
	if (r < 0) {
		fprintf(stderr, "fl_user: %s: %s (%s)\n", argv[1], strerror(-r),
			fl_last_error());
		return 1;
	}
	printf("faultline %s header %s size %llu\n", fl_version(), FL_VERSION,
	       (unsigned long long)fl_source_size(src));
	fl_source_put(src);
	return 0;
}
