package main

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// A row sets one gosdma figure beside the baseline figure of the same run.
type row struct {
	what       string // the row's title
	ours, base figure
	note       *figure // shown after ours (allocs/op), or nil
}

// A figure is one benchmark's median in one unit.
type figure struct {
	label string // shown before the value: "asm", "chan", "slab, iommu"
	name  string // benchmark name without the GOMAXPROCS suffix
	unit  string
}

// higherIsBetter units are rates: their ratio is inverted so that every ratio is a ratio of times.
var higherIsBetter = map[string]bool{"MB/s": true}

// rows lists the table's rows, in order, for the benchmarks of s.
func rows(s *suite) []row {
	var rs []row
	// The ring: gosdma's writer (asm and Go) against a buffered channel and Workiva's RingBuffer.
	for _, mode := range []string{"same", "cross"} {
		title := map[string]string{"same": "one goroutine", "cross": "producer → consumer"}[mode]
		for _, bulk := range []int{1, 8, 32} {
			for _, impl := range []string{"asm", "go"} {
				for _, base := range []string{"chan", "workiva"} {
					ring := func(impl string) string {
						return fmt.Sprintf("BenchmarkRingSPSC/impl=%s/mode=%s/bulk=%d", impl, mode, bulk)
					}
					rs = append(rs, row{
						what: fmt.Sprintf("Ring SPSC, %s, bulk=%d", title, bulk),
						ours: figure{impl, ring(impl), "ns/desc"},
						base: figure{base, ring(base), "ns/desc"},
					})
				}
			}
		}
	}
	// The packet path on each allocator and mapper against a copy of the packet's bytes.
	for _, b := range []struct{ bench, title string }{
		{"BenchmarkPacketPath", "Packet path"},
		{"BenchmarkPacketPathParallel", "Packet path, RunParallel, 2 engines"},
	} {
		copyFig := figure{"copy", b.bench + "/alloc=none/mapper=none/impl=copy", "ns/pkt"}
		for _, name := range s.order {
			rest, ok := strings.CutPrefix(name, b.bench+"/")
			if !ok || name == copyFig.name {
				continue
			}
			k := keys(rest)
			label := k["alloc"] + ", " + k["mapper"]
			if m := k["mem"]; m != "" {
				label += ", " + m
			}
			rs = append(rs, row{
				what: fmt.Sprintf("%s, hw=%s", b.title, k["hw"]),
				ours: figure{label, name, "ns/pkt"},
				base: copyFig,
				note: &figure{"", name, "allocs/op"},
			})
		}
	}
	// Payload bandwidth through a copying sink against a copy, for each size in the run, from
	// each kind of memory (impl=sdma, and its mem=registered twin).
	for _, name := range s.order {
		rest, ok := strings.CutPrefix(name, "BenchmarkPayload/")
		k := keys(rest)
		if !ok || k["impl"] != "sdma" || k["size"] == "" {
			continue
		}
		rs = append(rs, row{
			what: fmt.Sprintf("Payload bandwidth, %s B", k["size"]),
			ours: figure{memLabel("sdma", k), name, "MB/s"},
			base: figure{"copy", "BenchmarkPayload/impl=copy/size=" + k["size"], "MB/s"},
		})
	}
	// Submit-to-completion latency against a cache-line ping-pong, from each kind of memory.
	lat := []string{"BenchmarkLatency/impl=sdma"}
	for _, name := range s.order {
		if strings.HasPrefix(name, "BenchmarkLatency/impl=sdma/") {
			lat = append(lat, name)
		}
	}
	for _, q := range []string{"p50", "p99"} {
		for _, name := range lat {
			rs = append(rs, row{
				what: "Latency, " + q,
				ours: figure{memLabel("sdma", keys(strings.TrimPrefix(name, "BenchmarkLatency/"))), name, q + "-ns"},
				base: figure{"ping-pong", "BenchmarkLatency/impl=pingpong", q + "-ns"},
			})
		}
	}
	return rs
}

