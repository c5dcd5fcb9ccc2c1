package main

import (
	"encoding/json"
	"testing"

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
