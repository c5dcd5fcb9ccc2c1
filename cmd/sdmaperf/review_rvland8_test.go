package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInterruptedPathSweepClaimsNoUnmeasuredCrossover: a -path sweep cut by Ctrl-C keeps the
// sizes it finished and the row it cut short, which has one path only (runPaths drops the cut
// size's other rounds). crossover returned 0 at the first PIO size without an SDMA row, and the
// table read 0 as "SDMA's ns/pkt (best of 3 rounds) is below PIO's from the smallest size": a
// Ctrl-C before the first size's SDMA run (or before anything, f50fc28's no-row case) printed
// that with no SDMA row at all, and one in a later size's PIO run printed it over sizes where
// PIO had been faster ("PIO faster at: [2] bytes" on the next line). The comparison now stops at
// a size without both rows, and with none compared the table says so.
func TestInterruptedPathSweepClaimsNoUnmeasuredCrossover(t *testing.T) {
	for _, path := range []string{"pio", "auto"} {
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // Ctrl-C before the run: no row
		var stdout, stderr syncBuffer
		code := run(ctx, []string{"-path", path, "-sweep", "-size", "4", "-D", "60"}, &stdout, &stderr)
		require.Equal(t, exitInterrupted, code, "%s: %s", path, stderr.String())
		out := stdout.String()
		assert.Contains(t, out, "interrupted: the results so far", path)
		assert.NotContains(t, out, "is below PIO's", "%s: no SDMA row, no claim that SDMA is faster:\n%s", path, out)
		assert.Contains(t, out, " crossover: not measured (no size has both a PIO and an SDMA row)", path)
	}

	// Cut in the PIO run of the second size: 2 bytes measured by both, PIO faster; 4 bytes by
	// PIO only, partly.
	cfg := Config{Path: pathPIO, Mode: ModeBW, Sizes: []int{2, 4}}
	rs := []pathResult{
		{Path: pathPIO, Bytes: 2, NsPerPkt: 300},
		{Path: pathSDMA, Bytes: 2, NsPerPkt: 700},
		{Path: pathPIO, Bytes: 4, NsPerPkt: 310, Interrupted: true},
	}
	n, ok := crossover(cfg.Mode, rs)
	assert.True(t, ok, "2 bytes has both rows")
	assert.Equal(t, 2, n, "PIO below SDMA at 2 bytes, the last size with both rows")
	var w syncBuffer
	writePathTable(&w, cfg, pathReport{Results: rs, Crossover: n, Compared: ok, Interrupted: true})
	assert.Contains(t, w.String(), " crossover: PIO's ns/pkt (best of 3 rounds) is below SDMA's at every size up to 2 bytes")
	assert.Contains(t, w.String(), " PIO faster at: [2] bytes")

	// Uninterrupted: PIO faster up to 4, not at 8; SDMA faster from the smallest size.
	rs = []pathResult{
		{Path: pathPIO, Bytes: 4, NsPerPkt: 1}, {Path: pathSDMA, Bytes: 4, NsPerPkt: 2},
		{Path: pathPIO, Bytes: 8, NsPerPkt: 3}, {Path: pathSDMA, Bytes: 8, NsPerPkt: 2},
	}
	n, ok = crossover(ModeBW, rs)
	assert.Equal(t, 4, n)
	assert.True(t, ok)
	n, ok = crossover(ModeBW, rs[2:])
	assert.Zero(t, n)
	assert.True(t, ok, "compared at 8 bytes: SDMA from the smallest size")
	n, ok = crossover(ModeBW, nil)
	assert.Zero(t, n)
	assert.False(t, ok)
}
