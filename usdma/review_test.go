package usdma

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestStoppedAfterAbortErrcodeEFAULT: a request DEFERRED on a full ring whose packets in the
// ring complete aborted (the engine halts) stops sending with its later packets unsent. The
// kernel's process_request then finds has_error in user_sdma_send_pkts (-EFAULT), goes to
// free_req with seqsubmitted < npkts, waits for the packets handed over and writes
// set_comp_state(ERROR, -EFAULT): errcode EFAULT, not the aborted packets' -status (their
// callbacks return early, seqcomp != npkts - 1).
func TestStoppedAfterAbortErrcodeEFAULT(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true, RingSize: 64})
	eng := dev.Engine(0)
	pq := testQueue(t, Config{Device: dev, Slots: 1})
	data := pattern(64*4096, 3)
	info, hdr := Message(0, 4096, testTemplate, data)
	errc := make(chan error, 1)
	go func() { errc <- pq.Submit(context.Background(), info, &hdr, data) }()
	deadline := time.Now().Add(10 * time.Second)
	for pq.State() != Deferred {
		require.True(t, time.Now().Before(deadline), "the queue never deferred")
		time.Sleep(50 * time.Microsecond)
	}
	require.NoError(t, sdmatest.SetFaults(eng, sdmatest.FaultPlan{HaltAt: 1}))
	stop, driven := make(chan struct{}), make(chan struct{})
	go func() { // the chip: halts at its next packet, then recovers
		defer close(driven)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n, _ := eng.Process(); n == 0 {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	var once sync.Once
	end := func() { once.Do(func() { close(stop); <-driven }) }
	t.Cleanup(end)
	err := <-errc
	require.ErrorIs(t, err, ErrFault, "sending stopped after an aborted packet: -EFAULT")
	var ce *CompError
	require.ErrorAs(t, waitSlot(t, pq, 0), &ce)
	end()
	assert.Equal(t, CompEntry{Status: Error, Errcode: EFAULT}, pq.Comp(0), "free_req's set_comp_state(ERROR, -EFAULT)")
}
