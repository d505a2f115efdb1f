// SPDX-License-Identifier: Apache-2.0
/*
 * abi.c - the public header's ABI on x86-64: the layout of every struct a
 * caller fills in (offsets, sizes, no implicit padding), the version calls,
 * the clone calls' node (0.6), and the reserved words that were padding
 * before 0.5: refused non-zero for a caller of the new fl_engine_create,
 * ignored for one of the 0.3 version that programs built against 0.3 and
 * 0.4 call.
 *
 * Decision: the old caller is reached as the dynamic linker reaches it,
 * through libfaultline.so and dlvsym(3) on the FAULTLINE_0.3 version, not
 * by calling an internal name, so what is tested is what an old binary
 * gets from the shared object.
 *
 * Usage: abi (the shared object in the directory of $FAULTLINE_BIN, else
 * build/).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "faultline.h"
#include "tap.h"

/* pid_t and the enums kept the int they replaced. */
_Static_assert(sizeof(pid_t) == sizeof(int) &&
	       _Alignof(pid_t) == _Alignof(int), "pid_t is an int");
_Static_assert(sizeof(enum fl_on_error) == sizeof(int) &&
	       _Alignof(enum fl_on_error) == _Alignof(int),
	       "enum fl_on_error is an int's size");

struct field {
	const char *name;
	size_t off, size;	/* as compiled */
	size_t want_off, want_size;	/* the ABI */
};

#define F(type, f, off, size)						\
	{ #type "." #f, offsetof(struct type, f),			\
	  sizeof(((struct type *)0)->f), off, size }

/* Every field, in order: a struct is these and nothing else. */
static const struct field engine_opts[] = {
	F(fl_engine_opts, uffd, 0, 4),
	F(fl_engine_opts, reserved_4, 4, 4),
	F(fl_engine_opts, chunk_size, 8, 8),
	F(fl_engine_opts, on_error, 16, 4),
	F(fl_engine_opts, client_pid, 20, 4),
	F(fl_engine_opts, flags, 24, 4),
	F(fl_engine_opts, reserved_28, 28, 4),
	F(fl_engine_opts, readahead_max, 32, 8),
	F(fl_engine_opts, quiet_ms, 40, 4),
	F(fl_engine_opts, state_fd, 44, 4),
	F(fl_engine_opts, client_pidfd, 48, 4),
	F(fl_engine_opts, reserved_52, 52, 4),
	F(fl_engine_opts, reserved, 56, 64),
};

static const struct field source_opts[] = {
	F(fl_source_opts, cache_dir, 0, 8),
	F(fl_source_opts, cache_max_bytes, 8, 8),
	F(fl_source_opts, note, 16, 8),
	F(fl_source_opts, note_arg, 24, 8),
	F(fl_source_opts, layers, 32, 8),
	F(fl_source_opts, nlayers, 40, 4),
	F(fl_source_opts, reserved32, 44, 4),
	F(fl_source_opts, reserved, 48, 48),
};

static const struct field region_desc[] = {
	F(fl_region_desc, addr, 0, 8),
	F(fl_region_desc, len, 8, 8),
	F(fl_region_desc, page_size, 16, 8),
	F(fl_region_desc, src_offset, 24, 8),
	F(fl_region_desc, flags, 32, 4),
	F(fl_region_desc, memfd, 36, 4),
	F(fl_region_desc, memfd_offset, 40, 8),
	F(fl_region_desc, reserved, 48, 32),
};

static const struct field cache_opts[] = {
	F(fl_cache_opts, flags, 0, 4),
	F(fl_cache_opts, reserved32, 4, 4),
	F(fl_cache_opts, reserved, 8, 56),
};

