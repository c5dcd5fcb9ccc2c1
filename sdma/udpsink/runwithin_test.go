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

// TestReceiverRunWithinStaleBeginsNoRun: a receiver whose idle timeout is an hour, a run
// received to its end, then a repeat of its end marker (a sink's Close repeats them): RunWithin
// returns once its wait passed with no run begun, as at the idle timeout, counting the repeat as
// stale. Stale datagrams do not begin a run.
func TestReceiverRunWithinStaleBeginsNoRun(t *testing.T) {
	r, c := listenIdleHour(t)
	p := []byte("payload!")
	for _, d := range [][]byte{inRun(0xa, frame(0, 0, 0, p, crc32.Checksum(p, castagnoli))), inRun(0xa, endFrame(0, 1, 1))} {
		_, err := c.Write(d)
		require.NoError(t, err)
	}
	rep, err := r.Run(t.Context())
	require.NoError(t, err)
	require.True(t, rep.Ended)
	_, err = c.Write(inRun(0xa, endFrame(0, 1, 1)))
	require.NoError(t, err)
	rep, err = r.RunWithin(t.Context(), 100*time.Millisecond)
	require.NoError(t, err)
	rep.Elapsed = 0
	assert.Equal(t, Report{IdleTimeout: true, Stale: 1, StaleEnds: 1}, rep)
}

// TestReceiverRunWithinRunBegunIsReceived: a run whose first frame arrived within RunWithin's
// wait is received to its end marker, however long after the wait that comes (the receiver's
// idle timeout, an hour, alone applies once it began).
func TestReceiverRunWithinRunBegunIsReceived(t *testing.T) {
	const begin = 100 * time.Millisecond
	r, c := listenIdleHour(t)
	p := []byte("payload!")
	_, err := c.Write(inRun(0xb, frame(0, 0, 0, p, crc32.Checksum(p, castagnoli))))
	require.NoError(t, err)
	start := time.Now()
	type result struct {
		rep Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := r.RunWithin(t.Context(), begin)
		done <- result{rep, err}
	}()
	require.Eventually(t, func() bool { return r.Received() == 1 }, 30*time.Second, time.Millisecond)
	time.Sleep(3*begin - time.Since(start)) // the wait for a run to begin is over
	_, err = c.Write(inRun(0xb, endFrame(0, 1, 1)))
	require.NoError(t, err)
	res := <-done
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
