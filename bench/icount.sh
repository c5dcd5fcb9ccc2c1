#!/usr/bin/env bash
# icount.sh: instructions per op of one benchmark of ./bench, by function, counted by valgrind's
# callgrind: exact and repeatable whatever else the machine is doing (timings on a shared 2-core
# machine are not), which makes it the measure for small changes to the packet path (the path is
# instruction-bound: a packet is a few thousand instructions at about four per cycle).
#
#   bench/icount.sh 'PacketPath$/alloc=slab/mapper=direct/hw=inline' [ops] [ref]
#
# It builds ./bench's test binary (from ref, a commit, if given: compare two with two runs), runs
# the one benchmark that the pattern names for exactly ops iterations (default 100000) under
# callgrind, and prints the total and the functions' own instructions, each divided by ops (the
# total includes the benchmark's setup, a few percent at 100000 ops). Needs valgrind (Debian:
# apt-get install valgrind). GODEBUG turns off what valgrind cannot run: RDTSCP in the runtime's
# cputicks, and the signals of asynchronous preemption. GOMAXPROCS=1: with more Ps, the runtime's
# idle Ms spin looking for work under valgrind's serialised threads, thousands of instructions
# per op that depend on timing, not on the code.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pat=${1:?usage: bench/icount.sh BENCH-PATTERN [ops] [ref]}
ops=${2:-100000}
ref=${3:-}
case $ops in '' | *[!0-9]* | 0) echo "icount.sh: ops must be a positive integer" >&2; exit 2 ;; esac
command -v valgrind >/dev/null || { echo "icount.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$here
if [ -n "$ref" ]; then
	git -C "$here" worktree add -q --detach "$tmp/src" "$ref"
	trap 'git -C "$here" worktree remove --force "$tmp/src"; rm -rf "$tmp"' EXIT
	src=$tmp/src/bench
fi
(cd "$src" && go test -c -o "$tmp/bench.test" .)
(cd "$src" && GOMAXPROCS=1 GODEBUG=cpu.rdtscp=off,asyncpreemptoff=1 valgrind --tool=callgrind \
	--callgrind-out-file="$tmp/cg.out" "$tmp/bench.test" -test.run '^$' -test.bench "$pat" \
	-test.benchtime "${ops}x" >"$tmp/log" 2>&1) || { cat "$tmp/log" >&2; exit 1; }
grep -q '^Benchmark' "$tmp/log" || { echo "icount.sh: no benchmark matched $pat" >&2; cat "$tmp/log" >&2; exit 1; }
# awk reads the whole listing and prints its first 60 lines (a head after it, under pipefail,
# killed awk with SIGPIPE on a long listing: the script exited 141).
callgrind_annotate "$tmp/cg.out" | awk -v n="$ops" '
	/^ *[0-9,]+ \(/ { v = $1; gsub(",", "", v); f = $4; sub(/ \[.*/, "", f); sub(/^.*gosdma\/gosdma\//, "", f)
		if (v / n >= 0.5 && ++shown <= 60) printf "%9.1f  %s\n", v / n, f }'
