package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusal is a flag combination that was taken and then silently ignored (or contradicted
// itself): it is a usage error now, and the error names both flags.
type refusal struct {
	args []string
	want []string // what the error says: both flags' names, at least
}

// refusals is the census of such combinations: each row is a usage error naming the flags.
var refusals = []refusal{
	// --report_gbits converts bandwidths; these outputs print none, or MiB/s by name.
	{[]string{"-mode", "lat", "--report_gbits", "--output=latency"}, []string{"--report_gbits with --output=latency"}},
	{[]string{"--report_gbits", "--output=message_rate"}, []string{"--report_gbits with --output=message_rate"}},
	{[]string{"-mode", "lat", "--report_gbits", "-H"}, []string{"--report_gbits with -H"}},
	// -path pio sends every packet by PIO: no SDMA engine, no mapping.
	{[]string{"-path", "pio", "-size", "64", "-engines", "4"}, []string{"-engines with -path pio"}},
	{[]string{"-path", "pio", "-size", "64", "-mapper", "iommu"}, []string{"-mapper with -path pio"}},
	{[]string{"-path", "pio", "-size", "64", "-wait", "busy-poll"}, []string{"-wait with -path pio"}},
	// -path auto sends a packet up to the PIO threshold (256 bytes) by PIO: no SDMA packet of
	// the run goes first to make it fall back to SDMA.
	{[]string{"-path", "auto", "-size", "256", "-engines", "2", "-producers", "2"}, []string{"-engines with -path auto -size 256: every packet goes by PIO", "-size above 256"}},
	{[]string{"-path", "auto", "-s", "64", "-mapper", "iommu"}, []string{"-mapper with -path auto -s 64"}},
	{[]string{"-path", "auto", "-size", "2", "-wait", "busy-poll"}, []string{"-wait with -path auto -size 2"}},
	// Producers go round-robin over the engines: engines past the producers' count sat idle.
	{[]string{"-engines", "4"}, []string{"-engines 4 with -producers 1", "3 of the engines would send nothing; give -producers 4 or more (-q 4 sets both)"}},
	{[]string{"-engines", "3", "-producers", "2", "-mode", "lat"}, []string{"-engines 3 with -producers 2"}},
	{[]string{"-engines", "8", "-q", "2"}, []string{"-engines 8 with -q 2: producers go round-robin over the engines, one engine each, so 6 of the engines would send nothing; give -q 8 or more\n"}},
	{[]string{"-mode", "msg", "-engines", "2"}, []string{"-engines 2 with -producers 1"}},
	// One packet in flight per producer: its one payload buffer is shared already.
	{[]string{"-shared", "-mode", "lat"}, []string{"-shared with -mode lat"}},
	{[]string{"-shared", "-depth", "1"}, []string{"-shared with -depth 1"}},
	{[]string{"-shared", "-t", "1", "-mem", "page", "-size", "8192"}, []string{"-shared with -t 1"}},
	// -send acts when the ring is full: one that can never fill leaves it nothing to do.
	{[]string{"-send", "sleep"}, []string{"-send sleep with -ring 2048", "at most 384 descriptors (128 packets in flight × up to 3 descriptors)", "give -ring 256 or less, or more packets in flight per engine (-depth, or more producers per engine)\n"}},
	{[]string{"-send", "spin", "-mode", "lat", "-ring", "64"}, []string{"-send spin with -ring 64", "give more packets in flight per engine (more producers per engine: -mode lat has one each)\n"}},
	{[]string{"-send", "sleep", "-ring", "64", "-t", "21"}, []string{"-send sleep with -ring 64: an engine holds at most 63 descriptors", "give more packets in flight per engine (-t, or more producers per engine)\n"}},
	{[]string{"-send", "spin", "-ring", "64", "-producers", "4", "-engines", "2", "-depth", "10"}, []string{"at most 60 descriptors (20 packets"}},
	// One packet in flight per engine goes alone, with sendmsg: no batch forms.
	{[]string{"-sink", "udp", "-mode", "lat", "-udp-gso"}, []string{"-udp-gso with -mode lat and no more producers than engines", "or -mode bw with -depth 2 or more)"}},
	{[]string{"-sink", "udp", "-mode", "lat", "-udp-batch", "8"}, []string{"-udp-batch 8 with -mode lat"}},
	{[]string{"-sink", "udp", "-mode", "lat", "-udp-batch", "0", "-producers", "2", "-engines", "2"}, []string{"-udp-batch 0 with -mode lat"}},
	{[]string{"-sink", "udp", "-t", "1", "-udp-gso"}, []string{"-udp-gso with -t 1 and no more producers than engines"}},
	// Contradictory: -mode msg's Submit sleeps for a completion pass only the sleeper would run.
	{[]string{"-mode", "msg", "-completion", "poll"}, []string{"-completion poll with -mode msg"}},
}

// accepted are combinations near the refused ones that do something, and run.
var accepted = [][]string{
	{"-path", "pio", "-sweep", "-size", "8", "-engines", "2", "-mapper", "iommu", "-wait", "park", "-D", "5ms"}, // the SDMA runs take them
	{"-path", "auto", "-size", "512", "-engines", "2", "-producers", "2", "-mapper", "iommu", "-n", "20"},
	{"-engines", "2", "-producers", "3", "-n", "30", "-size", "64"},
	{"-q", "20", "-n", "1", "-size", "64"}, // 16 engines (the most) for 20 producers
	{"-path", "auto", "-size", "512", "-engines", "2", "-n", "20"},
	{"-path", "auto", "-size", "257", "-mapper", "iommu", "-wait", "park", "-n", "20"}, // above the PIO threshold: SDMA
	{"-path", "auto", "-sweep", "-size", "8", "-wait", "park", "-D", "5ms"},            // the sweep's SDMA runs take it
	{"-shared", "-depth", "2", "-n", "20", "-size", "64"},
	{"-send", "sleep", "-ring", "64", "-t", "22", "-n", "200", "-size", "64"}, // 66 descriptors: the ring can fill
	{"-send", "spin", "-mode", "lat", "-ring", "64", "-producers", "22", "-n", "220", "-size", "64"},
	{"-send", "block", "-n", "20", "-size", "64"},                                              // the default, said
	{"-sink", "udp", "-mode", "lat", "-udp-batch", "1", "-n", "20", "-size", "64"},             // unbatched: what it does
	{"-sink", "udp", "-mode", "lat", "-udp-gso", "-producers", "2", "-n", "20", "-size", "64"}, // two in flight on the engine
	{"-sink", "udp", "-udp-gso", "-udp-batch", "4", "-n", "20", "-size", "64"},
	{"-mode", "msg", "-completion", "irq", "-n", "20", "-size", "65536"},
	{"-mode", "lat", "-completion", "poll", "-n", "20", "-size", "64"},
}

// TestCensusAccepted: the combinations next to the refused ones still run.
func TestCensusAccepted(t *testing.T) {
	for _, args := range accepted {
		code, _, errOut := runTool(t, append([]string{"-warmup", "0", "-json"}, args...)...)
		assert.Equal(t, exitOK, code, "%v: %s", args, errOut)
	}
}

// TestCensusRefusals: every combination of the census is a usage error naming its flags.
func TestCensusRefusals(t *testing.T) {
	for _, c := range refusals {
		_, err := parseConfig(c.args, new(bytes.Buffer))
		var ue *usageError
		if !assert.ErrorAs(t, err, &ue, "%v: accepted", c.args) {
			continue
		}
		for _, w := range c.want {
			assert.Contains(t, ue.Error()+"\n", w, "%v", c.args)
		}
	}
}

// TestReportGbitsInLatencyRuns: -mode lat --report_gbits is honoured where a bandwidth is printed
// (perftest's latency tests print none and drop the flag): the bandwidth table after the latency
// table, and -csv's bandwidth columns, are in Gb/s.
func TestReportGbitsInLatencyRuns(t *testing.T) {
	code, out, errOut := runTool(t, "-mode", "lat", "--report_gbits", "-n", "50", "-warmup", "0", "-size", "64")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "BW average[Gb/sec]")
	assert.NotContains(t, out, "MiB/sec")
	code, out, errOut = runTool(t, "-mode", "lat", "--report_gbits", "-n", "50", "-warmup", "0", "-size", "64", "-csv")
	require.Equal(t, exitOK, code, errOut)
	assert.True(t, strings.Contains(out, "bw_avg_gbit_s"), out)
	code, out, errOut = runTool(t, "--report_gbits", "--output=bandwidth", "-n", "50", "-warmup", "0", "-size", "64")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, 1, strings.Count(out, "\n"), out)
}

