package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMapFaultsRefuseRegisteredMem: -faults map= and mapnth= fail the DMA map calls of the adds;
// -mem registered makes none (the payload is registered once, and registration is not subject
// to injection). "-mem registered -faults map=1" used to run and report every packet sent, with
// faults and map-errors 0: faults asked for and never injected, under a clean report. It is a
// usage error now; the faults that do apply to registered memory (halts, sink faults) still run.
func TestMapFaultsRefuseRegisteredMem(t *testing.T) {
	for _, f := range []string{"map=1", "map=0.5,seed=3", "mapnth=3", "halt=0.1,map=0.01"} {
		_, err := parseConfig([]string{"-mem", "registered", "-faults", f}, new(bytes.Buffer))
		var ue *usageError
		require.ErrorAs(t, err, &ue, f)
		assert.Contains(t, err.Error(), "-mem registered", f)
	}
	for _, f := range []string{"halt=0.1", "haltat=5", "sinkfail=0.1", "sinkstall=0.1"} {
		_, err := parseConfig([]string{"-mem", "registered", "-faults", f}, new(bytes.Buffer))
		require.NoError(t, err, f)
	}
	code, out, errOut := runTool(t, "-mem", "registered", "-faults", "map=1", "-n", "100")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "no map call to fail")
}

// TestMsgModeCountsMapFaults: in -mode msg a mapping that -faults map fails ends its request
// ERROR with ENOSPC. Those requests used to be counted as aborted only: "-mode msg -faults map=1"
// reported faults 0 and map-errors 0 beside 100 aborted messages, while the faults column is
// documented as every fault event (map-errors + halts + sink-errors + stalls). They count as
// map errors now, as a packet run's dropped packets do, and every message is accounted for once.
func TestMsgModeCountsMapFaults(t *testing.T) {
	for _, f := range []string{"map=1", "map=0.3,seed=5"} {
		rep := runJSON(t, "-mode", "msg", "-n", "100", "-warmup", "0", "-depth", "4", "-faults", f)
		r := rep.Results[0]
		assert.Positive(t, r.MapErrors, f)
		assert.Equal(t, r.MapErrors, r.Faults, "%s: every injected mapping failure is a fault", f)
		assert.Zero(t, r.Aborted, f)
		assert.EqualValues(t, 100, r.Iterations+r.MapErrors, "%s: every message counted once", f)
	}
}

// TestQPsOutOfRangeNamesQ: -q over the producer limit used to be refused as "-producers 100000:
// want 1..1024", naming a flag the command line did not have. The error names -q now.
func TestQPsOutOfRangeNamesQ(t *testing.T) {
	for _, v := range []string{"0", "-1", "1025", "100000"} {
		_, err := parseConfig([]string{"-q", v}, new(bytes.Buffer))
		var ue *usageError
		require.ErrorAs(t, err, &ue, v)
		assert.Contains(t, err.Error(), "-q "+v+": want 1..1024", v)
	}
	cfg, err := parseConfig([]string{"-q", "1024"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, 1024, cfg.Producers)
}

// TestHTTPBadPortIsUsage: -http checked only that the value split into host and port, so a port
// that is no port ("-http :99999", "-http localhost:abc") passed validation and failed when the
// run started to listen: exit 1 ("sdmaperf: -http: listen tcp: address 99999: invalid port")
// instead of a usage error's 2 (and -server did not look at -http at all). The port is checked
// with the flags now, for the client and -server.
func TestHTTPBadPortIsUsage(t *testing.T) {
	for _, v := range []string{":99999", "localhost:abc", "localhost:-1", "127.0.0.1:65536"} {
		code, out, errOut := runTool(t, "-http", v, "-n", "10")
		assert.Equal(t, exitUsage, code, "%s: %s", v, errOut)
		assert.Empty(t, out, v)
		assert.Contains(t, errOut, "-http "+v+": want host:port", v)
	}
	for _, v := range []string{":99999", "localhost:abc"} {
		_, err := parseConfig([]string{"-server", "-http", v}, new(bytes.Buffer))
		var ue *usageError
		require.ErrorAs(t, err, &ue, "-server -http %s", v)
	}
	for _, v := range []string{"localhost:0", "127.0.0.1:6060", "[::1]:6060"} {
		_, err := parseConfig([]string{"-http", v}, new(bytes.Buffer))
		require.NoError(t, err, v)
	}
}

// TestServerServesHTTP: -server takes -http (serverFlags lists it, and -h says it serves
// /debug/pprof/ during the run), but runServer never looked at it: "sdmaperf -server -http
// localhost:6060" ran with nothing listening there. The receiver serves it now (before it
// announces "receiving on", so the address is known once that line is out).
func TestServerServesHTTP(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := &addrWriter{prefix: "receiving on ", ready: make(chan string, 1)}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-server", "-udp-addr", "127.0.0.1:0", "-idle", "0", "-http", "127.0.0.1:0"}, io.Discard, stderr)
	}()
	select {
	case <-stderr.ready:
	case code := <-done:
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	_, rest, ok := strings.Cut(stderr.String(), "on http://")
	require.True(t, ok, "-server -http serves nothing: %s", stderr.String())
	addr, _, _ := strings.Cut(rest, "\n")
	resp, err := http.Get("http://" + addr + "/debug/pprof/")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(b), "goroutine")
	cancel()
	assert.Equal(t, exitInterrupted, <-done)
}

