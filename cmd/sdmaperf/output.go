package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

// mib is perftest's "MB": 2^20 bytes.
const mib = 1 << 20

// Latency is the submit-to-completion latency of a run, in microseconds.
type Latency struct {
	Min   float64 `json:"min_us"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p99_9_us"`
	Max   float64 `json:"max_us"`
	Avg   float64 `json:"avg_us"`
	Stdev float64 `json:"stdev_us"`
	Count int64   `json:"count"`
}

// latencyOf summarises a histogram of nanoseconds.
func latencyOf(h *hdrhistogram.Histogram) Latency {
	if h == nil || h.TotalCount() == 0 {
		return Latency{}
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	return Latency{
		Min:   us(h.Min()),
		P50:   us(h.ValueAtQuantile(50)),
		P90:   us(h.ValueAtQuantile(90)),
		P99:   us(h.ValueAtQuantile(99)),
		P999:  us(h.ValueAtQuantile(99.9)),
		Max:   us(h.Max()),
		Avg:   h.Mean() / 1e3,
		Stdev: h.StdDev() / 1e3,
		Count: h.TotalCount(),
	}
}

// newHistogram returns a histogram of nanoseconds from 1ns to 100s, 3 significant digits.
func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(100*time.Second), 3)
}

// Result is one packet size's run.
type Result struct {
	Bytes      int               `json:"bytes"`
	Iterations uint64            `json:"iterations"` // packets the sink accepted
	Elapsed    time.Duration     `json:"elapsed_ns"`
	BWPeak     float64           `json:"bw_peak_mib_s"` // best sampling interval
	BWAvg      float64           `json:"bw_avg_mib_s"`
	MsgRate    float64           `json:"msg_rate_mpps"`
	Syscalls   float64           `json:"syscalls_per_packet,omitempty"` // -sink udp: send system calls per packet the sink handled
	Latency    Latency           `json:"latency"`
	RingFull   uint64            `json:"ring_full"`                // sends that found the ring full
	Sleeps     uint64            `json:"sleeps"`                   // waiters parked on an engine's wait list (-send block, sleep)
	Wakeups    uint64            `json:"wakeups"`                  // waiters the completion passes woke
	Faults     uint64            `json:"faults"`                   // every fault event: MapErrors + Halts + SinkErrors + SinkStalls
	MapErrors  uint64            `json:"map_errors"`               // packets dropped because an Add failed (-mode msg: messages a mapping failure stopped)
	Aborted    uint64            `json:"aborted"`                  // packets completed with StatusAborted
	SinkErrors uint64            `json:"sink_errors"`              // Deliver errors the engine recorded
	SinkStalls uint64            `json:"sink_stalls"`              // deliveries stalled on purpose (-faults sinkstall)
	Halts      uint64            `json:"halts"`                    // engine halts
	HaltsBy    map[string]uint64 `json:"halts_by_cause,omitempty"` // engine halts by cause
	// HaltsInjected: -faults injected the halts (halt, haltat), so HaltsBy's causes are the
	// injected ones (chosen at random with halt), not memory or descriptors that really failed.
	HaltsInjected bool            `json:"halts_injected,omitempty"`
	Recoveries    uint64          `json:"recoveries"`            // returns to running after a halt
	SinkFailed    uint64          `json:"sink_failed,omitempty"` // deliveries failed on purpose (-faults sinkfail)
	HaltCauses    []string        `json:"halt_causes,omitempty"` // the last halt of each engine that halted
	SinkError     string          `json:"sink_error,omitempty"`  // the last failed delivery
	Receiver      *udpsink.Report `json:"receiver,omitempty"`
	BWStdev       float64         `json:"bw_stdev_mib_s"` // of the sampling intervals' bandwidths
	// The bandwidths in Gb/s (10^9 bits), beside the MiB/s ones, with --report_gbits only
	// (writeJSON fills them; nil otherwise, and left out).
	BWPeakGbit  *float64 `json:"bw_peak_gbit_s,omitempty"`
	BWAvgGbit   *float64 `json:"bw_avg_gbit_s,omitempty"`
	BWStdevGbit *float64 `json:"bw_stdev_gbit_s,omitempty"`
	Interrupted bool     `json:"interrupted,omitempty"` // Ctrl-C cut the size short: the figures are of the part that ran

	hist *hdrhistogram.Histogram // the latencies, in ns, for -H, -hist and -plot
}

