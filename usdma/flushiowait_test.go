package usdma

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestTimeoutFlushesIOWait: when the deferred wait runs out (wait_event_interruptible_timeout
// returns <= 0), hfi1_user_sdma_process_request calls flush_pq_iowait, which takes pq->busy off
// the engine's dmawait list; the retry that follows, finding no room, queues it anew
// (iowait_queue: starved_cnt + 1 with no packet sent, at the list's head). Submit does the same
// (IOWait.Unqueue). It used to leave the queue where it was: after k timeouts the kernel's starved
// count is 1 + k, Submit's was 1, and a queue parked on one engine stayed there while the next
// request deferred on another.
func TestTimeoutFlushesIOWait(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, Completion: sdma.CompletePoll, RingSize: 64})
	e := dev.Engine(0)
	pq := testQueue(t, Config{Device: dev, Timeout: 2 * time.Millisecond})
	data := pattern(64*4096, 2)
	info, hdr := Message(0, 4096, testTemplate, data)
	errc := make(chan error, 1)
	go func() { errc <- pq.Submit(context.Background(), info, &hdr, data) }()
	// The first queueing follows a ring's worth of packets sent (starved 0); each timeout's retry
	// queues the queue anew with nothing sent (starved + 1). Left parked, it stayed at 0. The
	// count is polled: a timeout is counted before its retry queues again.
	deadline := time.Now().Add(5 * time.Second)
	for pq.busy.Starved() < 3 {
		require.True(t, time.Now().Before(deadline), "not queued anew after its timeouts: starved %d after %d timeouts", pq.busy.Starved(), pq.Stats().Timeouts)
		time.Sleep(100 * time.Microsecond)
	}
	assert.GreaterOrEqual(t, pq.Stats().Timeouts, uint64(3), "each queueing anew follows a timeout")
	drive(t, e)
	require.NoError(t, <-errc)
	require.NoError(t, waitSlot(t, pq, 0))
}
