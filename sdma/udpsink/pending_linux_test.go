//go:build linux

package udpsink

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReceiverPending: Pending says whether a datagram waits in the socket unread: not before
// anything was sent, yes once datagrams arrived, not once a Run read them all. The zero
// Receiver is ErrInvalid, a closed one ErrClosed.
func TestReceiverPending(t *testing.T) {
	r, c := listenIdleHour(t)
	p, err := r.Pending()
	require.NoError(t, err)
	assert.False(t, p, "nothing sent")
	for range 3 {
		_, err := c.Write([]byte("not a frame"))
		require.NoError(t, err)
	}
	// Loopback queues a datagram within its send, or soon after (a deferred softirq): a minute
	// bounds a datagram that never arrives.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		p, err = r.Pending()
		require.NoError(t, err)
		if p {
			break
		}
		require.False(t, time.Now().After(deadline), "no datagram pending a minute after three were sent")
	}
	// Bad frames begin no run: RunWithin returns after its wait, having read what came by then.
	for deadline := time.Now().Add(time.Minute); r.Received() < 3; {
		rep, err := r.RunWithin(context.Background(), 10*time.Millisecond)
		require.NoError(t, err)
		require.True(t, rep.IdleTimeout)
		require.False(t, time.Now().After(deadline), "%d of the 3 datagrams read in a minute", r.Received())
	}
	p, err = r.Pending()
	require.NoError(t, err)
	assert.False(t, p, "every datagram read")

	require.NoError(t, r.Close())
	_, err = r.Pending()
	assert.ErrorIs(t, err, ErrClosed)
	var zero Receiver
	_, err = zero.Pending()
	assert.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "not made by Listen")
}
