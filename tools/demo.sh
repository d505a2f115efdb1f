#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# demo.sh - `make demo`: what `faultline serve` buys a restored guest on
# this machine, in under a minute on 2 CPUs (it prints the time it took).
# A 256 MiB guest of `faultline vmm` touches all of its memory right after
# a "restore", restored each of these ways: memory read before it starts
# (prepopulated, the reference), `faultline serve` with its default
# policy over Firecracker's handshake, and a naive handler (4 KiB per
# fault, nothing ahead).  The runs are `faultline bench kvm-restore`'s,
# paired per round.  Run from the repository root after make.
#
# Where /dev/kvm works the guest is a KVM virtual machine, and the demo
# adds Firecracker's File backend (a private mmap of the memory file).
# Where it does not, no VM can run: the guest is the VMM's process guest
# (threads making the same touches), the demo says so before anything
# else, leaves the File backend out (a process reading a cached file maps
# the page cache and copies nothing: no restore to compare) and adds the
# copy floor (one thread copying the same bytes once, no guest).
set -euo pipefail

start=$SECONDS
fl="$PWD/build/faultline"
if [[ ! -x $fl ]]; then
	echo "demo: $fl not found: run make first (from the repository root)" >&2
	exit 1
fi
tmp=$(mktemp -d /tmp/faultline-demo.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

rows=linear_prepopulated,linear_daemon,linear_uffd_naive_4k
if [[ -r /dev/kvm && -w /dev/kvm ]]; then
	echo "faultline demo: restore a 256 MiB KVM guest through" \
	     "'faultline serve'"
	echo "The guest is a KVM virtual machine (faultline vmm: a 32-bit" \
	     "guest reading one word per 4 KiB page)."
	rows+=,linear_file
else
	if [[ -e /dev/kvm ]]; then
		why="/dev/kvm is not readable and writable by this user"
	else
		why="there is no /dev/kvm"
	fi
	cat <<EOF
faultline demo: no VM can run on this machine ($why).
So there is no virtual machine to restore.  What runs instead is faultline
vmm's process guest: threads of a process reading one word per 4 KiB page
of 256 MiB restored the same ways.  The rows therefore measure this
machine's page faults and copies, not a VM's restore (with /dev/kvm the
same demo restores a real KVM guest):
  prepopulated     the memory was read in before the guest started: the
                   guest's own first touches, nothing restored (reference)
  copy floor       one thread copying the same 256 MiB once with
                   UFFDIO_COPY, no guest: what the copy alone costs here
  faultline serve  restored on demand through userfaultfd, default policy
  naive handler    restored on demand, 4 KiB copied per fault, nothing
                   ahead
Not shown: the File backend (a private mmap of the memory file).  A
process reading a cached file maps the page cache and copies nothing, so
here it restores nothing to compare; in a VM it is a row like the others.

EOF
	rows+=,linear_copy_floor
fi
echo "Running 'faultline bench kvm-restore --size 256M --runs 5' on those" \
     "rows (under a minute on 2 CPUs)..."
"$fl" bench kvm-restore --size 256M --runs 5 --only "$rows" --json >"$tmp/bench.json"

perl -MJSON::PP -MText::Wrap -e '
	local $/;
	$Text::Wrap::columns = 78;
	my $j = decode_json(<STDIN>);
	my $r = $j->{results};
	my $vm = $j->{guest} eq "kvm";
	my @rows = (
		[ "linear_prepopulated", "prepopulated memory (read before)" ],
		[ "linear_copy_floor", "copy floor (one thread, no guest)" ],
		[ "linear_file", "File backend (private mmap of the file)" ],
		[ "linear_daemon", "faultline serve, default policy" ],
		[ "linear_uffd_naive_4k", "naive handler (4 KiB per fault)" ],
	);
	printf "\n%s\n%.0f MiB %s guest, linear touch, median of %d rounds\n",
		$j->{title}, $j->{bytes} / 2**20, $vm ? "KVM" : "process",
		$j->{runs};
	printf "  %-42s %9s %9s %8s  %s\n", "restored by", "ms", "vs prepop",
		"faults", "bytes ok";
	my $bad = 0;
	for my $row (@rows) {
		my $x = $r->{ $row->[0] } or next;
		printf "  %-42s %9.1f %8.2fx %8d  %s\n", $row->[1],
			$x->{seconds} * 1e3, $x->{ratio}, $x->{faults},
			$x->{checksum_ok} ? "yes" : "NO";
		$bad++ unless $x->{checksum_ok};
	}
	my %ms = map { $_ => ($r->{$_} ? $r->{$_}{seconds} * 1e3 : 0) }
		keys %$r;
	my ($p, $d, $n) = @ms{qw(linear_prepopulated linear_daemon
				 linear_uffd_naive_4k)};
	my ($dr, $nr) = map { $r->{$_}{ratio} }
		qw(linear_daemon linear_uffd_naive_4k);
	if ($vm) {
		print "\n", wrap("", "  ", sprintf("verdict: the VM " .
			"restored through faultline serve ran at %.2fx the " .
			"time of memory that was already there (%.0f ms); " .
			"with the File backend it ran at %.2fx, with a naive " .
			"handler at %.2fx.", $dr, $p, $r->{linear_file}{ratio},
			$nr)), "\n";
	} else {
		my $f = $ms{linear_copy_floor};
		my $add = $d - $p > 0 && $f > 0 ?
			sprintf("serve added %.0f ms to the guest, %.1fx that " .
				"copy.", $d - $p, ($d - $p) / $f) :
			"serve added no time to the guest.";
		print "\n", wrap("", "  ", sprintf("verdict (a process, not " .
			"a VM): restored through faultline serve, the guest " .
			"took %.2fx the time of memory that was already " .
			"there (%.0f against %.0f ms), through a naive " .
			"handler %.2fx (%.0f ms).  Copying the bytes once " .
			"takes %.0f ms here (the copy floor): %s", $dr, $d, $p,
			$nr, $n, $f, $add)), "\n";
	}
	print "(ratios: the median of per-round ratios to the prepopulated " .
		"run of the same round)\n";
	print "WRONG BYTES in $bad row(s): see above\n" if $bad;
	exit($bad ? 1 : 0);
' <"$tmp/bench.json"
echo "The demo took $((SECONDS - start)) s."
