package usdma

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestDoneRunsBeforeTheEndIsSeen: Config.Done is the push notification of a request's end. It
// ran last, after the slot was released and the waiters woken: a Wait (or Close) returned, and
// the slot took a new request, before the ended request's Done had run, so a Done could arrive
// after Close returned, or after the next request on its slot was submitted and even after that
// one's own Done (found by TestRVSoakUsdmaLedger, which ties each Done to the request on its
// slot: one request read ended twice, the one before it never). Done now runs before the end is
// visible: from inside it a Wait on its slot (with a context already done, so it cannot block)
// still waits, and a Done that panics still ends the request.
func TestDoneRunsBeforeTheEndIsSeen(t *testing.T) {
	for _, panicky := range []bool{false, true} {
		dev := testDevice(t, sdma.Config{Sink: &sdmatest.DiscardSink{}})
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		var pq *PktQ
		seen := make(chan error, 1)
		pq = testQueue(t, Config{Device: dev, Done: func(slot int, e CompEntry) {
			seen <- pq.Wait(cancelled, slot) // not ended yet: Wait gives up on its context
			if panicky {
				panic("Done panics")
			}
		}})
		data := pattern(3*4096, 1)
		info, hdr := Message(0, 4096, testTemplate, data)
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil && p != "Done panics" {
					panic(p)
				}
			}()
			err = pq.Submit(context.Background(), info, &hdr, data) // a request that ends in Submit calls Done there
		}()
		require.NoError(t, err)
		ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, pq.Wait(ctx, 0), "the request ends (panicky Done %v)", panicky)
		stop()
		select {
		case err := <-seen:
			require.True(t, errors.Is(err, context.Canceled), "Wait from inside Done saw the request ended (%v): Done ran after the end was visible", err)
		default:
			t.Fatal("Wait returned before Done ran")
		}
		require.Equal(t, CompEntry{Status: Complete}, pq.Comp(0))
	}
}
