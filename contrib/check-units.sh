#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# check-units.sh - check the systemd units in contrib/ as they would be
# installed: `systemd-analyze verify` on every unit (the plain pair, an
# instance of the templates, each with the network drop-in too) must print
# nothing, the two services' hardening must be the same, and
# `systemd-analyze security` must stay at or below the exposure that
# docs/systemd.md states.  Needs systemd-analyze (Debian package systemd),
# not a running systemd.
#
#   contrib/check-units.sh [BINARY]       (default: build/faultline)
#
# BINARY replaces /usr/local/bin/faultline in ExecStart= (verify checks
# that it exists and is executable), as `make install` does with PREFIX.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-build/faultline}
# Exposure x10 (systemd-analyze security --threshold): local file, network.
max_local=11
max_net=20

if ! command -v systemd-analyze >/dev/null 2>&1; then
	echo "check-units: systemd-analyze not found (apt-get install systemd)" >&2
	exit 2
fi
if [ ! -x "$bin" ]; then
	echo "check-units: $bin is not an executable (run make first)" >&2
	exit 2
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
tmp=$(mktemp -d /tmp/faultline-units.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT PIPE TERM

# Two unit directories: as shipped, and with the network drop-in for the
# plain service and for every instance of the template.
for d in local net; do
	mkdir -p "$tmp/$d"
	for u in faultline.socket faultline.service faultline@.socket \
		 faultline@.service; do
		sed "s|/usr/local/bin/faultline|$bin|" "$here/$u" > "$tmp/$d/$u"
	done
done
for u in faultline.service faultline@.service; do
	mkdir -p "$tmp/net/$u.d"
	cp "$here/faultline-network.conf" "$tmp/net/$u.d/network.conf"
done

fail=0
for d in local net; do
	out=$(systemd-analyze verify "$tmp/$d/faultline.socket" \
		"$tmp/$d/faultline.service" "$tmp/$d/faultline@vm1.socket" \
		"$tmp/$d/faultline@vm1.service" 2>&1) || fail=1
	if [ -n "$out" ]; then
		printf 'check-units: systemd-analyze verify (%s):\n%s\n' "$d" "$out" >&2
		fail=1
	else
		echo "ok: systemd-analyze verify ($d): no warnings"
	fi
done

hardening() {
	sed -n '/^# Writable:/,/^\[Install\]/p' "$1"
}
if [ "$(hardening "$here/faultline.service")" != \
     "$(hardening "$here/faultline@.service")" ] ||
   [ -z "$(hardening "$here/faultline.service")" ]; then
	echo "check-units: faultline.service and faultline@.service differ" \
	     "from '# Writable:' to [Install]: keep them in step" >&2
	fail=1
else
	echo "ok: faultline.service and faultline@.service harden alike"
fi

for c in "local faultline.service $max_local" \
	 "local faultline@vm1.service $max_local" \
	 "net faultline.service $max_net" "net faultline@vm1.service $max_net"; do
	# shellcheck disable=SC2086 # the words of $c, split on purpose
	set -- $c
	level=$(systemd-analyze security --offline=yes --no-pager "$tmp/$1/$2" \
		2>/dev/null | sed -n 's/.*Overall exposure level for [^:]*: //p')
	if systemd-analyze security --offline=yes --threshold="$3" \
	   --no-pager "$tmp/$1/$2" >/dev/null 2>&1; then
		echo "ok: systemd-analyze security $2 ($1): $level"
	else
		echo "check-units: systemd-analyze security $2 ($1): $level," \
		     "above $(($3 / 10)).$(($3 % 10)) (docs/systemd.md)" >&2
		fail=1
	fi
done
exit $fail
