package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerRestartedSweepCountsOldFramesStale: a -sweep client killed after its first two
// sizes and run again, with late frames of the killed sweep's second size arriving before the
// restarted sweep's first size and again before its second: each size's run ID names its sweep,
// so the late frames are Stale (a run already reported), not counted into the restarted sweep's
// rows, and they neither supersede a run nor break the sweep's order.
func TestServerRestartedSweepCountsOldFramesStale(t *testing.T) {
	var stdout syncBuffer
	addr, stderr, done := startServer(t, &stdout, "-idle", "30s", "-sweep", "-size", "8", "-json")
	sendSweepRun(t, addr, 0xa, 0, 7, 4)
	sendSweepRun(t, addr, 0xa, 1, 7, 4)
	late := func() { // a late frame of the killed sweep's 4-byte run (already reported)
		s := newRunSink(t, addr, sweepRunID(0xa, 1))
		deliver(t, s, 1, 4)
		require.NoError(t, s.Close())
	}
	late()
	sendSweepRun(t, addr, 0xb, 0, 5, 4)
	late()
	sendSweepRun(t, addr, 0xb, 1, 5, 4)
	sendSweepRun(t, addr, 0xb, 2, 5, 8)
	require.Equal(t, exitOK, <-done, stderr.String())
	var reps []SizeReport
	require.NoError(t, json.Unmarshal([]byte(stdout.String()), &reps))
	var got [][3]uint64
	var stale uint64
	for _, r := range reps {
		got = append(got, [3]uint64{uint64(r.Bytes), r.Report.Packets, r.Report.Lost})
		stale += r.Report.Stale - r.Report.StaleEnds
		assert.False(t, r.Report.Superseded, "%d bytes", r.Bytes)
	}
	assert.Equal(t, [][3]uint64{{2, 5, 0}, {4, 5, 0}, {8, 5, 0}}, got, "the restarted sweep's rows only, none counting a late frame")
	assert.Equal(t, uint64(2), stale, "the two late frames, stale")
	assert.NotContains(t, stderr.String(), "superseded")
}

// TestServerSweepSizeEndsLost: a -sweep client (not restarted) whose one size's end markers
// were all lost (a lossy link; Close repeats them, so rare) and whose next size then arrives:
// the server reports the size Superseded, warns "the client restarted, or a second client
// sends to this port", starts the sweep again at the first size, and then fails because the
// next run is size #2 of the same sweep ("where a sweep's first size was due"). With the sweep
// ID and index in the run ID it could tell: a run of the same sweep at the next index after a
// superseded one is the next size, the superseded run that size's row without its end (its
// packets counted, lost from the sequence). Suggested fix: on a Superseded report, defer the
// restart until the next Run's ID is known (serveSweep keeps the superseded rep; if the new
// run is sweep/idx i+1 of the same sweep, keep the row as not ended and go on; if it is idx 0,
// restart as now). A design call (what row an unended size prints), not made here.
func TestServerSweepSizeEndsLost(t *testing.T) {
	t.Skip("bug: a sweep size whose end markers were lost is taken for a restarted client, then the sweep fails on its next size (see the doc comment for the fix)")
	var stdout syncBuffer
	addr, stderr, done := startServer(t, &stdout, "-idle", "30s", "-sweep", "-size", "8")
	s := newRunSink(t, addr, sweepRunID(0xa, 0))
	deliver(t, s, 5, 4) // its end markers never arrive (no Close)
	sendSweepRun(t, addr, 0xa, 1, 5, 4)
	sendSweepRun(t, addr, 0xa, 2, 5, 8)
	require.Equal(t, exitOK, <-done, stderr.String())
	assert.NotContains(t, stderr.String(), "the client restarted")
}