// TestPlotOneValueLatency: a latency distribution whose samples all fall in one histogram bucket
// (one packet, "-n 1 -warmup 0 -plot lat.png", or identical latencies) has every point at the
// 100th percentile, which the 1/(1-p) axis cannot place; the line was left without points and
// gonum's log scale panicked ("Values must be greater than 0 for a log scale"): sdmaperf died
// with a stack trace after the run. Such a distribution is flat and is drawn so.
func TestPlotOneValueLatency(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{1, 7} {
		rep := sampleReport(t, "-mode", "lat")
		h := newHistogram()
		for range n {
			require.NoError(t, h.RecordValue(53_000))
		}
		rep.Results[0].hist, rep.Results[0].Latency = h, latencyOf(h)
		for _, ext := range []string{".svg", ".png"} {
			path := filepath.Join(dir, strconv.Itoa(n)+ext)
			require.NotPanics(t, func() { require.NoError(t, writePlot(path, rep)) }, "%d samples, %s", n, ext)
			decodesAs(t, path)
		}
	}
	code, _, errOut := runTool(t, "-n", "1", "-warmup", "0", "-plot", filepath.Join(dir, "run.png"))
	assert.Equal(t, exitOK, code, errOut)
}

// TestPlotAndHistSameFile: "-hist out.html -plot out.html" wrote the histogram and then the
// plot over it, without a word. Two outputs to one file is a usage error now.
func TestPlotAndHistSameFile(t *testing.T) {
	d := t.TempDir()
	for _, args := range [][]string{{"-hist", "x.svg", "-plot", "x.svg"}, {"-hist", d + "/x.html", "-plot", d + "/./x.html"}} {
		_, err := parseConfig(args, new(bytes.Buffer))
		var ue *usageError
		require.ErrorAs(t, err, &ue, "%v", args)
		assert.Contains(t, err.Error(), "-plot and -hist both name", "%v", args)
	}
	_, err := parseConfig([]string{"-hist", "x.hgrm", "-plot", "x.svg"}, new(bytes.Buffer))
	require.NoError(t, err)
}

// TestOutFilesCheckedBeforeTheRun: "-plot /nonexistent/x.svg" or "-hist DIR" ran the whole
// benchmark and then failed writing the file (exit 1, "-plot: open ...: no such file or
// directory"), the results of the run lost. A path that cannot be written that way is a usage
// error before anything runs.
func TestOutFilesCheckedBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-plot", filepath.Join(dir, "nope", "x.svg")},
		{"-hist", filepath.Join(dir, "nope", "x.hgrm")},
		{"-hist", dir},
	} {
		code, out, errOut := runTool(t, append(args, "-n", "10")...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, errOut)
		assert.Empty(t, out, "%v", args)
		assert.Contains(t, errOut, "sdmaperf: "+args[0]+" ", "%v", args)
	}
	code, _, errOut := runTool(t, "-n", "10", "-hist", filepath.Join(dir, "x.hgrm"), "-plot", filepath.Join(dir, "x.svg"))
	assert.Equal(t, exitOK, code, errOut)
}

