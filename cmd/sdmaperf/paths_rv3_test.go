package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPathHaltAtCountsTheMeasuredRun: -faults haltat=N is documented (-h) as a halt "at the Nth
// descriptor it reads in the measured run (after the warm-up)", and the SDMA path arms it after
// the warm-up (sizeRun.arm). -path pio|auto copies HaltAt into verbs.Config.PIOFaults when the
// contexts are created (newPathDevice), and pio.FaultPlan.HaltAt counts packets over the
// context's life: with -warmup 100 -faults haltat=50 the halt happens in the warm-up, the
// measured run has no flushed packet, and its row still shows pio_halts 1 (the warm-up's).
// Suggested fix (paths.go, left to the pathhang helper who owns it): after warmPaths, set the
// contexts' fault plan with HaltAt = packets consumed so far + N (pio.SendContext.SetFaults), and
// report halts as differences over the measured run. Also there: halt=RATE becomes HaltEvery =
// 1/RATE truncated (halt=0.3 halts every 3rd packet, not 30%) and seed= and cause= are ignored
// without a word.
func TestPathHaltAtCountsTheMeasuredRun(t *testing.T) {
	t.Skip("bug: -path pio|auto arms -faults haltat=N before the warm-up; see the comment")
	rep := runPathJSON(t, "-path", "pio", "-faults", "haltat=50", "-warmup", "100", "-n", "1000", "-size", "64")
	require.Len(t, rep.Results, 1)
	r := rep.Results[0]
	assert.EqualValues(t, 1, r.Halts)
	assert.Positive(t, r.Flushed, "the halt at the measured run's 50th packet flushed what was in flight")
}
