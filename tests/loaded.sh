#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# loaded.sh - run a command with one spinning process per CPU beside it
# for the whole of its run (`make check-loaded`): a test that holds only
# on an idle machine fails here.
#
# Decision: spinners outside the tests, not FL_LOAD, so every program is
# loaded from its first instruction to its last, whether or not it calls
# load_start().  A spinner checks every turn that this script is alive,
# so none outlives it, even when it is killed with SIGKILL; on SIGINT,
# SIGTERM or SIGHUP the traps stop them and the command at once.
#
# usage: sh tests/loaded.sh COMMAND [ARG...]

n=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
pids=
i=0
while [ "$i" -lt "$n" ]; do
	sh -c 'while kill -0 "$1" 2>/dev/null; do :; done' spin $$ &
	pids="$pids $!"
	i=$((i + 1))
done

cmd=
stop() {
	[ -n "$cmd" ] && kill "$cmd" 2>/dev/null
	[ -n "$pids" ] && kill $pids 2>/dev/null
	[ -n "$pids" ] && wait $pids 2>/dev/null
	pids=
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap 'stop; exit 129' HUP

# In the background and waited for: a trapped signal ends the wait at once.
echo "# loaded: $n spinning processes beside: $*"
"$@" &
cmd=$!
wait "$cmd"
rc=$?
cmd=
stop
exit $rc
