//go:build linux

package udpsink

import (
	"context"
	"hash/crc32"
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
	t.Cleanup(func() { returned.Store(true); wg.Wait() }) // ends the flood on a failure too
	// The flood has begun: RunWithin reads some of it, however late it runs.
	awaitQueued(t, r)
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

// duringWaiting is a batchReader that runs during after each read that does not wait
// (readWaiting's), before that read returns what it read.
type duringWaiting struct {
	batchReader
	during func()
}

func (d duringWaiting) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	n, err := d.batchReader.ReadBatch(ms, flags)
	if flags != 0 {
		d.during()
	}
	return n, err
}

// TestReceiverEndDuringReadWaiting: a ctx cancelled, or a Close, while readWaiting reads (after
// it cleared the deadline, so that ctx's wake, a past deadline, is overwritten by the idle
// deadline the loop sets next) ends the Run with ctx's error or ErrClosed, at once, with the
// datagram it read tallied: the wake is not lost for the idle timeout (an hour here).
func TestReceiverEndDuringReadWaiting(t *testing.T) {
	for _, tc := range []struct {
		name string
		want error
	}{{"cancel", context.Canceled}, {"close", ErrClosed}} {
		t.Run(tc.name, func(t *testing.T) {
			r, c := listenIdleHour(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			woke := make(chan struct{})
			testHooks.wake = func() { close(woke) }
			t.Cleanup(func() { testHooks.wake = nil })
			r.rd = duringWaiting{r.rd, func() {
				if tc.want == ErrClosed {
					r.Close()
					return
				}
				cancel()
				<-woke                            // the wake began; its deadline follows it
				time.Sleep(20 * time.Millisecond) // let it set the deadline (else it comes later: ends the read all the same)
			}}
			p := []byte{1, 2, 3, 4}
			_, err := c.Write(inRun(0x10, frame(0, 0, 0, p, crc32.Checksum(p, castagnoli)))) // a run begun, not ended
			require.NoError(t, err)
			awaitQueued(t, r)
			type result struct {
				rep Report
				err error
			}
			done := make(chan result, 1)
			go func() {
				rep, err := r.RunWithin(ctx, time.Nanosecond) // its first read fails on its deadline: readWaiting
				done <- result{rep, err}
			}()
			select {
			case res := <-done:
				require.ErrorIs(t, res.err, tc.want)
				assert.EqualValues(t, 0x10, res.rep.Run, res.rep.String())
				assert.EqualValues(t, 1, res.rep.Packets, res.rep.String())
				assert.False(t, res.rep.IdleTimeout, res.rep.String())
			case <-time.After(time.Minute):
				r.Close() // ends the Run: the goroutine does not leak
				<-done
				t.Fatalf("RunWithin did not return in a minute after a %s during readWaiting's read: the wake was lost", tc.name)
			}
		})
	}
}
