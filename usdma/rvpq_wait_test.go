package usdma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestWaitGivenUpLeavesNothing: a Wait whose context ends before its request does takes its
// wake-up back. It used to stay on the slot's waiter list until the request ended, so a poller
// that waits with a short timeout in a loop on a request that takes long (a stalled or undriven
// engine, a deferred queue) grew the list by one wake-up per try: here 1000 given-up Waits left
// 1000 wake-ups behind. The request's end still reaches the Wait that is waiting.
func TestWaitGivenUpLeavesNothing(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true})
	pq := testQueue(t, Config{Device: dev})
	data := pattern(3*4096, 1)
	info, hdr := Message(0, 4096, testTemplate, data)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, data)) // in the ring, undriven
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 1000 {
		require.ErrorIs(t, pq.Wait(ctx, 0), context.Canceled)
	}
	pq.compMu.Lock()
	n := len(pq.reqs[0].waiters)
	pq.compMu.Unlock()
	require.Zero(t, n, "wake-ups of given-up Waits left on the slot")
	errc := make(chan error, 1)
	go func() { errc <- pq.Wait(context.Background(), 0) }()
	drive(t, dev.Engine(0))
	require.NoError(t, <-errc)
}
