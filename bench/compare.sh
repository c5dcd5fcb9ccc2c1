#!/bin/sh
# compare.sh: runs the DPDK rte_ring reference (bench/dpdk/rte_ring_ref.c) and gosdma's ring
# benchmarks in one go and prints, per mode and bulk, gosdma's ns/desc (impl=asm), DPDK's, their
# ratio, and the buffered-channel baseline's ratio to gosdma.
#
#   bench/compare.sh [elements per DPDK measurement] [go -benchtime] [go -count]
#
# The Go figure is the best of -count runs (default 3).
#
# Needs a C compiler and DPDK's headers and librte_ring (Debian: libdpdk-dev, installed with
# apt-get when missing and running as root). Takes about a minute.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
elems=${1:-20000000}
benchtime=${2:-200ms}
count=${3:-3}
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

echo "== DPDK rte_ring ($elems elements per measurement)" >&2
"$tmp/rte_ring_ref" "$elems" | tee "$tmp/dpdk.txt" >&2

echo "== gosdma ring (go test -bench BenchmarkRingSPSC -benchtime $benchtime -count $count)" >&2
(cd "$root" && go test -run '^$' -bench 'BenchmarkRingSPSC/impl=(asm|go|chan)/' -benchtime "$benchtime" -count "$count" ./bench) |
	tee "$tmp/go.txt" >&2

# go.txt lines: BenchmarkRingSPSC/impl=asm/mode=cross/bulk=32-2  N  x ns/op  y MB/s  z ns/desc ...
awk '
FNR == NR {
	if ($1 ~ /^mode=/) {
		split($1, km, "="); split($2, kb, "="); split($3, kv, "=")
		dpdk[km[2] "," kb[2]] = kv[2]
	}
	next
}
/^BenchmarkRingSPSC\// {
	n = split($1, parts, "/")
	impl = parts[2]; sub("impl=", "", impl)
	mode = parts[3]; sub("mode=", "", mode)
	bulk = parts[4]; sub("bulk=", "", bulk); sub("-[0-9]+$", "", bulk)
	# best of the -count runs: the machine may be shared, and noise only ever adds time
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
	print "(ns/desc; asm/DPDK < 1.5 and chan/asm >= 10 at bulk=32 cross are the targets)"
}' "$tmp/dpdk.txt" "$tmp/go.txt"
