package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

func sampleReport(t *testing.T, args ...string) Report {
	cfg, err := parseConfig(args, new(bytes.Buffer))
	require.NoError(t, err)
	h := newHistogram()
	for i := int64(1); i <= 1000; i++ {
		require.NoError(t, h.RecordValue(i*1000)) // 1..1000 µs
	}
	r := Result{Bytes: 4096, Iterations: 250000, Elapsed: time.Second, Latency: latencyOf(h), RingFull: 12, Faults: 3, MapErrors: 3, hist: h}
	r.BWPeak = 1200
	r.rates(250000 * 4096)
	return Report{Tool: "sdmaperf", Config: cfg, Results: []Result{r}}
}

func TestRates(t *testing.T) {
	r := Result{Iterations: 1 << 20, Elapsed: 2 * time.Second}
	r.rates(1 << 30)
	assert.InDelta(t, 512, r.BWAvg, 1e-9)
	assert.InDelta(t, 512, r.BWPeak, 1e-9, "a peak below the average is raised to it")
	assert.InDelta(t, float64(1<<20)/2e6, r.MsgRate, 1e-9)
}

func TestLatencyPercentiles(t *testing.T) {
	l := sampleReport(t).Results[0].Latency
	assert.EqualValues(t, 1000, l.Count)
	assert.InDelta(t, 1, l.Min, 0.01)
	assert.InDelta(t, 500, l.P50, 1)
	assert.InDelta(t, 900, l.P90, 1)
	assert.InDelta(t, 990, l.P99, 1)
	assert.InDelta(t, 999, l.P999, 1)
	assert.InDelta(t, 1000, l.Max, 1)
	assert.InDelta(t, 500.5, l.Avg, 1)
	assert.Equal(t, Latency{}, latencyOf(newHistogram()))
}

func TestTextOutput(t *testing.T) {
	var out bytes.Buffer
	writeText(&out, sampleReport(t))
	text := out.String()
	for _, want := range []string{
		"Send BW Test", "Engine(s)", "Ring size       : 2048", "Mapper          : direct",
		"#bytes", "#iterations", "BW peak[MiB/sec]", "BW average[MiB/sec]", "MsgRate[Mpps]",
		"t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]",
		"99% percentile[usec]", "99.9% percentile[usec]", "p90[usec]", "ring-full", "faults",
	} {
		assert.Contains(t, text, want)
	}
	// The data row: size, iterations, peak, average, rate.
	var row string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, " 4096 ") {
			row = l
			break
		}
	}
	assert.Equal(t, []string{"4096", "250000", "1200.00", "976.56", "0.250000", "0"}, strings.Fields(row))

	// Halt causes: injected ones are labelled so, most frequent first.
	rep := sampleReport(t, "-faults", "halt=0.01")
	rep.Results[0].HaltsBy = map[string]uint64{"explicit halt": 3, "memory read fault": 12, "first descriptor": 3}
	rep.Results[0].HaltsInjected = true
	rep.Results[0].SinkStalls = 7
	out.Reset()
	writeText(&out, rep)
	assert.Contains(t, out.String(), " 4096 bytes: halts (injected): memory read fault 12, explicit halt 3, first descriptor 3\n")
	assert.Contains(t, out.String(), " sink-errors  stalls ")
	rep.Results[0].HaltsInjected = false
	out.Reset()
	writeText(&out, rep)
	assert.Contains(t, out.String(), " 4096 bytes: halts: memory read fault 12,")

	out.Reset()
	writeText(&out, sampleReport(t, "-mode", "lat", "-sink", "udp"))
	assert.Contains(t, out.String(), "Send Latency Test")
	assert.Contains(t, out.String(), "udp (in-process receiver)")
}

func TestJSONOutputParses(t *testing.T) {
	rep := sampleReport(t, "-faults", "map=0.5")
	rep.Receiver = &udpsink.Report{Packets: 7, Ended: true}
	var out bytes.Buffer
	require.NoError(t, writeJSON(&out, rep))
	var back map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &back))
	assert.Equal(t, "sdmaperf", back["tool"])
	cfg := back["config"].(map[string]any)
	assert.Equal(t, "bw", cfg["mode"])
	assert.Equal(t, 0.5, cfg["faults"].(map[string]any)["map"])
	res := back["results"].([]any)[0].(map[string]any)
	assert.EqualValues(t, 4096, res["bytes"])
	assert.EqualValues(t, 250000, res["iterations"])
	assert.Contains(t, res, "bw_peak_mib_s")
	assert.Contains(t, res, "sink_stalls")
	assert.Contains(t, res["latency"], "p99_9_us")
	assert.EqualValues(t, 7, back["receiver"].(map[string]any)["packets"])
}

func TestNoProgressWhenNotATerminal(t *testing.T) {
	cfg, err := parseConfig([]string{"-D", "10s"}, new(bytes.Buffer))
	require.NoError(t, err)
	var buf bytes.Buffer
	p := newProgress(cfg, 4096, &buf, cfg.Duration)
	assert.Nil(t, p)
	p.update(1, time.Second, 1) // no-ops on nil
	p.finish()
	assert.Empty(t, buf.String())
}

func TestReceiverReportText(t *testing.T) {
	var out bytes.Buffer
	writeReceiverReport(&out, &udpsink.Report{Packets: 10, Bytes: 1000, Lost: 1, Ended: true, Elapsed: time.Millisecond,
		Engines: []udpsink.EngineReport{{Engine: 0, Packets: 10, Bytes: 1000, Sent: 11, Lost: 1, Ended: true}}})
	assert.Contains(t, out.String(), "lost 1")
	assert.Contains(t, out.String(), "bad-checksum")
}

func TestStdev(t *testing.T) {
	assert.Zero(t, stdevOf(nil))
	assert.Zero(t, stdevOf([]float64{5}))
	assert.InDelta(t, 2, stdevOf([]float64{2, 4, 4, 4, 5, 5, 7, 9}), 1e-12)
}

// TestLatencyTablePerftestColumns: the latency table's data row has ib_send_lat's columns in its
// order, so that a script reading perftest's output by position reads the same figures: #bytes,
// #iterations, t_min, t_max, t_typical (the median), t_avg, t_stdev, 99%, 99.9%; then p90.
func TestLatencyTablePerftestColumns(t *testing.T) {
	var out bytes.Buffer
	r := Result{Bytes: 64, Iterations: 990, Latency: Latency{Min: 1, P50: 2, P90: 3, P99: 4, P999: 5, Max: 6, Avg: 2.5, Stdev: 0.5, Count: 1000}}
	latencyTable.row(&out, Config{}, r)
	assert.Equal(t, []string{"64", "1000", "1.00", "6.00", "2.00", "2.50", "0.50", "4.00", "5.00", "3.00"}, strings.Fields(out.String()))
	out.Reset()
	latencyTable.head(&out, Config{Mode: ModeLat})
	head := out.String()
	for i, col := range []string{"t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]", "99% percentile[usec]", "99.9% percentile[usec]"} {
		j := strings.Index(head, col)
		require.GreaterOrEqual(t, j, 0, col)
		if i > 0 {
			prev := []string{"t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]", "99% percentile[usec]"}[i-1]
			assert.Greater(t, j, strings.Index(head, prev), "%s after %s", col, prev)
		}
	}
}