// TestPacketsCeiling: -n has one ceiling, 2^31-1 packets per size over all producers, with -q
// (perftest's per queue pair count, multiplied) or without: without, -n 9000000000 was taken.
func TestPacketsCeiling(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("-n past 2^31-1 does not parse into a 32-bit int")
	}
	for _, args := range [][]string{{"-n", "2147483648"}, {"-n", "9000000000", "-producers", "4"}, {"-n", "1073741824", "-q", "2"}} {
		_, err := parseConfig(args, new(bytes.Buffer))
		var ue *usageError
		if assert.ErrorAs(t, err, &ue, "%v: accepted", args) {
			assert.Contains(t, ue.Error(), "2147483647", "%v", args)
		}
	}
	for args, total := range map[string]int{"-n 2147483647": 2147483647, "-n 1073741823 -q 2": 2147483646} {
		cfg, err := parseConfig(strings.Fields(args), new(bytes.Buffer))
		require.NoError(t, err, args)
		assert.Equal(t, total, cfg.Iterations, args)
	}
}

// flagHelp is the -h text of the flag name.
func flagHelp(t *testing.T, name string) string {
	t.Helper()
	var cfg Config
	var raw rawFlags
	f := newFlagSet(&cfg, &raw, new(bytes.Buffer)).Lookup(name)
	require.NotNil(t, f, name)
	return f.Usage
}