// memLabel is label with the name's mem= kind when it has one: "sdma, registered".
func memLabel(label string, k map[string]string) string {
	if m := k["mem"]; m != "" {
		return label + ", " + m
	}
	return label
}

// keys splits a benchstat-style name, "alloc=slab/mapper=iommu", into its keys and values.
func keys(name string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(name, "/") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// meta describes the run for the table's caption.
type meta struct {
	command string // how the benchmark output was made
	count   int    // -count, 0 if unknown
	goVer   string // Go version, "" if unknown
	numCPU  int    // CPUs the machine offers, 0 if unknown
}

// write prints the Markdown report: the caption (command, machine), then the table. Rows whose
// benchmarks are not in the run are left out and counted below the table. It returns the number
// of rows written.
func write(w io.Writer, s *suite, m meta) (int, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `%s`\n\n", m.command)
	machine := cmp.Or(s.cpu, "unknown CPU")
	if m.numCPU > 0 {
		machine += fmt.Sprintf(" (%d CPUs)", m.numCPU)
	}
	machine += fmt.Sprintf(", %s/%s, GOMAXPROCS=%d", cmp.Or(s.goos, "?"), cmp.Or(s.goarch, "?"), s.procs)
	if m.goVer != "" {
		machine += ", " + m.goVer
	}
	fmt.Fprintf(&b, "Machine: %s\n\n", machine)
	runs := "the median of the -count runs"
	if m.count == 1 {
		runs = "from one run"
	} else if m.count > 1 {
		runs = fmt.Sprintf("the median of %d runs", m.count)
	}
	fmt.Fprintf(&b, "Each figure is %s. Ratio = gosdma's time ÷ the baseline's time, both measured in this run "+
		"(for MB/s, the baseline's rate ÷ gosdma's): below 1× gosdma is faster.\n\n", runs)
	b.WriteString("| Benchmark | gosdma | Baseline (same run) | Ratio |\n")
	b.WriteString("|---|---|---|---:|\n")
	written, missing := 0, 0
	for _, r := range rows(s) {
		ours, ok1 := s.get(r.ours.name, r.ours.unit)
		base, ok2 := s.get(r.base.name, r.base.unit)
		if !ok1 || !ok2 || ours <= 0 || base <= 0 {
			missing++
			continue
		}
		ratio := ours / base
		if higherIsBetter[r.ours.unit] {
			ratio = base / ours
		}
		oursCell := fmt.Sprintf("%s: %s %s", r.ours.label, num(ours), unitStr(r.ours.unit))
		if r.note != nil {
			if v, ok := s.get(r.note.name, r.note.unit); ok {
				oursCell += fmt.Sprintf(", %s %s", num(v), r.note.unit)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s: %s %s | %s |\n", r.what, oursCell, r.base.label, num(base), unitStr(r.base.unit), ratioStr(ratio))
		written++
	}
	if missing > 0 {
		fmt.Fprintf(&b, "\n%d comparisons left out: not in this run.\n", missing)
	}
	_, err := io.WriteString(w, b.String())
	return written, err
}

// num prints a figure with three significant digits at most, and no exponent.
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// ratioStr prints a ratio with two or three significant digits.
func ratioStr(r float64) string {
	switch {
	case r >= 100:
		return strconv.FormatFloat(r, 'f', 0, 64) + "×"
	case r >= 10:
		return strconv.FormatFloat(r, 'f', 1, 64) + "×"
	case r >= 0.1:
		return strconv.FormatFloat(r, 'f', 2, 64) + "×"
	}
	return strconv.FormatFloat(r, 'f', 3, 64) + "×"
}

// unitStr shows a unit: the latency quantiles' "p50-ns" is in ns (the row says which quantile).
func unitStr(u string) string {
	if q, rest, ok := strings.Cut(u, "-"); ok && strings.HasPrefix(q, "p") {
		return rest
	}
	return u
}
