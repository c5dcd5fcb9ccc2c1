package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// reporter prints a client run as it goes: begin before the first size, row as each size (or,
// with --run_infinitely, each interval) finishes, so rows stream also through a pipe, and end
// with the whole report (interrupted or not).
type reporter interface {
	begin()
	row(r Result)
	end(rep Report) error
}

// newReporter picks the output format: -json, -csv, --output, or perftest's tables.
func newReporter(cfg Config, w io.Writer) reporter {
	switch {
	case cfg.JSON:
		return &jsonReporter{w: w}
	case cfg.CSV:
		return &csvReporter{w: csv.NewWriter(w), cfg: cfg}
	case cfg.Output != "":
		return &numberReporter{w: w, cfg: cfg}
	}
	return &textReporter{w: w, cfg: cfg}
}

// textReporter prints perftest's banner and tables. The run's main table (bandwidth in bw mode,
// latency in lat mode) streams a row per size; the others follow at the end.
type textReporter struct {
	w   io.Writer
	cfg Config
}

// tables in the order they are printed; the first streams.
func (t *textReporter) tables() []table {
	if t.cfg.Mode == ModeLat {
		return []table{latencyTable, bandwidthTable, countersTable}
	}
	return []table{bandwidthTable, latencyTable, countersTable}
}

func (t *textReporter) begin() {
	writeHeader(t.w, t.cfg)
	t.tables()[0].head(t.w, t.cfg)
}

func (t *textReporter) row(r Result) { t.tables()[0].row(t.w, t.cfg, r) }

func (t *textReporter) end(rep Report) error {
	fmt.Fprintln(t.w, rule)
	for _, tb := range t.tables()[1:] {
		tb.head(t.w, t.cfg)
		for _, r := range rep.Results {
			tb.row(t.w, t.cfg, r)
		}
		fmt.Fprintln(t.w, rule)
	}
	writeNotes(t.w, rep)
	return nil
}

// jsonReporter prints the whole report as one JSON object at the end.
type jsonReporter struct{ w io.Writer }

func (j *jsonReporter) begin()               {}
func (j *jsonReporter) row(Result)           {}
func (j *jsonReporter) end(rep Report) error { return writeJSON(j.w, rep) }

// numberReporter is --output: one number per size, alone on its line, for scripts; the row of a
// size or interval cut short by Ctrl-C has interruptedMark after its number.
type numberReporter struct {
	w   io.Writer
	cfg Config
}

// Output choices (--output).
const (
	outBandwidth = "bandwidth"    // the average bandwidth, in MiB/s (Gb/s with --report_gbits)
	outMsgRate   = "message_rate" // the message rate, in Mpps
	outLatency   = "latency"      // the median latency, in µs
)

func (n *numberReporter) begin() {}

func (n *numberReporter) row(r Result) {
	var x float64
	switch n.cfg.Output {
	case outBandwidth:
		_, f := bwUnit(n.cfg)
		x = r.BWAvg * f
	case outMsgRate:
		x = r.MsgRate
	default:
		x = r.Latency.P50
	}
	// A row Ctrl-C cut short (--run_infinitely's last interval, or a size's) is marked as the
	// tables, -csv and -json mark it, after the number: a script taking the first field still
	// reads it, one that takes every line as a number stops at it rather than averaging in a
	// part of an interval.
	fmt.Fprintf(n.w, "%s%s\n", strconv.FormatFloat(x, 'f', 6, 64), interruptedMark(r))
}

func (n *numberReporter) end(Report) error { return nil }

// csvReporter is -csv: one header row, then one row per size.
type csvReporter struct {
	w   *csv.Writer
	cfg Config
}

// csvColumns are -csv's columns: the name and how a result gives the value.
var csvColumns = []struct {
	name string
	val  func(cfg Config, r Result) string
}{
	{"bytes", func(_ Config, r Result) string { return strconv.Itoa(r.Bytes) }},
	{"iterations", func(_ Config, r Result) string { return u(r.Iterations) }},
	{"failed", func(_ Config, r Result) string { return u(r.SinkErrors) }},
	{"elapsed_s", func(_ Config, r Result) string { return f(r.Elapsed.Seconds()) }},
	{"bw_peak_BWUNIT", func(c Config, r Result) string { _, k := bwUnit(c); return f(r.BWPeak * k) }},
	{"bw_avg_BWUNIT", func(c Config, r Result) string { _, k := bwUnit(c); return f(r.BWAvg * k) }},
	{"bw_stdev_BWUNIT", func(c Config, r Result) string { _, k := bwUnit(c); return f(r.BWStdev * k) }},
	{"msg_rate_mpps", func(_ Config, r Result) string { return f(r.MsgRate) }},
	{"lat_min_us", func(_ Config, r Result) string { return f(r.Latency.Min) }},
	{"lat_p50_us", func(_ Config, r Result) string { return f(r.Latency.P50) }},
	{"lat_p90_us", func(_ Config, r Result) string { return f(r.Latency.P90) }},
	{"lat_p99_us", func(_ Config, r Result) string { return f(r.Latency.P99) }},
	{"lat_p99_9_us", func(_ Config, r Result) string { return f(r.Latency.P999) }},
	{"lat_max_us", func(_ Config, r Result) string { return f(r.Latency.Max) }},
	{"lat_avg_us", func(_ Config, r Result) string { return f(r.Latency.Avg) }},
	{"lat_stdev_us", func(_ Config, r Result) string { return f(r.Latency.Stdev) }},
	{"ring_full", func(_ Config, r Result) string { return u(r.RingFull) }},
	{"faults", func(_ Config, r Result) string { return u(r.Faults) }},
	{"map_errors", func(_ Config, r Result) string { return u(r.MapErrors) }},
	{"aborted", func(_ Config, r Result) string { return u(r.Aborted) }},
	{"halts", func(_ Config, r Result) string { return u(r.Halts) }},
	{"interrupted", func(_ Config, r Result) string { return strconv.FormatBool(r.Interrupted) }},
}

func u(x uint64) string  { return strconv.FormatUint(x, 10) }
func f(x float64) string { return strconv.FormatFloat(x, 'f', 6, 64) }

func (c *csvReporter) begin() {
	unit := "mib_s"
	if c.cfg.ReportGbits {
		unit = "gbit_s"
	}
	head := make([]string, len(csvColumns))
	for i, col := range csvColumns {
		head[i] = strings.Replace(col.name, "BWUNIT", unit, 1)
	}
	_ = c.w.Write(head)
	c.w.Flush()
}

func (c *csvReporter) row(r Result) {
	rec := make([]string, len(csvColumns))
	for i, col := range csvColumns {
		rec[i] = col.val(c.cfg, r)
	}
	_ = c.w.Write(rec)
	c.w.Flush()
}

func (c *csvReporter) end(Report) error { return c.w.Error() }