// TestQPsInLatencyRuns: -q in -mode lat is a documented extension. perftest's latency tests exit
// ("Multiple QPs only available on bw tests"); sdmaperf's latency runs take several producers,
// each with one packet in flight, so -q N runs N of them, -n packets each as in -mode bw, and
// -q's help says it is an extension (it said nothing of -mode lat).
func TestQPsInLatencyRuns(t *testing.T) {
	assert.Contains(t, flagHelp(t, "q"), "also in -mode lat, an extension")
	assert.Contains(t, flagHelp(t, "q"), "Multiple QPs only available on bw tests")
	rep := runJSON(t, "-mode", "lat", "-q", "2", "-n", "30", "-warmup", "0", "-size", "64")
	require.Len(t, rep.Results, 1)
	assert.EqualValues(t, 60, rep.Results[0].Iterations, "-n per queue pair")
	assert.Equal(t, 2, rep.Config.Producers)
	assert.Equal(t, 2, rep.Config.Engines)
}

// TestReportGbitsInJSON: -json --report_gbits is honoured (it was refused): each result keeps its
// MiB/s bandwidths, named so, and adds the same ones in Gb/s, named _gbit_s; without the flag
// there are none.
func TestReportGbitsInJSON(t *testing.T) {
	assert.Contains(t, flagHelp(t, "json"), "_gbit_s")
	assert.Contains(t, flagHelp(t, "report_gbits"), "bw_avg_gbit_s")
	for mode, size := range map[string]string{"bw": "64", "lat": "64", "msg": "65536"} {
		code, out, errOut := runTool(t, "-json", "-mode", mode, "--report_gbits", "-n", "40", "-warmup", "0", "-size", size)
		require.Equal(t, exitOK, code, "%s: %s", mode, errOut)
		var rep struct{ Results []map[string]any }
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		require.Len(t, rep.Results, 1, mode)
		r := rep.Results[0]
		for _, bw := range []string{"bw_peak", "bw_avg", "bw_stdev"} {
			gb, ok := r[bw+"_gbit_s"].(float64)
			if assert.True(t, ok, "%s: %s_gbit_s: %s", mode, bw, out) {
				assert.InDelta(t, r[bw+"_mib_s"].(float64)*mib*8/1e9, gb, 1e-9, "%s: %s", mode, bw)
			}
		}
		assert.Positive(t, r["bw_avg_gbit_s"], mode)
	}
	code, out, errOut := runTool(t, "-json", "-n", "40", "-warmup", "0", "-size", "64")
	require.Equal(t, exitOK, code, errOut)
	assert.NotContains(t, out, "_gbit_s")
	assert.Contains(t, out, "bw_avg_mib_s")
}

// TestHaltAtEachInterval: --run_infinitely with -faults haltat=N halts each engine once in each
// -D interval (each interval re-arms the plan, so every row measures the same thing), and the
// -faults help says so (it said "once", which read as once for the whole run).
func TestHaltAtEachInterval(t *testing.T) {
	assert.Contains(t, faultsUsage(), "each engine halts once in each measured run (each size, and with --run_infinitely each -D interval")
	cfg, err := parseConfig([]string{"--run_infinitely", "-D", "0.05", "-warmup", "0", "-size", "256", "-faults", "haltat=10"}, new(bytes.Buffer))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var rows []Result
	err = runSize(ctx, cfg, 256, nil, io.Discard, func(r Result) {
		rows = append(rows, r)
		if len(rows) == 3 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, rows, 3)
	for i, r := range rows[:2] { // the third may be cut short before its 10th descriptor
		assert.EqualValues(t, 1, r.Halts, "row %d: %v", i, r.HaltsBy)
		assert.EqualValues(t, 1, r.HaltsBy[defaultCause.String()], "row %d", i)
		assert.NoError(t, checkHalts(cfg, r, io.Discard), "row %d", i)
	}
}
