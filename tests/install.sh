#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# install.sh - what a user of `make install` gets (TAP, run by make check
# and make check-loaded): a staged install (DESTDIR) into a temporary
# directory, then tests/install/fl_user.c built against it through
# pkg-config alone (PKG_CONFIG_PATH into the stage, nothing else) and run:
#   - shared: libfaultline.so, run with LD_LIBRARY_PATH into the stage;
#   - static: libfaultline.a with its dependencies shared, the README's
#     command, run without LD_LIBRARY_PATH (a fully static program cannot
#     be linked from Debian's packages: README, Install);
#   - `pkg-config --static --libs faultline` holds every flag of its
#     dependencies' own --static lists (libcurl's -lnghttp2 ...);
# with Debian's multiarch LIBDIR (PREFIX=/usr, LIBDIR=/usr/lib/TRIPLET:
# the .pc three levels below the prefix), PREFIX=/opt/faultline with the
# default LIBDIR (two levels), and that PREFIX with LIBDIR=/usr/lib64,
# outside it (the .pc climbs to / and down to the prefix).
#
# Decision: `make install` itself, not a copy of its steps, so what is
# tested is what installs; the build is make check's (up to date: this
# only copies).  Not in make check-sanitize: a program linked against the
# sanitized build's libfaultline.a needs the sanitizer runtime, and what
# this checks is packaging, which the plain build's run covers.
#
# usage: sh tests/install.sh (from the repository root; BUILD=DIR for
# another build directory, MAKE for another make)

BUILD=${BUILD:-build}
MAKE=${MAKE:-make}
CC=${CC:-cc}
unset PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_LIBDIR

n=0
fails=0
ok() {	# ok STATUS NAME
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		fails=$((fails + 1))
	fi
}
diag() { sed 's/^/# /' "$@"; }

tmp=$(mktemp -d /tmp/fl-install.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

version=$(sed -n 's/^#define FL_VERSION[\t ]*"\(.*\)"/\1/p' include/faultline.h)
# A raw memory file of three pages: its size is what fl_user prints.
head -c 12288 /dev/urandom >"$tmp/mem.raw"
expect="faultline $version header $version size 12288"

# stage NAME PREFIX [LIBDIR]: make install into $tmp/NAME; sets pc (the
# PKG_CONFIG_PATH), stage and libdir (as installed, inside the stage).
stage() {
	stage=$tmp/$1
	libdir=${3:-$2/lib}
	pc=$stage$libdir/pkgconfig
	$MAKE -s install BUILD="$BUILD" DESTDIR="$stage" PREFIX="$2" \
		${3:+LIBDIR="$3"} >"$tmp/$1.log" 2>&1
	r=$?
	ok $r "$1: make install DESTDIR=$stage PREFIX=$2${3:+ LIBDIR=$3}"
	[ $r -eq 0 ] || diag "$tmp/$1.log"
	[ -f "$pc/faultline.pc" ]
	ok $? "$1: faultline.pc in $pc"
}

fpc() { PKG_CONFIG_PATH=$pc pkg-config "$@"; }

# run NAME BINARY [ENV...]: runs it on mem.raw and compares its line.
run() {
	name=$1 bin=$2
	shift 2
	out=$(env "$@" "$bin" "$tmp/mem.raw" 2>"$tmp/run.err")
	[ "$out" = "$expect" ]
	r=$?
	ok $r "$name: prints '$expect'"
	[ $r -eq 0 ] || { echo "# got: '$out'"; diag "$tmp/run.err"; }
}

# shared NAME: built with --cflags --libs, linked to libfaultline.so.
shared() {
	bin=$tmp/$1-shared
	$CC -o "$bin" tests/install/fl_user.c $(fpc --cflags --libs faultline) \
		>"$tmp/cc.log" 2>&1
	r=$?
	ok $r "$1: cc \$(pkg-config --cflags --libs faultline)"
	[ $r -eq 0 ] || diag "$tmp/cc.log"
	readelf -d "$bin" | grep -q 'NEEDED.*\[libfaultline\.so\.[0-9]*\]'
	ok $? "$1: needs libfaultline.so.N"
	run "$1 shared" "$bin" LD_LIBRARY_PATH="$stage$libdir"
}

triplet=$($CC -print-multiarch 2>/dev/null)
echo "1..21"

stage multiarch /usr "/usr/lib/${triplet:-x86_64-linux-gnu}"
[ "$(fpc --modversion faultline)" = "$version" ]
ok $? "multiarch: pkg-config --modversion faultline is $version"
inc=$(fpc --variable=includedir faultline)
[ -f "$inc/faultline.h" ] && case $inc in "$stage"/*) true ;; *) false ;; esac
ok $? "multiarch: includedir ($inc) is the stage's, holds faultline.h"
shared multiarch

# Every flag of the dependencies' own static lists (deduplicated by
# pkg-config in either order), and the library itself.
need=$(fpc --static --libs $(fpc --print-requires-private faultline))
have=" $(fpc --static --libs faultline) "
missing=
for f in -lfaultline -lpthread $need; do
	case $have in *" $f "*) ;; *) missing="$missing $f" ;; esac
done
[ -z "$missing" ]
ok $? "multiarch: pkg-config --static --libs faultline is complete"
[ -z "$missing" ] || echo "# missing:$missing"
case $have in *" -lnghttp2 "*) r=0 ;; *) r=1 ;; esac
ok $r "multiarch: ... with libcurl's -lnghttp2"

# The README's static command: libfaultline.a, the dependencies shared.
bin=$tmp/multiarch-static
$CC -o "$bin" tests/install/fl_user.c $(fpc --cflags faultline) \
	"$(fpc --variable=libdir faultline)/libfaultline.a" \
	$(fpc --libs $(fpc --print-requires-private faultline)) -pthread \
	>"$tmp/cc.log" 2>&1
r=$?
ok $r "multiarch: cc ... \$libdir/libfaultline.a \$(pkg-config --libs \$(pkg-config --print-requires-private faultline))"
[ $r -eq 0 ] || diag "$tmp/cc.log"
readelf -d "$bin" 2>/dev/null | grep -q 'NEEDED.*libfaultline'
[ $? -ne 0 ] && readelf -d "$bin" | grep -q 'NEEDED.*libcurl'
ok $? "multiarch static: libfaultline linked in, libcurl shared"
run "multiarch static" "$bin"

stage opt /opt/faultline
[ "$(fpc --variable=libdir faultline)" -ef "$stage/opt/faultline/lib" ]
ok $? "opt: libdir is the stage's /opt/faultline/lib"
shared opt

stage outside /opt/faultline /usr/lib64
[ -f "$(fpc --variable=includedir faultline)/faultline.h" ] &&
	[ "$(fpc --variable=libdir faultline)" -ef "$stage/usr/lib64" ] &&
	[ "$(fpc --variable=includedir faultline)" -ef "$stage/opt/faultline/include" ]
ok $? "outside: libdir and includedir are the stage's"

[ "$n" -eq 21 ] || echo "# planned 21, ran $n"
[ "$fails" -eq 0 ] && [ "$n" -eq 21 ]
