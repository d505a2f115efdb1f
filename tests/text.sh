#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# text.sh - user-facing text stands alone (TAP, run by make check and make
# check-loaded): what a user on a fresh clone reads names no issue or
# "seed" of the project's history and no path outside the repository.
#   - `faultline help`, `--help`, each command's `--help` and `bench list`
#     hold neither word "seed" nor "issue";
#   - the tables `bench drop --quick` and `bench policy --quick` print
#     (one with cited figures, one without: both kinds of header) neither;
#   - README.md and docs/*.md hold no "issue N", "the issue's", no word
#     "seed" (but a fuzzer's seed corpus and XXH64's seed 0), no ../shared,
#     no /work/ path and no file of notes kept outside the tree
#     (DESIGN.md, KERNEL-FACTS.md).
# Cited figures are named by their kernel thread (author, subject, year).
#
# usage: sh tests/text.sh (from the repository root; BUILD=DIR for another
# build directory)

BUILD=${BUILD:-build}
FL=${FAULTLINE_BIN:-$BUILD/faultline}
tmp=$(mktemp -d /tmp/fl-text.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
fails=0

# ok DESCRIPTION FILE: FILE (grep -n output of offending lines) is empty.
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

words='\bseeds?\b|\bissues?\b'
docs='issue #?[0-9]+|/work/|(the|this) issue'\''s|\bseeds? [0-9]{3}\b|\.\./shared|DESIGN\.md|KERNEL-FACTS'

echo "1..5"

: >"$tmp/help"
for c in "--help" "help" "serve --help" "send --help" "lazy-pages --help" \
	 "vmm --help" "probe --help" "image --help" "bench --help"; do
	# shellcheck disable=SC2086 # c is a command and its option
	"$FL" $c >"$tmp/out" 2>&1
	grep -inE "$words" "$tmp/out" | sed "s|^|faultline $c: |" >>"$tmp/help"
done
ok "help and every command's --help name no seed or issue" "$tmp/help"

"$FL" bench list >"$tmp/out" 2>&1
if [ ! -s "$tmp/out" ]; then
	echo "faultline bench list printed nothing" >"$tmp/list"
else
	grep -inE "$words" "$tmp/out" >"$tmp/list"
fi
ok "bench list names no seed or issue" "$tmp/list"

for b in drop policy; do
	"$FL" bench $b --quick >"$tmp/$b.out" 2>&1
	if ! grep -q "median of" "$tmp/$b.out"; then
		echo "faultline bench $b --quick printed no table" >"$tmp/$b"
	else
		grep -inE "$words" "$tmp/$b.out" >"$tmp/$b"
	fi
done
ok "bench drop --quick: its table (cited figures) names no seed or issue" \
	"$tmp/drop"
ok "bench policy --quick: its table names no seed or issue" "$tmp/policy"

{
	grep -nE "$docs" README.md docs/*.md
	# "seed" at all, but a fuzzer's seed corpus and a hash's seed value
	grep -niE '\bseeds?\b' README.md docs/*.md |
		grep -viE 'seed corp|XXH64.*seed 0'
} >"$tmp/docs"
ok "README.md and docs/ name no issue, seed or file outside the tree" \
	"$tmp/docs"

[ "$fails" -eq 0 ]