/* Each field where it was, and the fields tile the struct: no padding. */
static void check_layout(const char *type, const struct field *f, int n,
			 size_t size, size_t align, size_t want_size)
{
	size_t end = 0;
	int bad = 0;

	for (int i = 0; i < n; i++) {
		if (f[i].off != f[i].want_off || f[i].size != f[i].want_size) {
			diag("%s: offset %zu size %zu, want %zu %zu", f[i].name,
			     f[i].off, f[i].size, f[i].want_off,
			     f[i].want_size);
			bad++;
		}
		if (f[i].off != end)
			diag("%s: %zu bytes of padding before it", f[i].name,
			     f[i].off - end);
		bad += f[i].off != end;
		end = f[i].off + f[i].size;
	}
	ok(bad == 0 && end == size && size == want_size && align == 8,
	   "%s: %d fields at their offsets, no implicit padding, %zu bytes "
	   "aligned to %zu", type, n, size, align);
}

static void test_layout(void)
{
#define N(a)	(int)(sizeof(a) / sizeof((a)[0]))
	check_layout("fl_engine_opts", engine_opts, N(engine_opts),
		     sizeof(struct fl_engine_opts),
		     _Alignof(struct fl_engine_opts), 120);
	check_layout("fl_source_opts", source_opts, N(source_opts),
		     sizeof(struct fl_source_opts),
		     _Alignof(struct fl_source_opts), 96);
	check_layout("fl_region_desc", region_desc, N(region_desc),
		     sizeof(struct fl_region_desc),
		     _Alignof(struct fl_region_desc), 80);
	check_layout("fl_cache_opts", cache_opts, N(cache_opts),
		     sizeof(struct fl_cache_opts),
		     _Alignof(struct fl_cache_opts), 64);
#undef N
}

static void test_version(void)
{
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", FL_VERSION_MAJOR,
		 FL_VERSION_MINOR, FL_VERSION_PATCH);
	ok(!strcmp(FL_VERSION, want) && !strcmp(fl_version(), want),
	   "fl_version() is FL_VERSION, made of the numbers (%s)", want);
	is_int(fl_version_major(), FL_VERSION_MAJOR, "fl_version_major()");
	is_int(fl_version_minor(), FL_VERSION_MINOR, "fl_version_minor()");
	is_int(fl_check_version(FL_VERSION_MAJOR, FL_VERSION_MINOR), 0,
	       "fl_check_version(this version): 0");
	is_int(fl_check_version(0, 0), 0, "fl_check_version(0, 0): 0");
	is_int(fl_check_version(FL_VERSION_MAJOR - 1, 999), 0,
	       "an older major with any minor: 0");
	ok(fl_check_version(FL_VERSION_MAJOR, FL_VERSION_MINOR + 1) ==
	   -EOPNOTSUPP && strstr(fl_last_error(), "older"),
	   "a newer minor: -EOPNOTSUPP saying the library is older (%s)",
	   fl_last_error());
	is_int(fl_check_version(FL_VERSION_MAJOR + 1, 0), -EOPNOTSUPP,
	       "a newer major: -EOPNOTSUPP");
}

typedef int create_fn(const struct fl_engine_opts *, struct fl_engine **);

/* The three words that were padding before 0.5, set to what garbage is. */
static struct fl_engine_opts garbage(void)
{
	struct fl_engine_opts o = { .uffd = -1 };

	o.reserved_4 = 0xdeadbeef;
	o.reserved_28 = 0xa5a5a5a5;
	o.reserved_52 = 1;
	return o;
}

/* This program is built against this header: it gets the new version. */
static void test_new_caller(void)
{
	static const char *const word[] = { "reserved_4", "reserved_28",
					    "reserved_52" };
	struct fl_engine *e;

	for (int i = 0; i < 3; i++) {
		struct fl_engine_opts o = { .uffd = -1 };
		uint32_t *w = i == 0 ? &o.reserved_4 : i == 1 ?
			      &o.reserved_28 : &o.reserved_52;
		int r;

		*w = 1u << (i * 8);
		r = fl_engine_create(&o, &e);
		ok(r == -EINVAL && strstr(fl_last_error(), word[i]),
		   "a new caller's %s not zero: -EINVAL naming it (%d: %s)",
		   word[i], r, fl_last_error());
		if (r == 0)
			fl_engine_destroy(e);
	}
	struct fl_engine_opts o = { .uffd = -1 };
	int r = fl_engine_create(&o, &e);

	ok(r == 0, "with them zero it creates the engine (%s)",
	   r ? fl_last_error() : "");
	if (r == 0)
		fl_engine_destroy(e);
}