// Report is the whole output of a client run.
type Report struct {
	Tool    string   `json:"tool"`
	Host    *Host    `json:"host,omitempty"`
	Config  Config   `json:"config"`
	Results []Result `json:"results"`
	// Receiver is what the in-process UDP receiver saw over the whole run (-sink udp without
	// -udp-addr); an external receiver (-server) reports on its own.
	Receiver *udpsink.Report `json:"receiver,omitempty"`
	// Interrupted: Ctrl-C ended the run; Results are the sizes that ran, the last one partial.
	Interrupted bool `json:"interrupted,omitempty"`
}

// writeJSON prints r as one indented JSON object; with --report_gbits each result has its
// bandwidths in Gb/s too (bw_avg_gbit_s and the like), beside the MiB/s ones.
func writeJSON(w io.Writer, r Report) error {
	if r.Config.ReportGbits {
		_, f := bwUnit(r.Config)
		r.Results = slices.Clone(r.Results)
		for i := range r.Results {
			res := &r.Results[i]
			peak, avg, sd := res.BWPeak*f, res.BWAvg*f, res.BWStdev*f
			res.BWPeakGbit, res.BWAvgGbit, res.BWStdevGbit = &peak, &avg, &sd
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

const rule = "-----------------------------------------------------------------------------------------------------"

// writeHeader prints perftest's banner: the test name and the configuration.
func writeHeader(w io.Writer, cfg Config) {
	title := "Send BW Test"
	if cfg.Mode == ModeLat {
		title = "Send Latency Test"
	}
	sink := cfg.Sink
	if cfg.Sink == "udp" {
		addr := cfg.UDPAddr
		if addr == "" {
			addr = "in-process receiver"
		}
		sink = "udp (" + addr + ")"
	}
	length := fmt.Sprintf("%d packets per size", cfg.Iterations)
	if cfg.Iterations == 0 {
		length = fmt.Sprintf("%v per size", cfg.Duration)
	}
	fmt.Fprintln(w, rule)
	fmt.Fprintf(w, "%*s\n", 38+len(title)/2, title)
	fmt.Fprintf(w, " %-16s: %-22s %-16s: %d\n", "Engine(s)", fmt.Sprint(cfg.Engines), "Producers", cfg.Producers)
	fmt.Fprintf(w, " %-16s: %-22s %-16s: %d\n", "Ring size", fmt.Sprint(cfg.Ring), "Fragments", cfg.Frags)
	mem := cfg.Mem
	if cfg.Shared {
		mem += ", shared"
	}
	fmt.Fprintf(w, " %-16s: %-22s %-16s: %s\n", "Mapper", cfg.Mapper, "Memory", mem)
	fmt.Fprintf(w, " %-16s: %-22s %-16s: %d\n", "Allocator", cfg.Alloc, "Depth", cfg.Depth)
	fmt.Fprintf(w, " %-16s: %-22s %-16s: %s\n", "Engine wait", cfg.Wait, "Completion", cfg.Completion)
	fmt.Fprintf(w, " %-16s: %-22s %-16s: %s\n", "Ring full", cfg.Send, "Mode", cfg.Mode)
	fmt.Fprintf(w, " %-16s: %-22s %-16s: %s\n", "Run", length, "Faults", cfg.Faults)
	fmt.Fprintf(w, " %-16s: %s\n", "Sink", sink)
	if cfg.Mode == ModeMsg {
		fmt.Fprintf(w, " %-16s: %s\n", "Messages", msgBanner(cfg))
	}
	fmt.Fprintln(w, rule)
}

// table is one of the text tables: its heading (with a caption when it needs one) and the row
// of one result.
type table struct {
	head func(w io.Writer, cfg Config)
	row  func(w io.Writer, cfg Config, r Result)
}

// bwUnit is the bandwidth unit of the tables: perftest's MB (MiB), or Gb/s with --report_gbits.
// factor converts MiB/s to it.
func bwUnit(cfg Config) (label string, factor float64) {
	if cfg.ReportGbits {
		return "Gb/sec", mib * 8 / 1e9
	}
	return "MiB/sec", 1
}

// bandwidthTable counts only the packets the sink accepted; #failed is the deliveries it
// refused, beside them, never inside.
var bandwidthTable = table{
	head: func(w io.Writer, cfg Config) {
		unit, _ := bwUnit(cfg)
		fmt.Fprintf(w, " %-8s %-13s %-18s %-21s %-14s %s\n", "#bytes", "#iterations", "BW peak["+unit+"]", "BW average["+unit+"]", "MsgRate[Mpps]", failedHead(cfg))
	},
	row: func(w io.Writer, cfg Config, r Result) {
		_, k := bwUnit(cfg)
		fmt.Fprintf(w, " %-8d %-13d %-18.2f %-21.2f %-14.6f %s%s\n", r.Bytes, r.Iterations, r.BWPeak*k, r.BWAvg*k, r.MsgRate, failedCell(cfg, r), interruptedMark(r))
	},
}

// latencyTable: in bw mode the submit-to-completion time of a packet queued behind up to
// depth-1 others, which its caption says.
var latencyTable = table{
	head: func(w io.Writer, cfg Config) {
		if cfg.Mode == ModeBW {
			fmt.Fprintf(w, " Latency in bw mode is submit to completion at depth %d: it is queueing, not the\n"+
				" one-packet latency of -mode lat (ib_send_lat).\n", cfg.Depth)
		}
		// ib_send_lat's columns, in its order (t_typical is the median), then the 90th
		// percentile, which perftest does not print. #iterations is the latency samples the
		// figures are of: every completion, a delivery the sink refused included (the bandwidth
		// table's #iterations counts only those it accepted).
		fmt.Fprintf(w, " %-8s %-13s %-13s %-13s %-17s %-13s %-15s %-22s %-24s %s\n",
			"#bytes", "#iterations", "t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]",
			"t_stdev[usec]", "99% percentile[usec]", "99.9% percentile[usec]", "p90[usec]")
	},
	row: func(w io.Writer, _ Config, r Result) {
		l := r.Latency
		fmt.Fprintf(w, " %-8d %-13d %-13.2f %-13.2f %-17.2f %-13.2f %-15.2f %-22.2f %-24.2f %.2f%s\n",
			r.Bytes, l.Count, l.Min, l.Max, l.P50, l.Avg, l.Stdev, l.P99, l.P999, l.P90, interruptedMark(r))
	},
}

// countersTable: the events of each size. faults is their sum: map-errors + halts +
// sink-errors + stalls.
var countersTable = table{
	head: func(w io.Writer, _ Config) {
		fmt.Fprintf(w, " %-8s %-11s %-9s %-9s %-9s %-11s %-9s %-12s %-9s %-7s %s\n", "#bytes", "ring-full", "sleeps", "wakeups", "faults", "map-errors", "aborted", "sink-errors", "stalls", "halts", "recoveries")
	},
	row: func(w io.Writer, _ Config, r Result) {
		fmt.Fprintf(w, " %-8d %-11d %-9d %-9d %-9d %-11d %-9d %-12d %-9d %-7d %d\n", r.Bytes, r.RingFull, r.Sleeps, r.Wakeups, r.Faults, r.MapErrors, r.Aborted, r.SinkErrors, r.SinkStalls, r.Halts, r.Recoveries)
	},
}

// failedHead and failedCell are the bandwidth table's last column, #failed, and with -sink udp
// one more: the send system calls per packet (1 unbatched, about 1/batch batched).
func failedHead(cfg Config) string {
	if cfg.Sink != "udp" {
		return "#failed"
	}
	return fmt.Sprintf("%-8s %s", "#failed", "syscalls/pkt")
}

func failedCell(cfg Config, r Result) string {
	if cfg.Sink != "udp" {
		return fmt.Sprint(r.SinkErrors)
	}
	return fmt.Sprintf("%-8d %.3f", r.SinkErrors, r.Syscalls)
}

// interruptedMark marks the row of a size cut short by Ctrl-C.
func interruptedMark(r Result) string {
	if r.Interrupted {
		return " (interrupted)"
	}
	return ""
}

// writeNotes prints what follows the tables: the faults column's sum, halt causes, the
// receiver's report, an interruption.
func writeNotes(w io.Writer, rep Report) {
	for _, r := range rep.Results {
		if len(r.HaltsBy) > 0 {
			label := "halts"
			if r.HaltsInjected {
				label = "halts (injected)" // the causes are -faults' choice, not real failures
			}
			fmt.Fprintf(w, " %d bytes: %s: %s\n", r.Bytes, label, haltsText(r.HaltsBy))
		}
		for _, c := range r.HaltCauses {
			fmt.Fprintf(w, " %d bytes: last: %s\n", r.Bytes, c)
		}
	}
	if rep.Receiver != nil {
		fmt.Fprintln(w, indent(rep.Receiver.String()))
		fmt.Fprintln(w, rule)
	}
	if rep.Interrupted {
		fmt.Fprintln(w, " interrupted: the results so far")
	}
}

// writeTables prints every table of the report at once (the text reporter streams instead).
func writeTables(w io.Writer, rep Report) {
	t := &textReporter{w: w, cfg: rep.Config}
	t.tables()[0].head(w, rep.Config)
	for _, r := range rep.Results {
		t.row(r)
	}
	_ = t.end(rep)
}

// haltsText lists halt counts by cause, the most frequent first: "memory read fault 12, explicit
// halt 3".
func haltsText(by map[string]uint64) string {
	causes := make([]string, 0, len(by))
	for c := range by {
		causes = append(causes, c)
	}
	sort.Slice(causes, func(i, j int) bool {
		if by[causes[i]] != by[causes[j]] {
			return by[causes[i]] > by[causes[j]]
		}
		return causes[i] < causes[j]
	})
	parts := make([]string, len(causes))
	for i, c := range causes {
		parts[i] = fmt.Sprintf("%s %d", c, by[c])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// writeText prints the whole report as perftest does.
func writeText(w io.Writer, r Report) {
	writeHeader(w, r.Config)
	writeTables(w, r)
}

// rates fills the bandwidth and message rate of r from bytes, packets and the elapsed time.
func (r *Result) rates(bytes uint64) {
	s := r.Elapsed.Seconds()
	if s <= 0 {
		return
	}
	r.BWAvg = float64(bytes) / mib / s
	r.MsgRate = float64(r.Iterations) / 1e6 / s
	if r.BWPeak < r.BWAvg || math.IsNaN(r.BWPeak) {
		r.BWPeak = r.BWAvg // a run shorter than one sampling interval
	}
}

// stickyWriter writes to w and keeps the first error, for the output printed with fmt (whose
// errors are not checked line by line). Once a write failed, every later one fails alike.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	if err != nil {
		s.err = err
	}
	return n, err
}

// check returns runErr, or when the run itself succeeded, the first write error: a run whose
// results were lost fails.
func (s *stickyWriter) check(runErr error) error {
	if runErr == nil && s.err != nil {
		return fmt.Errorf("writing the results: %w", s.err)
	}
	return runErr
}

// indent is used by the server's text output.
func indent(s string) string { return " " + strings.ReplaceAll(s, "\n", "\n ") }
