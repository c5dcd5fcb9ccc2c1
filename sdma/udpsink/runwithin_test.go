package udpsink

import (
	"context"
	"hash/crc32"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listenIdleHour is a Receiver whose idle timeout is an hour and a socket sending to it, both
// closed at the test's end.
func listenIdleHour(t *testing.T) (*Receiver, *net.UDPConn) {
	t.Helper()
	r, err := Listen(ReceiverConfig{Idle: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	c, err := net.DialUDP("udp", nil, r.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return r, c
}

// awaitReceived waits until r has read n datagrams or more. A minute without that fails the test
// with the count reached (a Run that stopped reading, a datagram lost), where the wait would
// otherwise hang until the test binary's timeout.
func awaitReceived(t *testing.T, r *Receiver, n uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for r.Received() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the receiver read %d datagrams in a minute, want %d", r.Received(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// stayWithin waits, on a sender's goroutine, until r has read all but window of the packets s
// sent, so that the sender stays within the receive buffer. A datagram the buffer dropped (one
// smaller than window datagrams: net.core.rmem_max without CAP_NET_ADMIN) would keep it waiting
// for ever: after a minute in which r read nothing it reports that (t.Errorf) and returns false.
func stayWithin(t *testing.T, s *Sink, r *Receiver, window uint64) bool {
	last, since := r.Received(), time.Now()
	for s.Stats().Packets > r.Received()+window {
		if got := r.Received(); got != last {
			last, since = got, time.Now()
		} else if time.Since(since) > time.Minute {
			t.Errorf("the receiver read nothing for a minute, at %d of the %d packets sent: lost in a full receive buffer?", got, s.Stats().Packets)
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
	return true
}

// runWithinReading is RunWithin with wait, doubled and called again while a call read nothing
// (Received unchanged, its wait over: the datagrams sent before it had not reached the socket).
// RunWithin reads what waits in the socket however late its first read comes (readWaiting), but
// a datagram the loopback's delivery held up past the wait (deferred to ksoftirqd on a loaded
// machine) is not there to read. Each call's wait and result go to try, which reports whether
// that call read nothing (then it is called again).
func runWithinReading(t *testing.T, r *Receiver, wait time.Duration, try func(wait time.Duration) bool) {
	t.Helper()
	for range 8 { // 8 calls: the last waits 128 times the first
		if !try(wait) {
			return
		}
		t.Logf("RunWithin(%v) read nothing: the datagram reached the socket after its wait; again with %v", wait, 2*wait)
		wait *= 2
	}
	t.Fatalf("RunWithin read nothing in 8 calls, the last of %v; received %d", wait/2, r.Received())
}

// TestReceiverRunWithinStaleBeginsNoRun: a receiver whose idle timeout is an hour, a run
// received to its end, then a repeat of its end marker (a sink's Close repeats them): RunWithin
// returns once its wait passed with no run begun, as at the idle timeout, counting the repeat as
// stale. Stale datagrams do not begin a run.
func TestReceiverRunWithinStaleBeginsNoRun(t *testing.T) {
	r, c := listenIdleHour(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a Run that hangs fails
	defer cancel()
	p := []byte("payload!")
	for _, d := range [][]byte{inRun(0xa, frame(0, 0, 0, p, crc32.Checksum(p, castagnoli))), inRun(0xa, endFrame(0, 1, 1))} {
		_, err := c.Write(d)
		require.NoError(t, err)
	}
	rep, err := r.Run(ctx)
	require.NoError(t, err)
	require.True(t, rep.Ended)
	_, err = c.Write(inRun(0xa, endFrame(0, 1, 1)))
	require.NoError(t, err)
	// The repeat is read within the wait, unless it reached the socket after it (then it is read
	// by the next call).
	runWithinReading(t, r, 100*time.Millisecond, func(wait time.Duration) bool {
		before := r.Received()
		rep, err = r.RunWithin(ctx, wait)
		require.NoError(t, err)
		return r.Received() == before && rep.IdleTimeout && rep.Stale == 0
	})
	rep.Elapsed = 0
	assert.Equal(t, Report{IdleTimeout: true, Stale: 1, StaleEnds: 1}, rep)
}

// TestReceiverRunWithinRunBegunIsReceived: a run whose first frame arrived within RunWithin's
// wait is received to its end marker, however long after the wait that comes (the receiver's
// idle timeout, an hour, alone applies once it began).
func TestReceiverRunWithinRunBegunIsReceived(t *testing.T) {
	r, c := listenIdleHour(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a Run that hangs fails
	defer cancel()
	p := []byte("payload!")
	_, err := c.Write(inRun(0xb, frame(0, 0, 0, p, crc32.Checksum(p, castagnoli))))
	require.NoError(t, err)
	type result struct {
		rep Report
		err error
	}
	var res result
	runWithinReading(t, r, 100*time.Millisecond, func(begin time.Duration) bool {
		start := time.Now()
		done := make(chan result, 1)
		go func() {
			rep, err := r.RunWithin(ctx, begin)
			done <- result{rep, err}
		}()
		// The first frame is read (the run began), or the call returned having read nothing (or
		// at ctx's end: a minute).
		for r.Received() == 0 {
			select {
			case res = <-done:
				if r.Received() == 0 && res.err == nil && res.rep.IdleTimeout {
					return true // read nothing: the frame was not in the socket within the wait
				}
				t.Fatalf("RunWithin returned %+v, %v before the run's end marker was sent", res.rep, res.err)
			default:
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(3*begin - time.Since(start)) // the wait for a run to begin is over
		_, err = c.Write(inRun(0xb, endFrame(0, 1, 1)))
		require.NoError(t, err)
		res = <-done
		return false
	})
	require.NoError(t, res.err)
	assert.True(t, res.rep.Ended, res.rep.String())
	assert.False(t, res.rep.IdleTimeout)
	assert.EqualValues(t, 1, res.rep.Packets)
	assert.EqualValues(t, 0xb, res.rep.Run)
}

// TestReceiverRunWithinRefusesBadInput: a wait not above zero and a nil ctx are ErrInvalid,
// and nothing is read: the datagram sent before is the next Run's.
func TestReceiverRunWithinRefusesBadInput(t *testing.T) {
	r, c := listenIdleHour(t)
	_, err := c.Write(inRun(0xc, endFrame(0, 0, 1)))
	require.NoError(t, err)
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := r.RunWithin(t.Context(), d)
		assert.ErrorIs(t, err, ErrInvalid, "%v", d)
	}
	var nilCtx context.Context
	_, err = r.RunWithin(nilCtx, time.Second)
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "Receiver.RunWithin")
	rep, err := r.RunWithin(t.Context(), time.Hour)
	require.NoError(t, err)
	assert.True(t, rep.Ended)
	assert.EqualValues(t, 0xc, rep.Run)
}
