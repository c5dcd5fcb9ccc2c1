//go:build linux

package udpsink

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/ipv4"
)

// slowReads is a batchReader that takes a millisecond after each read: a Run slower than its
// sender, as one on a loaded machine is, so that a sender without pause keeps its socket full.
type slowReads struct{ batchReader }

func (s slowReads) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	n, err := s.batchReader.ReadBatch(ms, flags)
	time.Sleep(time.Millisecond)
	return n, err
}

// TestReceiverRunWithinFloodKeepsItsWait: stale datagrams (the repeats of a run reported) and
// bad frames, sent without pause by a sender faster than the RunWithin reading them, begin no
// run: RunWithin returns as at the idle timeout soon after its wait, though they still come. It
// read what waited in the socket at its wait's end for as long as the socket was not empty
// (readWaiting), which a sender faster than it never let happen: it read the flood until the
// flood stopped, past its wait without bound. The flood stops after a minute (the test fails:
// RunWithin read past its wait until then) or when RunWithin returns.
func TestReceiverRunWithinFloodKeepsItsWait(t *testing.T) {
	r, c := listenIdleHour(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // a Run that hangs fails
	defer cancel()
	_, err := c.Write(inRun(0xf, endFrame(0, 0, 1))) // a whole run, reported: its repeats are stale
	require.NoError(t, err)
	rep, err := r.Run(ctx)
	require.NoError(t, err)
	require.True(t, rep.Ended, rep.String())

	r.rd = slowReads{r.rd}
	var returned, floodOver atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the flood, until RunWithin returns or a minute passed
		defer wg.Done()
		stale, bad := inRun(0xf, endFrame(0, 0, 1)), []byte{1}
		for end := time.Now().Add(time.Minute); !returned.Load(); {
			if time.Now().After(end) {
				floodOver.Store(true)
				return
			}
			_, _ = c.Write(stale) // a full receive buffer drops it: no error on loopback
			_, _ = c.Write(bad)
		}
	}()
	const wait = 20 * time.Millisecond
	start := time.Now()
	rep, err = r.RunWithin(ctx, wait)
	took := time.Since(start)
	returned.Store(true)
	wg.Wait()
	require.NoError(t, err)
	assert.False(t, floodOver.Load(), "RunWithin(%v) returned after %v, once the flood had stopped after a minute: it read the flood past its wait", wait, took)
	assert.True(t, rep.IdleTimeout, rep.String())
	assert.Zero(t, rep.Run, "no run began: %s", rep.String())
	assert.Positive(t, rep.Stale+rep.BadFrames, "it read none of the flood: %s", rep.String())
	t.Logf("RunWithin(%v) took %v: %d stale, %d bad frames", wait, took, rep.Stale, rep.BadFrames)
}
