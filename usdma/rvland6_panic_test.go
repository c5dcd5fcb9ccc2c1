package usdma

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// putOncePanicAlloc is an alloc.List whose first Put takes the txreq back and then panics.
type putOncePanicAlloc struct {
	*alloc.List[TxReq]
	mu       sync.Mutex
	panicked bool
}

func (a *putOncePanicAlloc) Put(p *TxReq) error {
	err := a.List.Put(p)
	a.mu.Lock()
	first := !a.panicked
	a.panicked = true
	a.mu.Unlock()
	if first {
		panic("putOncePanicAlloc: Put")
	}
	return err
}

// TestSubmitBuildPanicThenPutPanicFailsRequest: the Mapper panics while Submit builds a packet
// (nothing handed to the engine yet), and the allocator's Put panics as the clean-up gives that
// packet's txreq back. The request must still end failed (EFAULT: its packets were never sent)
// and its AHG entry go back: the clean-up did the Put of the building txreq before stop and
// endSend, so its panic skipped both, and the request, no packet unsent counted, completed as
// sent.
func TestSubmitBuildPanicThenPutPanicFailsRequest(t *testing.T) {
	for _, panicAt := range []int32{1, 3} {
		l, err := alloc.NewList[TxReq](16, nil)
		require.NoError(t, err)
		a := &putOncePanicAlloc{List: l}
		m := &panicMapper{Mapper: testIOMMU(t), panicAt: panicAt}
		dev := testDevice(t, sdma.Config{Manual: true, Mapper: m, Sink: &sdmatest.DiscardSink{}})
		eng := dev.Engine(0)
		pq, err := New(Config{Device: dev, Engine: eng, Slots: 2, MTU: 4096, Alloc: a})
		require.NoError(t, err)
		data := pattern(4*4096, 1)
		info, hdr := Message(0, 4096, testTemplate, data)
		require.Panics(t, func() { _ = pq.Submit(context.Background(), info, &hdr, data) })
		require.Zero(t, eng.AHGInUse(), "panicAt %d: the AHG entry is freed as the sending ends", panicAt)
		for pq.Comp(0).Status == Queued {
			_, err := eng.Process()
			require.NoError(t, err)
		}
		require.Equal(t, CompEntry{Status: Error, Errcode: EFAULT}, pq.Comp(0), "panicAt %d", panicAt)
		require.NoError(t, closeBounded(pq))
	}
}
