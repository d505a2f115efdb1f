#!/usr/bin/env bash
# demo.sh - `make demo`: what `faultline serve` buys a restore, on this
# machine, in about 20 seconds.  A 256 MiB "guest" is restored through
# `build/faultline serve` (default policy, and a naive 4 KiB-per-fault one)
# and compared with prepopulated memory and Firecracker's File backend (a
# private mmap of the memory file).  The restores are driven by
# `faultline bench kvm-restore`, whose Firecracker-style client does the
# handshake; its daemons are started through a wrapper here (FAULTLINE_BIN)
# that turns its `--chunk 2M` daemon into the naive `--chunk 4K` one and
# keeps each daemon's --stats-json.  Run from the repository root after make.
set -euo pipefail

fl="$PWD/build/faultline"
if [[ ! -x $fl ]]; then
	echo "demo: $fl not found: run make first (from the repository root)" >&2
	exit 1
fi

tmp=$(mktemp -d /tmp/faultline-demo.XXXXXX)
cleanup() {
	# The bench stops its daemons itself; these are left only if it died.
	local pid
	for pid in $(cat "$tmp"/pids 2>/dev/null); do
		kill "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The daemons as the bench starts them: `faultline serve --socket S
# --mem-file M [--chunk 2M] --stats-json J`.
cat >"$tmp/serve" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
kind=default
for a in "$@"; do [[ $a == --chunk ]] && kind=naive; done
args=()
while (($#)); do
	case $1 in
	--chunk) args+=(--chunk 4K); shift ;;
	--stats-json) args+=(--stats-json "$DEMO_DIR/stats-$kind.json"); shift ;;
	*) args+=("$1") ;;
	esac
	shift
done
echo $$ >>"$DEMO_DIR/pids"
echo "build/faultline ${args[*]}" >>"$DEMO_DIR/daemons"
exec "$DEMO_FL" "${args[@]}"
EOF
chmod +x "$tmp/serve"

echo "faultline demo: restore a 256 MiB guest through 'faultline serve'"
if [[ -e /dev/kvm ]]; then
	echo "(/dev/kvm exists, but this demo does not start VMs: the guest is" \
	     "a process thread touching every 4 KiB page once)"
else
	echo "No /dev/kvm here: the guest is a process thread touching every" \
	     "4 KiB page once."
fi
echo "Running 'faultline bench kvm-restore --size 256M --runs 1' (~20 s)..."

DEMO_DIR=$tmp DEMO_FL=$fl FAULTLINE_BIN=$tmp/serve \
	"$fl" bench kvm-restore --size 256M --runs 1 --json >"$tmp/bench.json"

echo
echo "daemons started:"
sed 's/^/  /' "$tmp/daemons" | head -2
echo

perl -MJSON::PP -e '
	local $/;
	my $j = decode_json(<STDIN>);
	my $r = $j->{results};
	my @rows = (
		[ "linear_prepopulated", "prepopulated memory (read before)" ],
		[ "linear_file", "File backend (private mmap of the file)" ],
		[ "linear_daemon", "faultline serve, default policy" ],
		[ "linear_daemon_2m", "faultline serve, naive (4 KiB chunks)" ],
		[ "linear_uffd_naive_4k", "in-process 4 KiB handler, no prefetch" ],
	);
	my $ref = $r->{ $rows[0][0] }{seconds};
	printf "%.0f MiB guest, linear touch, %d run(s)%s\n", $j->{bytes} / 2**20,
		$j->{runs}, $j->{runs} > 1 ? " (median)" : "";
	printf "  %-42s %9s %8s  %s\n", "restored by", "ms", "vs prepop", "bytes ok";
	for my $row (@rows) {
		my $x = $r->{ $row->[0] } or die "demo: no $row->[0] in the bench output\n";
		printf "  %-42s %9.1f %7.2fx  %s\n", $row->[1], $x->{seconds} * 1e3,
			$x->{seconds} / $ref, $x->{checksum_ok} ? "yes" : "NO";
	}
' <"$tmp/bench.json"

echo
echo "naive = the daemon with --chunk 4K: 4 KiB chunks, one page per fault; it"
echo "has no flag to turn prefetch and background restore off, and they fill"
echo "most pages (see faults below).  The last row is a truly naive handler"
echo "(the library with 4 KiB chunks, prefetch and background off)."
echo
first_restore() {	# the first --stats-json line of a 256 MiB session
	perl -MJSON::PP -ne '
		my $j = eval { decode_json($_) } or next;
		next unless $j->{bytes} == 256 << 20;
		print JSON::PP->new->canonical->encode($j), "\n";
		exit;
	' "$1"
}
echo "naive daemon, first restore:" "$(first_restore "$tmp/stats-naive.json" |
	perl -MJSON::PP -ne '$s = decode_json($_)->{stats};
		printf "faults %d, pages prefetched %d, background %d",
		@$s{qw(faults pages_prefetched pages_background)}')"
echo "the default daemon's --stats-json line for its first restore:"
echo "  $(first_restore "$tmp/stats-default.json")"
