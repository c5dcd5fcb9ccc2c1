#!/usr/bin/env bash
# compare.sh: runs the DPDK rte_ring reference (bench/dpdk/rte_ring_ref.c), gosdma's ring
# benchmarks and the machine's physical anchors (bench/dpdk/limits.c: a cache-line round trip
# between two cores, memcpy bandwidth) in one go, and prints, per mode and bulk, gosdma's ns/desc
# (impl=asm), DPDK's, their ratio, the buffered-channel baseline's ratio to gosdma, and the
# ratios of the bulk=1 cross and bulk=32 figures to the anchors.
#
#   bench/compare.sh [elements per DPDK measurement] [go -benchtime] [rounds]
#
# The DPDK, Go and anchor measurements are interleaved, rounds times (default 3), and each figure
# is the best of its rounds: the machine may be shared, and noise only ever adds time.
#
# Needs a C compiler and DPDK's headers and librte_ring (Debian: libdpdk-dev, installed with
# apt-get when missing and running as root). Takes about a minute per round. Any failure (a build,
# a reference run, a failing benchmark: pipefail, the figures go through tee) stops it non-zero.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
elems=${1:-20000000}
benchtime=${2:-200ms}
rounds=${3:-3}
for v in "$elems" "$rounds"; do
	case $v in '' | *[!0-9]* | 0)
		echo "usage: bench/compare.sh [elements per DPDK measurement] [go -benchtime] [rounds]: counts must be positive integers" >&2
		exit 2 ;;
	esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! [ -f /usr/include/dpdk/rte_ring.h ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "installing libdpdk-dev..." >&2
		apt-get update >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y libdpdk-dev >/dev/null
	else
		echo "compare.sh: DPDK headers missing; install libdpdk-dev" >&2
		exit 1
	fi
fi

# Same flags as the project's anchor build of the reference.
cc -O3 -march=native -I/usr/include/dpdk -I/usr/include/x86_64-linux-gnu/dpdk -include rte_config.h \
	-o "$tmp/rte_ring_ref" "$here/dpdk/rte_ring_ref.c" -lrte_ring -lrte_eal -lpthread

cc -O2 -o "$tmp/limits" "$here/dpdk/limits.c" -lpthread
(cd "$root" && go test -c -o "$tmp/bench.test" ./bench)

: >"$tmp/dpdk.txt"
: >"$tmp/go.txt"
: >"$tmp/limits.txt"
for round in $(seq "$rounds"); do
	echo "== round $round/$rounds: anchors (bench/dpdk/limits.c)" >&2
	"$tmp/limits" | tee -a "$tmp/limits.txt" >&2
	echo "== round $round/$rounds: DPDK rte_ring ($elems elements per measurement)" >&2
	"$tmp/rte_ring_ref" "$elems" | tee -a "$tmp/dpdk.txt" >&2
	echo "== round $round/$rounds: gosdma ring (go test -bench BenchmarkRingSPSC -benchtime $benchtime)" >&2
	(cd "$here" && "$tmp/bench.test" -test.run '^$' -test.bench 'BenchmarkRingSPSC/impl=(asm|go|chan)/' \
		-test.benchtime "$benchtime") | tee -a "$tmp/go.txt" >&2
done

# go.txt lines: BenchmarkRingSPSC/impl=asm/mode=cross/bulk=32-2  N  x ns/op  y MB/s  z ns/desc ...
awk '
FILENAME == ARGV[1] {
	# limits.txt: limit=rtt ns=x | limit=memcpy bytes=n GBps=g ns/desc=y (best of the rounds)
	if ($1 == "limit=rtt") {
		split($2, kv, "=")
		if (!("rtt" in lim) || kv[2] + 0 < lim["rtt"] + 0) lim["rtt"] = kv[2]
	} else if ($1 == "limit=memcpy") {
		split($2, kb, "="); split($3, kg, "="); split($4, kv, "=")
		k = "memcpy" kb[2]
		if (!(k in lim) || kv[2] + 0 < lim[k] + 0) lim[k] = kv[2]
		k = "GBps" kb[2]
		if (!(k in lim) || kg[2] + 0 > lim[k] + 0) lim[k] = kg[2]
	}
	next
}
FILENAME == ARGV[2] {
	if ($1 ~ /^mode=/) {
		split($1, km, "="); split($2, kb, "="); split($3, kv, "=")
		k = km[2] "," kb[2]
		if (!(k in dpdk) || kv[2] + 0 < dpdk[k] + 0) dpdk[k] = kv[2]
	}
	next
}
/^BenchmarkRingSPSC\// {
	# BenchmarkRingSPSC/impl=asm/mode=cross/bulk=32-2  N  x ns/op  y MB/s  z ns/desc ...
	n = split($1, parts, "/")
	impl = parts[2]; sub("impl=", "", impl)
	mode = parts[3]; sub("mode=", "", mode)
	bulk = parts[4]; sub("bulk=", "", bulk); sub("-[0-9]+$", "", bulk)
	for (i = 2; i <= NF; i++) if ($i == "ns/desc") {
		k = impl "," mode "," bulk
		if (!(k in go) || $(i-1) + 0 < go[k] + 0) go[k] = $(i-1)
	}
}
END {
	printf "\n%-6s %-5s %12s %12s %10s %12s %10s %12s\n", "mode", "bulk", "gosdma asm", "DPDK", "asm/DPDK", "chan", "chan/asm", "gosdma go"
	split("same cross", modes, " ")
	split("1 8 32", bulks, " ")
	for (mi = 1; mi <= 2; mi++) for (bi = 1; bi <= 3; bi++) {
		m = modes[mi]; b = bulks[bi]
		a = go["asm," m "," b]; g = go["go," m "," b]; c = go["chan," m "," b]; d = dpdk[m "," b]
		printf "%-6s %-5s %12s %12s %10s %12s %10s %12s\n", m, b, a, d, \
			(a > 0 && d > 0) ? sprintf("%.2fx", a / d) : "-", c, \
			(a > 0 && c > 0) ? sprintf("%.1fx", c / a) : "-", g
	}
	print "(ns/desc, best of the rounds; asm/DPDK < 1.5 and chan/asm >= 10 at bulk=32 cross are the targets)"

	rtt = lim["rtt"]; mc = lim["memcpy512"]
	printf "\nanchors (same run, best of the rounds):\n"
	printf "  cache-line round trip CPU0<->CPU1   %8s ns\n", rtt
	printf "  memcpy 512 B (one bulk of 32)       %8s ns/desc\n", mc
	printf "  memcpy 4 KiB (a 4096-byte payload)  %8s GB/s\n", lim["GBps4096"]
	printf "  memcpy 16 KiB (a 16380-byte payload)%8s GB/s\n", lim["GBps16384"]
	printf "  memcpy 32 KiB (the 2048-slot ring)  %8s ns/desc\n", lim["memcpy32768"]
	printf "  memcpy 1 MiB                        %8s ns/desc\n", lim["memcpy1048576"]
	a1 = go["asm,cross,1"]; d1 = dpdk["cross,1"]; a32 = go["asm,cross,32"]; d32 = dpdk["cross,32"]
	s32 = go["asm,same,32"]; ds32 = dpdk["same,32"]
	if (rtt > 0) {
		printf "  cross bulk=1:  gosdma %.2fx, DPDK %.2fx a round trip\n", a1 / rtt, d1 / rtt
	}
	if (mc > 0) {
		# a ring copies each descriptor twice: into the ring and out of it
		printf "  same  bulk=32: gosdma %.1fx, DPDK %.1fx two 512-B memcpys per descriptor\n", s32 / (2 * mc), ds32 / (2 * mc)
		printf "  cross bulk=32: gosdma %.1fx, DPDK %.1fx two 512-B memcpys per descriptor\n", a32 / (2 * mc), d32 / (2 * mc)
	}
}' "$tmp/limits.txt" "$tmp/dpdk.txt" "$tmp/go.txt"
