package udpsink

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// awaitQueued waits until a datagram waits in r's socket (SIOCINQ: the size of the first one),
// failing the test after a minute: loopback delivery may be deferred to another thread.
func awaitQueued(t *testing.T, r *Receiver) {
	t.Helper()
	rc, err := r.conn.SyscallConn()
	require.NoError(t, err)
	deadline := time.Now().Add(time.Minute)
	for {
		var size int
		var ierr error
		require.NoError(t, rc.Control(func(fd uintptr) { size, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }))
		require.NoError(t, ierr)
		if size > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the datagram sent did not reach the receiver's socket in a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReceiverRunWithinReadsWhatWaits: a datagram that waits in the socket when RunWithin's wait
// is already over at its first read (a wait of 1 ns here; a goroutine held up past a longer wait
// on a loaded machine) arrived within the wait, before the call: RunWithin reads it. Its read met
// a past deadline, which fails a read before it looks at the socket, and RunWithin returned as at
// the idle timeout, having read nothing. A stale datagram waiting is read and counted, and
// RunWithin then returns as at the idle timeout.
func TestReceiverRunWithinReadsWhatWaits(t *testing.T) {
	r, c := listenIdleHour(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a Run that hangs fails
	defer cancel()
	_, err := c.Write(inRun(0xd, endFrame(0, 0, 1))) // a whole run: engine 0 sent nothing
	require.NoError(t, err)
	awaitQueued(t, r)
	rep, err := r.RunWithin(ctx, time.Nanosecond)
	require.NoError(t, err)
	assert.True(t, rep.Ended, rep.String())
	assert.False(t, rep.IdleTimeout, rep.String())
	assert.EqualValues(t, 0xd, rep.Run)
	assert.EqualValues(t, 1, r.Received())

	_, err = c.Write(inRun(0xd, endFrame(0, 0, 1))) // its repeat: stale
	require.NoError(t, err)
	awaitQueued(t, r)
	rep, err = r.RunWithin(ctx, time.Nanosecond)
	require.NoError(t, err)
	rep.Elapsed = 0
	assert.Equal(t, Report{IdleTimeout: true, Stale: 1, StaleEnds: 1}, rep)
	assert.EqualValues(t, 2, r.Received())
}

// TestReceiverRunIdleReadsWhatWaits: a datagram that waits in the socket when the Run's idle
// deadline is already past at its read (an idle timeout of 1 ns here; a Run held up between two
// reads for most of its idle timeout on a loaded machine) is read, not reported as an idle
// timeout with the datagram left in the socket.
func TestReceiverRunIdleReadsWhatWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a Run that hangs fails
	defer cancel()
	r, err := Listen(ReceiverConfig{Idle: time.Nanosecond})
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	c, err := net.DialUDP("udp", nil, r.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = c.Write(inRun(0xe, endFrame(0, 0, 1)))
	require.NoError(t, err)
	awaitQueued(t, r)
	rep, err := r.Run(ctx)
	require.NoError(t, err)
	assert.True(t, rep.Ended, rep.String())
	assert.False(t, rep.IdleTimeout, rep.String())
	assert.EqualValues(t, 0xe, rep.Run)

	rep, err = r.Run(ctx) // nothing waits: the idle timeout
	require.NoError(t, err)
	assert.True(t, rep.IdleTimeout, rep.String())
	assert.EqualValues(t, 1, r.Received())
}
