#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# demo.sh - `make demo`: what `faultline serve` buys a restored microVM on
# this machine, in about 20 seconds.  A 256 MiB guest of `faultline vmm`
# (a real KVM guest where /dev/kvm works) touches all of its memory right
# after a "restore": memory read before it starts (prepopulated, the
# limit), Firecracker's File backend (a private mmap of the memory file),
# `faultline serve` with its default policy over Firecracker's handshake,
# and a naive handler (4 KiB per fault, nothing ahead).  The runs are
# `faultline bench kvm-restore`'s, paired per round.  Run from the
# repository root after make.
set -euo pipefail

fl="$PWD/build/faultline"
if [[ ! -x $fl ]]; then
	echo "demo: $fl not found: run make first (from the repository root)" >&2
	exit 1
fi
tmp=$(mktemp -d /tmp/faultline-demo.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

rows=linear_prepopulated,linear_file,linear_daemon,linear_uffd_naive_4k
echo "faultline demo: restore a 256 MiB guest through 'faultline serve'"
if "$fl" vmm --help >/dev/null && [[ -r /dev/kvm && -w /dev/kvm ]]; then
	echo "The guest is a KVM virtual machine (faultline vmm: 32-bit guest," \
	     "one word read per 4 KiB page)."
else
	echo "No usable /dev/kvm here: the guest is threads of a process making" \
	     "the same touches, so a first touch costs what this machine's own" \
	     "page faults cost, and where that is small a restore is bound by" \
	     "copying; the copy floor row is one thread copying the same bytes" \
	     "once, which no restoring handler can beat."
	rows+=,linear_copy_floor
fi
echo "Running 'faultline bench kvm-restore --size 256M --runs 5' on those rows..."
"$fl" bench kvm-restore --size 256M --runs 5 --only "$rows" --json >"$tmp/bench.json"

perl -MJSON::PP -e '
	local $/;
	my $j = decode_json(<STDIN>);
	my $r = $j->{results};
	my @rows = (
		[ "linear_prepopulated", "prepopulated memory (read before)" ],
		[ "linear_copy_floor", "copy floor (the bytes copied once)" ],
		[ "linear_file", "File backend (private mmap of the file)" ],
		[ "linear_daemon", "faultline serve, default policy" ],
		[ "linear_uffd_naive_4k", "naive handler (4 KiB per fault)" ],
	);
	printf "\n%s\n%.0f MiB guest (%s), linear touch, median of %d rounds\n",
		$j->{title}, $j->{bytes} / 2**20, $j->{guest}, $j->{runs};
	printf "  %-42s %9s %9s %8s  %s\n", "restored by", "ms", "vs prepop",
		"faults", "bytes ok";
	for my $row (@rows) {
		my $x = $r->{ $row->[0] } or next;
		printf "  %-42s %9.1f %8.2fx %8d  %s\n", $row->[1],
			$x->{seconds} * 1e3, $x->{ratio}, $x->{faults},
			$x->{checksum_ok} ? "yes" : "NO";
	}
	my ($d, $n) = map { $r->{$_}{ratio} } qw(linear_daemon linear_uffd_naive_4k);
	printf "\nverdict: the guest restored through faultline serve ran at " .
		"%.2fx the time of memory that was already there; a naive " .
		"handler, %.2fx.\n", $d, $n;
	print "(ratios: the median of per-round ratios to the prepopulated " .
		"run of the same round)\n";
' <"$tmp/bench.json"
