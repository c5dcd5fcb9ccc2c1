//go:build linux

package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

// TestClientSinkCloseWaitsForTheReceiver: an in-process receiver starved while the sink sent
// (its socket buffer full) and still when the run ends, as on a loaded machine across a Ctrl-C,
// gets the end markers once it has read what waits in its buffer: clientSink.close waits for
// that before the sink's Close. The markers were sent at once, into the full buffer, which
// dropped every repeat of them; the receiver then read the buffer, saw no end marker, and after
// close's 5 s wait reported Ended false with the packets dropped after the last it read not
// counted lost (TestUDPInterruptKeepsTheReceiver failed so with a 1 s sleep in the receiver's
// Run after its first 1000 datagrams, the Ctrl-C coming during it). Here the receiver's Run
// starts 300 ms after close began (the markers go within 85 ms), with a 64 KiB buffer that
// holds a few dozen of the 3000 packets sent: it must report its end markers, every packet sent
// received or counted lost, and some lost.
func TestClientSinkCloseWaitsForTheReceiver(t *testing.T) {
	defer func(d time.Duration) { recvStall = d }(recvStall)
	recvStall = time.Minute // a bound on the receiver's progress, not on its speed here
	r, err := udpsink.Listen(udpsink.ReceiverConfig{Idle: waitForever, ReadBuffer: 64 << 10})
	require.NoError(t, err)
	s, err := udpsink.New(udpsink.Config{Addr: r.Addr().String(), Batch: 1})
	if err != nil {
		r.Close()
		require.NoError(t, err)
	}
	cs := &clientSink{sink: s, udp: s, recv: r, recvDone: make(chan struct{})}
	start := make(chan struct{})
	var started sync.Once
	go func() { // openSink's receiver goroutine, starved until start
		defer close(cs.recvDone)
		<-start
		cs.recvRep, cs.recvErr = r.Run(context.Background())
		r.Close()
	}()
	t.Cleanup(func() { // also when the test stops early: no goroutine left behind
		started.Do(func() { close(start) })
		r.Close()
		<-cs.recvDone
		s.Close()
	})
	// 2000 packets of 1 KiB, then 1000 of 4 bytes, whose datagrams are the size of an end
	// marker's: the buffer ends with less room than a marker takes (a kernel that drops only a
	// datagram that does not fit kept the markers in the room the big ones left).
	const sent = 3000
	big, small := make([]byte, 1024), make([]byte, 4)
	for i := range sent {
		p := big
		if i >= 2000 {
			p = small
		}
		require.NoError(t, s.Deliver(0, [][]byte{p}))
	}
	time.AfterFunc(300*time.Millisecond, func() { started.Do(func() { close(start) }) })
	var rep Report
	require.NoError(t, cs.close(&rep))
	rr := rep.Receiver
	require.NotNil(t, rr)
	assert.True(t, rr.Ended, "the end markers arrived: %s", rr)
	assert.EqualValues(t, sent, rr.Packets+rr.Lost, "every packet sent is received or counted lost: %s", rr)
	assert.NotZero(t, rr.Lost, "the buffer overflowed (the case under test): %s", rr)
}
