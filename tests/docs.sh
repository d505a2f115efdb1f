#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# docs.sh - the docs and `faultline help` in step (TAP, run by make check):
#   - every command `faultline help` lists appears in README.md or
#     docs/*.md as `faultline CMD`;
#   - every option `faultline help CMD` shows appears in them;
#   - every `faultline CMD ... --option` the docs show (within one code
#     span or line) is in `faultline help CMD`;
#   - every "faultline X.Y.Z" the docs show is the binary's version.
# Decision: text against text, no list kept here to go stale: a command
# or option added to one side and not the other fails.
#
# usage: sh tests/docs.sh (from the repository root; BUILD=DIR)

BUILD=${BUILD:-build}
FL=${FAULTLINE_BIN:-$BUILD/faultline}
tmp=$(mktemp -d /tmp/fl-docs.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
fails=0
docs="README.md docs/*.md"

ok() {
	n=$((n + 1))
	if [ -s "$2" ]; then
		echo "not ok $n - $1"
		sed 's/^/#   /' "$2" | head -n 20
		fails=$((fails + 1))
	else
		echo "ok $n - $1"
	fi
}

echo "1..4"

cmds=$("$FL" help | sed -n '/^commands:/,/^$/s/^  \([a-z-]*\) .*/\1/p')
: >"$tmp/cmds"
: >"$tmp/opts"
for c in $cmds; do
	# shellcheck disable=SC2086 # docs is a list of files
	grep -q "faultline $c\b" $docs || echo "faultline $c" >>"$tmp/cmds"
	"$FL" help "$c" >"$tmp/help.$c" 2>&1
	for o in $(grep -oE -- '--[a-z][a-z0-9-]+' "$tmp/help.$c" | sort -u); do
		# shellcheck disable=SC2086
		grep -qe "$o\b" $docs || echo "faultline $c $o" >>"$tmp/opts"
	done
done
[ -n "$cmds" ] || echo "faultline help listed no command" >"$tmp/cmds"
ok "every command of faultline help is in the docs" "$tmp/cmds"
ok "every option of faultline help CMD is in the docs" "$tmp/opts"

# `faultline CMD ...` up to a backtick, a pipe's end or a comment.
: >"$tmp/shown"
for c in $cmds; do
	# shellcheck disable=SC2086
	grep -ohE "faultline $c( [^\`#;|)]*)?" $docs |
	grep -oE -- ' --[a-z][a-z0-9-]+' | sort -u | while read -r o; do
		grep -qe "$o\b" "$tmp/help.$c" ||
			echo "faultline $c $o: not in faultline help $c"
	done >>"$tmp/shown"
done
ok "every faultline CMD --option the docs show is in its help" "$tmp/shown"

v=$(sed -n 's/^#define FL_VERSION[\t ]*"\(.*\)"/\1/p' include/faultline.h)
# shellcheck disable=SC2086
grep -noE 'faultline [0-9]+\.[0-9]+\.[0-9]+' $docs | grep -v "faultline $v\$" \
	>"$tmp/version"
ok "sample outputs in the docs carry version $v" "$tmp/version"

[ "$fails" -eq 0 ]
