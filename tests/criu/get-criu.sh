#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tests/criu/get-criu.sh - the criu binary the CRIU tests run: prints its
# path on stdout, progress and one-line failures on stderr.
#
# A criu >= 4.1 on PATH is used as it is.  Otherwise criu's source is
# fetched by package name from Debian's archive (suite $CRIU_SUITE,
# default trixie: 4.1.1) through a private apt configuration under
# $CRIU_DIR (the system's sources and lists are never touched), and only
# the criu binary is built and cached as $CRIU_DIR/bin/criu.
#
# Decision: 4.1 at least, because older CRIU cannot run on kernels that
# split [vvar] and [vvar_vclock] ("vdso: Unexpected rt vDSO area bounds");
# the source by package name, because apt checks the tarball against the
# archive's signed index, which no URL pinned here would.  Its build
# packages are the Makefile's CRIU_PKGS (make check installs them).
set -eu

CRIU_DIR=${CRIU_DIR:-build/criu}
CRIU_SUITE=${CRIU_SUITE:-trixie}
MIN=4.1

fail() { echo "get-criu: $*" >&2; exit 1; }

# "Version: 4.1.1" -> ok if >= $MIN
good() {
	v=$("$1" --version 2>/dev/null | sed -n 's/^Version: *//p')
	[ -n "$v" ] && dpkg --compare-versions "$v" ge "$MIN"
}

if p=$(command -v criu 2>/dev/null) && good "$p"; then
	echo "$p"
	exit 0
fi
mkdir -p "$CRIU_DIR"
CRIU_DIR=$(cd "$CRIU_DIR" && pwd)
BIN=$CRIU_DIR/bin/criu
if [ -x "$BIN" ] && good "$BIN"; then
	echo "$BIN"
	exit 0
fi

# One build at a time (make -j2 check may ask twice).
exec 8>"$CRIU_DIR/.lock"
flock 8
if [ -x "$BIN" ] && good "$BIN"; then
	echo "$BIN"
	exit 0
fi
command -v apt-get >/dev/null || fail "no criu >= $MIN on PATH and no apt-get to fetch its source"

APT=$CRIU_DIR/apt
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$CRIU_DIR/src"
echo "deb-src http://deb.debian.org/debian $CRIU_SUITE main" > "$APT/sources.list"
aptc() {
	apt-get -q -o Dir::Etc::SourceList="$APT/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$APT/lists" -o Dir::Cache="$APT/cache" \
		-o APT::Sandbox::User=root -o Acquire::Retries=3 "$@"
}

tarball=$(ls "$CRIU_DIR"/src/criu_*.orig.tar.* 2>/dev/null | head -n1 || true)
if [ -z "$tarball" ]; then
	echo "get-criu: fetching criu's source from Debian $CRIU_SUITE" >&2
	aptc update > "$CRIU_DIR/apt.log" 2>&1 ||
		fail "apt-get update of $CRIU_SUITE's sources failed (see $CRIU_DIR/apt.log)"
	# --tar-only: the upstream tarball alone, checked against the index.
	(cd "$CRIU_DIR/src" && aptc source --download-only --tar-only criu) \
		>> "$CRIU_DIR/apt.log" 2>&1 ||
		fail "apt-get source criu failed (see $CRIU_DIR/apt.log)"
	tarball=$(ls "$CRIU_DIR"/src/criu_*.orig.tar.* 2>/dev/null | head -n1 || true)
	[ -n "$tarball" ] || fail "apt-get source criu fetched no tarball (see $CRIU_DIR/apt.log)"
fi
ver=$(basename "$tarball" | sed 's/^criu_\(.*\)\.orig\.tar\..*$/\1/')
dpkg --compare-versions "$ver" ge "$MIN" ||
	fail "$CRIU_SUITE has criu $ver, older than $MIN (try CRIU_SUITE=sid)"

tree=$CRIU_DIR/src/criu-$ver
rm -rf "$tree" && mkdir -p "$tree"
tar -C "$tree" -xf "$tarball" --strip-components=1 || fail "cannot unpack $tarball"
echo "get-criu: building criu $ver (make criu, about a minute)" >&2
make -C "$tree" -j"$(nproc)" criu > "$CRIU_DIR/build.log" 2>&1 ||
	fail "building criu $ver failed: $(grep -m1 -E 'error:|\*\*\*' "$CRIU_DIR/build.log" || echo '?') (see $CRIU_DIR/build.log)"
good "$tree/criu/criu" || fail "$tree/criu/criu does not say it is criu >= $MIN"
mkdir -p "$CRIU_DIR/bin"
cp "$tree/criu/criu" "$BIN.new" && mv -f "$BIN.new" "$BIN"
echo "get-criu: criu $ver built" >&2
echo "$BIN"