/* What a program built against 0.3 or 0.4 calls: fl_engine_create@0.3. */
static void test_old_caller(void)
{
	const char *bin = getenv("FAULTLINE_BIN");
	char dir[512], path[600];
	void *h;

	snprintf(dir, sizeof(dir), "%s", bin && *bin ? bin : "build/faultline");
	snprintf(path, sizeof(path), "%s/libfaultline.so", dirname(dir));
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!ok(h != NULL, "dlopen %s (%s)", path, h ? "" : dlerror())) {
		skip(6, "no shared object");
		return;
	}
	create_fn *old = (create_fn *)dlvsym(h, "fl_engine_create",
					     "FAULTLINE_0.3");
	create_fn *cur = (create_fn *)dlvsym(h, "fl_engine_create",
					     "FAULTLINE_0.5");
	create_fn *def = (create_fn *)dlsym(h, "fl_engine_create");
	void (*destroy)(struct fl_engine *) = (void (*)(struct fl_engine *))
					      dlsym(h, "fl_engine_destroy");
	const char *(*why)(void) = (const char *(*)(void))
				   dlsym(h, "fl_last_error");
	struct fl_engine_opts o = garbage();
	struct fl_engine *e;
	int r;

	if (!ok(old && cur && old != cur && def == cur && destroy && why,
		"fl_engine_create@FAULTLINE_0.3 and @@FAULTLINE_0.5 (the "
		"default) are two functions")) {
		skip(5, "versions missing");
		dlclose(h);
		return;
	}
	r = old(&o, &e);
	ok(r == 0, "the 0.3 version ignores garbage where 0.4 had padding "
	   "(%s)", r ? why() : "engine created");
	if (r == 0)
		destroy(e);
	r = cur(&o, &e);
	ok(r == -EINVAL && strstr(why(), "reserved_4"),
	   "the 0.5 version refuses it (%d: %s)", r, why());
	if (r == 0)
		destroy(e);
	o.reserved[0] = 1;
	r = old(&o, &e);
	ok(r == -EINVAL && strstr(why(), "reserved"),
	   "the 0.3 version still refuses non-zero reserved[] (%s)", why());
	ok(dlvsym(h, "fl_check_version", "FAULTLINE_0.5") &&
	   dlvsym(h, "fl_version_major", "FAULTLINE_0.5") &&
	   dlvsym(h, "fl_version_minor", "FAULTLINE_0.5"),
	   "the version calls are in the FAULTLINE_0.5 node");
	ok(dlvsym(h, "fl_cache_create", "FAULTLINE_0.6") &&
	   dlvsym(h, "fl_clone_map", "FAULTLINE_0.6") &&
	   dlvsym(h, "fl_engine_add_clone_region", "FAULTLINE_0.6") &&
	   !dlvsym(h, "fl_cache_create", "FAULTLINE_0.5"),
	   "the clone calls are in the FAULTLINE_0.6 node");
	ok(dlvsym(h, "fl_version", "FAULTLINE_0.2") &&
	   !dlvsym(h, "fl_version", "FAULTLINE_0.5"),
	   "fl_version stays in FAULTLINE_0.2 alone");
	dlclose(h);
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{ "layout", test_layout },
	{ "version", test_version },
	{ "new caller", test_new_caller },
	{ "old caller", test_old_caller },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		diag("%s", cases[i].name);
		cases[i].fn();
	}
	return done_testing();
}
