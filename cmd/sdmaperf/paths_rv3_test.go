package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPathHaltAtCountsTheMeasuredRun: -faults haltat=N is documented (-h) as a halt "at the Nth
// descriptor it reads in the measured run (after the warm-up)", and the SDMA path arms it after
// the warm-up (sizeRun.arm). -path pio|auto set pio.FaultPlan.HaltAt, which counts packets over
// the context's life, when the contexts were created: with -warmup 100 -faults haltat=50 the
// halt happened in the warm-up, the measured run had no flushed packet, and its row still showed
// pio_halts 1 (the warm-up's). armPaths now sets it after the warm-up, and the row's halts are
// the measured run's.
func TestPathHaltAtCountsTheMeasuredRun(t *testing.T) {
	rep := runPathJSON(t, "-path", "pio", "-faults", "haltat=50", "-warmup", "100", "-n", "1000", "-size", "64")
	require.Len(t, rep.Results, 1)
	r := rep.Results[0]
	assert.EqualValues(t, 1, r.Halts)
	assert.Positive(t, r.Flushed, "the halt at the measured run's 50th packet flushed what was in flight")
}