// TestServerFragsRange: -server takes the client's -frags (with -sweep, the first size it
// expects), but validateServer skipped the client's range check: "-server -frags 0" and
// "-server -frags -1" were accepted (the sweep then started at 2 bytes whatever the value).
// They are usage errors now, as for the client.
func TestServerFragsRange(t *testing.T) {
	for _, v := range []string{"0", "-1", "257", "999999"} {
		for _, extra := range [][]string{nil, {"-sweep"}} {
			_, err := parseConfig(append([]string{"-server", "-frags", v}, extra...), new(bytes.Buffer))
			var ue *usageError
			require.ErrorAs(t, err, &ue, "-frags %s %v", v, extra)
			assert.Contains(t, err.Error(), "-frags "+v+": want 1..256")
		}
	}
	cfg, err := parseConfig([]string{"-server", "-sweep", "-frags", "20"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, 32, cfg.Sizes[0])
}

// TestTinyDurationNamesItsValue: a positive -D below a nanosecond ("-D 1e-12") truncated to 0 and
// was refused as "-D 0s: want a positive duration", a value nobody typed (the same defect
// TestBadDurations fixed for the wrap past 292 years). It is refused naming the value given.
func TestTinyDurationNamesItsValue(t *testing.T) {
	for _, v := range []string{"1e-12", "0.0000000001", "5e-324"} {
		_, err := parseConfig([]string{"-D", v}, new(bytes.Buffer))
		var ue *usageError
		require.ErrorAs(t, err, &ue, v)
		assert.Contains(t, err.Error(), `invalid value "`+v+`" for flag -D`, v)
	}
	cfg, err := parseConfig([]string{"-D", "1e-9"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, time.Nanosecond, cfg.Duration)
	_, err = parseConfig([]string{"-D", "0"}, new(bytes.Buffer))
	assert.ErrorContains(t, err, "-D 0s: want a positive duration")
}

// TestAliasAndFlagBothGiven: perftest's spellings share their flag's value, so "-s 64 -size 128"
// ran 128-byte packets and "-size 128 -s 64" 64-byte ones, the other value dropped without a
// word (as -q and -producers, already refused together). Both spellings at once are a usage
// error now; either alone still works.
func TestAliasAndFlagBothGiven(t *testing.T) {
	for _, args := range [][]string{
		{"-s", "64", "-size", "128"}, {"-size", "128", "-s", "64"}, {"-t", "8", "-depth", "16"}, {"-a", "-sweep"},
	} {
		_, err := parseConfig(args, new(bytes.Buffer))
		var ue *usageError
		require.ErrorAs(t, err, &ue, "%v", args)
		assert.Contains(t, err.Error(), "both given", "%v", args)
	}
	cfg, err := parseConfig([]string{"-s", "64", "-t", "8"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, []int{64}, cfg.Sizes)
	assert.Equal(t, 8, cfg.Depth)
}

// TestFaultKeyTwice: "-faults map=0.5,map=0" ran with no map faults (the last value won without
// a word). A key given twice is a usage error now.
func TestFaultKeyTwice(t *testing.T) {
	for _, f := range []string{"map=0.5,map=0", "haltat=3,cause=wrong-dword-count,cause=explicit-halt", "seed=1,halt=0.1,seed=2"} {
		_, err := parseConfig([]string{"-faults", f}, new(bytes.Buffer))
		var ue *usageError
		require.ErrorAs(t, err, &ue, f)
		assert.Contains(t, err.Error(), "given twice", f)
	}
}

// TestMsgModeSmallSizes: -mode msg sends each message as one vector and refuses -frags, but
// checkSizes held its size to the packet runs' default of 2 fragments: "-mode msg -size 1" was
// refused with "-frags 2 with -size 1: a fragment is at least one byte", advice that -mode msg
// then refuses ("-frags does not apply"), so no 1-byte message could be measured. -frags does
// not bound a message's size now.
func TestMsgModeSmallSizes(t *testing.T) {
	cfg, err := parseConfig([]string{"-mode", "msg", "-size", "1"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, []int{1}, cfg.Sizes)
	rep := runJSON(t, "-mode", "msg", "-size", "1", "-n", "20", "-warmup", "0", "-depth", "4")
	assert.EqualValues(t, 20, rep.Results[0].Iterations)
	_, err = parseConfig([]string{"-size", "1"}, new(bytes.Buffer))
	assert.ErrorContains(t, err, "-frags 2 with -size 1", "a packet run still needs a byte per fragment")
}

// TestMsgModePacketCountChecked: a request's packet count is 16 bits (usdma.Message), so
// "-mode msg -mtu 64 -size 67108864" (1048576 packets a message) passed validation and failed
// at the first Submit with exit 1 ("NPkts is 16 bits"). It is a usage error now; the largest
// message that fits still runs.
func TestMsgModePacketCountChecked(t *testing.T) {
	code, out, errOut := runTool(t, "-mode", "msg", "-mtu", "64", "-size", "67108864", "-depth", "1", "-n", "1", "-warmup", "0")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "makes 1048576 packets per message; a request holds at most 65535")
	_, err := parseConfig([]string{"-mode", "msg", "-mtu", "64", "-sweep", "-size", "8388608"}, new(bytes.Buffer))
	assert.ErrorContains(t, err, "makes 131072 packets", "the sweep's largest size counts")
	cfg, err := parseConfig([]string{"-mode", "msg", "-mtu", "64", "-size", "4194240", "-depth", "1"}, new(bytes.Buffer))
	require.NoError(t, err, "65535 packets fit")
	assert.Equal(t, []int{4194240}, cfg.Sizes)
}

// TestFaultsFlagTwice: "-faults halt=0.001 -faults map=0.01" ran with map faults only, the
// second -faults replacing the first's keys without a word (0 halts, where the user asked for
// some). A second -faults is a usage error naming the one list to give; one -faults as before.
func TestFaultsFlagTwice(t *testing.T) {
	for _, args := range [][]string{
		{"-faults", "halt=0.001", "-faults", "map=0.01"},
		{"-faults=map=0.5", "--faults", "none"},
		{"-faults", "halt=0.1", "-faults", "halt=0.1"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, exitUsage, run(t.Context(), args, &stdout, &stderr), "%v", args)
		assert.Contains(t, stderr.String(), "-faults given twice", "%v", args)
		assert.Empty(t, stdout.String(), "%v", args)
	}
	cfg, err := parseConfig([]string{"-faults", "halt=0.001,map=0.01"}, new(bytes.Buffer))
	require.NoError(t, err)
	assert.Equal(t, 0.001, cfg.Faults.HaltRate)
	assert.Equal(t, 0.01, cfg.Faults.MapFraction)
}
