package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runPathJSON(t *testing.T, args ...string) pathReport {
	t.Helper()
	code, out, errOut := runTool(t, append(args, "-json")...)
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
	var rep pathReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	return rep
}

func TestPathPIOBandwidth(t *testing.T) {
	rep := runPathJSON(t, "-path", "pio", "-n", "2000", "-warmup", "10", "-size", "64", "-producers", "2", "-frags", "3")
	require.Len(t, rep.Results, 1)
	r := rep.Results[0]
	assert.Equal(t, "pio", r.Path)
	assert.EqualValues(t, 2000, r.Packets)
	assert.EqualValues(t, 2000, r.ByPIO)
	assert.Zero(t, r.BySDMA)
	assert.Positive(t, r.Mpps)
	// Bandwidth in perftest's MB (2^20 bytes), as every other table of the tool (it was 10^6).
	assert.InEpsilon(t, float64(r.Packets)*64/r.Seconds/(1<<20), r.MiBps, 1e-9)
}

func TestPathAutoLatencySweep(t *testing.T) {
	rep := runPathJSON(t, "-path", "auto", "-mode", "lat", "-sweep", "-size", "1024", "-n", "200", "-warmup", "5")
	// Each size by pio, sdma and auto; auto follows the 256-byte threshold.
	byPath := map[string]int{}
	for _, r := range rep.Results {
		byPath[r.Path]++
		assert.EqualValues(t, 200, r.Packets, "%s %d", r.Path, r.Bytes)
		assert.LessOrEqual(t, r.P50, r.P99)
		if r.Path == "auto" {
			if r.Bytes <= 256 {
				assert.EqualValues(t, 200, r.ByPIO, "auto %d bytes", r.Bytes)
			} else {
				assert.EqualValues(t, 200, r.BySDMA, "auto %d bytes", r.Bytes)
			}
		}
	}
	assert.Equal(t, byPath["pio"], byPath["sdma"])
	assert.Equal(t, byPath["pio"], byPath["auto"])
}

func TestPathTableShowsCrossover(t *testing.T) {
	code, out, errOut := runTool(t, "-path", "pio", "-sweep", "-size", "256", "-n", "500", "-warmup", "5")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "crossover:")
	assert.Regexp(t, `(?m)^ pio +256 `, out)
	assert.Regexp(t, `(?m)^ sdma +256 `, out)
}

func TestPathFaults(t *testing.T) {
	rep := runPathJSON(t, "-path", "pio", "-n", "3000", "-size", "64", "-faults", "halt=0.01")
	r := rep.Results[0]
	assert.Positive(t, r.Halts, "-faults halt reaches the PIO send contexts")
	assert.Equal(t, r.ByPIO, r.Packets+r.Flushed, "every packet sent was delivered or flushed by a halt")
}

func TestPathUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-path", "nope"},
		{"-path", "pio", "-size", "8192"},
		{"-path", "pio", "-sink", "udp"},
		{"-path", "auto", "-faults", "map=0.1"},
	} {
		code, _, errOut := runTool(t, args...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, errOut)
	}
}

// TestPathLatencyHaltEnds: in latency mode a packet that a PIO halt flushes is never delivered;
// the producer waited for its delivery until the context ended (forever from the command line;
// the tests' minute, then "interrupted"). It now stops waiting when its flow has nothing in
// flight: the packet counts as flushed, and the run goes on.
func TestPathLatencyHaltEnds(t *testing.T) {
	for _, args := range [][]string{
		{"-path", "pio", "-faults", "haltat=3", "-n", "50", "-warmup", "0", "-size", "64"},
		{"-path", "auto", "-faults", "halt=0.1", "-n", "60", "-producers", "2", "-size", "128"},
	} {
		rep := runPathJSON(t, append([]string{"-mode", "lat"}, args...)...)
		require.Len(t, rep.Results, 1, "%v", args)
		r := rep.Results[0]
		assert.Positive(t, r.Halts, "%v", args)
		assert.Positive(t, r.Flushed, "%v: a halt flushes the packet it stops at", args)
		assert.Equal(t, r.ByPIO, r.Packets+r.Flushed, "%v: every packet sent was delivered or flushed", args)
	}
}

// blockSink holds every delivery until release is closed.
type blockSink struct{ release chan struct{} }

func (s blockSink) Deliver(int, [][]byte) error {
	<-s.release
	return nil
}

// TestPathDrainStallIsAnError: a flow that never drains (its packet held in the sink) no longer
// keeps a -path run waiting once the context has ended: after the grace the drain fails with
// errStalled, which says what is in flight and where.
func TestPathDrainStallIsAnError(t *testing.T) {
	defer func(g time.Duration) { pathDrainGrace = g }(pathDrainGrace)
	pathDrainGrace = time.Millisecond
	cfg, err := parseConfig([]string{"-path", "auto", "-size", "64"}, new(bytes.Buffer))
	require.NoError(t, err)
	sink := blockSink{release: make(chan struct{})}
	dev, closeDev, err := newPathDevice(cfg, pathSDMA, sink)
	require.NoError(t, err)
	p := newPathProducer(dev, &flowSink{}, 0, 64, 1, false)
	_, err = p.flow.Send(t.Context(), p.segs, nil)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = drainFlows(ctx, []*pathProducer{p})
	require.ErrorIs(t, err, errStalled)
	assert.Contains(t, err.Error(), "0 PIO and 1 SDMA packets in flight")
	assert.Contains(t, err.Error(), "context canceled, then 1ms more")

	close(sink.release)
	require.NoError(t, drainFlows(t.Context(), []*pathProducer{p}), "delivered: the flow drains")
	// A live context: the close has no deadline to meet (with the cancelled one it had 1 ms,
	// which a loaded machine missed once).
	require.NoError(t, closeBounded(t.Context(), closeDev))
}

// TestPathCloseStallIsAnError: a device close that does not return is an errStalled once the
// context has ended and the grace passed, not a wait without end.
func TestPathCloseStallIsAnError(t *testing.T) {
	defer func(g time.Duration) { pathDrainGrace = g }(pathDrainGrace)
	pathDrainGrace = time.Millisecond
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := closeBounded(ctx, func() { <-release })
	require.ErrorIs(t, err, errStalled)
	assert.Contains(t, err.Error(), "closing the devices did not return")
}

// TestPathJSONHasHost: -json promises "the host, the build and the flags as given", and a
// -path pio|auto run's JSON had neither host nor flags: only the tool, the config and the
// results, so two machines' PIO figures could not be told apart by their files.
func TestPathJSONHasHost(t *testing.T) {
	args := []string{"-path", "pio", "-n", "100", "-warmup", "0", "-size", "64", "-json"}
	code, out, errOut := runTool(t, args...)
	require.Equal(t, exitOK, code, "stderr: %s", errOut)
	var rep struct {
		Host *Host `json:"host"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.NotNil(t, rep.Host, out)
	assert.NotEmpty(t, rep.Host.GoVersion)
	assert.Equal(t, args, rep.Host.Args)
}
