package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerServesClientRestartedBetweenSizes: a -sweep client killed after one size's run ended
// (its end markers sent) and before the next began, then run again, is a restarted client as
// -server's help names it ("the new run is served (a sweep starts again at its first size)"). It
// is not served: no run is superseded (a sweep's every size is a new run ID), so the restarted
// client's first size (2 bytes) is taken for the next size's row (4 bytes: both pad to 4), and its
// second (4) for the 8-byte row, where the server fails with "give -server the client's -sweep,
// -size and -frags", a cure that does not apply.
func TestServerServesClientRestartedBetweenSizes(t *testing.T) {
	t.Skip("bug: a -sweep client restarted between two sizes' runs is taken for the next size; " +
		"the server cannot tell (random run IDs per size). Fix: the client names its sweep (one " +
		"sweep ID and the size's index in the run ID, or a first-run flag in the header), and " +
		"serveSweep starts again at the first size on a new sweep ID")
	var stdout syncBuffer
	addr, stderr, done := startServer(t, &stdout, "-idle", "2s", "-sweep", "-size", "8")
	sendRun(t, addr, 7, 4) // the first client's 2-byte run ended, then it was killed
	sendRun(t, addr, 5, 4) // the restarted client: 2, 4 and 8 bytes
	sendRun(t, addr, 5, 4)
	sendRun(t, addr, 5, 8)
	require.Equal(t, exitOK, <-done, stderr.String())
	assert.Regexp(t, `(?s)\n 2 +5 +20 .*\n 4 +5 +20 .*\n 8 +5 +40 `, stdout.String())
}
