package udpsink

import (
	"errors"
	"fmt"
	"net"
)

// Pending reports whether a datagram waits in the receiver's socket, not yet read by a Run.
// Once a sender has stopped, a Run has taken every datagram that reached the socket when nothing
// is pending (those a full receive buffer dropped never will): a sender in the same process may
// wait for that before its Sink's Close, so that the end-of-run markers, datagrams too, find
// room in the buffer (a receiver starved while the sender ran has it full, and drops every
// repeat of them; the Run then sees no end marker, and the packets dropped after the last it read
// are not counted lost). Safe for concurrent use, a Run's included.
//
// It asks the kernel (SIOCINQ, the length of the next datagram queued: a datagram of no bytes,
// which no Sink sends, is not seen) and needs Linux, as the Sink does: elsewhere it returns
// ErrLinuxOnly. The zero Receiver is ErrInvalid, a closed one ErrClosed.
func (r *Receiver) Pending() (bool, error) {
	if r.conn == nil {
		return false, errZeroReceiver("Pending")
	}
	n, err := queuedBytes(r.conn)
	switch {
	case errors.Is(err, net.ErrClosed):
		return false, ErrClosed
	case err != nil:
		return false, fmt.Errorf("udpsink: Receiver.Pending: %w", err)
	}
	return n > 0, nil
}
