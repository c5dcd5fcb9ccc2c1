//go:build linux

package udpsink

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQueuedBytesIsTheNextDatagramsLength: queuedBytes is SIOCINQ's answer for a UDP socket, the
// length of the next datagram queued (udp_ioctl: first_packet_length), not the bytes of all of
// them. The kernel writes a C int (put_user of an int): read into a Go int, as
// unix.IoctlGetInt does, 8 bytes on a 64-bit system, a big-endian one (s390x, ppc64, mips64)
// saw it in the upper half, 11 << 32 for 11 bytes; Pending, which asks only whether it is above
// 0, was right all the same. Run under qemu-s390x to see it.
func TestQueuedBytesIsTheNextDatagramsLength(t *testing.T) {
	r, c := listenIdleHour(t)
	n, err := queuedBytes(r.conn)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing sent")
	_, err = c.Write([]byte("not a frame")) // 11 bytes
	require.NoError(t, err)
	_, err = c.Write([]byte("abc"))
	require.NoError(t, err)
	// Loopback queues a datagram within its send, or soon after (a deferred softirq): a minute
	// bounds a datagram that never arrives.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		n, err = queuedBytes(r.conn)
		require.NoError(t, err)
		if n != 0 {
			break
		}
		require.False(t, time.Now().After(deadline), "no datagram queued a minute after two were sent")
	}
	assert.Equal(t, 11, n, "the first datagram's length, not both's (%#x)", n)
}
