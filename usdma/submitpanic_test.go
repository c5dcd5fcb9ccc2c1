package usdma

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// panickyAlloc is a Slab whose Get panics at the call numbered panicAt (1-based), once.
type panickyAlloc struct {
	*alloc.Slab[TxReq]
	gets, panicAt int
}

func (a *panickyAlloc) Get() (*TxReq, error) {
	if a.gets++; a.gets == a.panicAt {
		panic("panickyAlloc: Get")
	}
	return a.Slab.Get()
}

// TestSubmitPanicAfterClaimEndsTheRequest: a panic inside Submit after it claimed the slot (here
// the queue's allocator, at a request's first packet or after two packets were built) goes on to
// Submit's caller, and the request still ends: ERROR, told Done once, its built packets' txreqs
// back in the allocator, so that Close finishes. Before, only the send lock was released: the
// slot stayed QUEUED with the submitter's hold for ever and Close waited for it (here with a
// context that ends after census.Timeout: context.DeadlineExceeded).
func TestSubmitPanicAfterClaimEndsTheRequest(t *testing.T) {
	for _, panicAt := range []int{1, 3} {
		slab, err := alloc.NewSlab(alloc.SlabConfig[TxReq]{ObjectsPerSlab: 16})
		require.NoError(t, err)
		a := &panickyAlloc{Slab: slab, panicAt: panicAt}
		dev := testDevice(t, sdma.Config{Manual: true, Sink: &sdmatest.DiscardSink{}})
		var dones []CompEntry
		pq, err := New(Config{Device: dev, Engine: dev.Engine(0), Slots: 2, MTU: 4096, Alloc: a,
			Done: func(_ int, e CompEntry) { dones = append(dones, e) }})
		require.NoError(t, err)
		data := pattern(4*4096, 1)
		info, hdr := Message(0, 4096, testTemplate, data)
		require.EqualValues(t, 4, info.NPkts)
		require.PanicsWithValue(t, "panickyAlloc: Get", func() { _ = pq.Submit(context.Background(), info, &hdr, data) }, "panic at Get %d", panicAt)
		require.Equal(t, []CompEntry{{Status: Error, Errcode: EFAULT}}, dones, "panic at Get %d: the request ended once", panicAt)
		require.Equal(t, CompEntry{Status: Error, Errcode: EFAULT}, pq.Comp(0))
		require.ErrorContains(t, pq.Wait(context.Background(), 0), "panicked")
		require.Zero(t, slab.Stats().InUse, "panic at Get %d: every txreq back", panicAt)
		// The queue goes on: another request is sent and completes.
		info, hdr = Message(1, 4096, testTemplate, data)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, data))
		n, err := dev.Engine(0).Process()
		require.NoError(t, err)
		require.Equal(t, 4, n)
		require.Equal(t, CompEntry{Status: Complete}, pq.Comp(1))
		require.NoError(t, closeBounded(pq), "panic at Get %d", panicAt)
	}
}

// TestSubmitPanicWithPacketsInFlight: a panic inside Submit after a first batch of packets was
// handed to the engine (the allocator's Get for the second batch) ends the request only once
// those packets complete, ERROR (EFAULT) and told Done once: none is given back while in flight,
// every txreq is back after, and the AHG entry (when the request had one) is free for the next.
func TestSubmitPanicWithPacketsInFlight(t *testing.T) {
	for _, ahg := range []bool{false, true} {
		slab, err := alloc.NewSlab(alloc.SlabConfig[TxReq]{ObjectsPerSlab: 64})
		require.NoError(t, err)
		a := &panickyAlloc{Slab: slab, panicAt: MaxPktsPerQueue + 2}
		dev := testDevice(t, sdma.Config{Manual: true, Sink: &sdmatest.DiscardSink{}})
		eng := dev.Engine(0)
		var dones []CompEntry
		pq, err := New(Config{Device: dev, Engine: eng, Slots: 2, MTU: 4096, Alloc: a, DisableAHG: !ahg,
			Done: func(_ int, e CompEntry) { dones = append(dones, e) }})
		require.NoError(t, err)
		data := pattern(20*4096, 1)
		info, hdr := Message(0, 4096, testTemplate, data)
		require.PanicsWithValue(t, "panickyAlloc: Get", func() { _ = pq.Submit(context.Background(), info, &hdr, data) }, "AHG %v", ahg)
		require.Empty(t, dones, "AHG %v: not ended while its packets are in flight", ahg)
		if ahg {
			require.Zero(t, eng.AHGInUse(), "the AHG entry is freed as the sending ends, as at a normal end")
			require.EqualValues(t, MaxPktsPerQueue-1, pq.Stats().AHGPackets)
		}
		require.Equal(t, Queued, pq.Comp(0).Status)
		require.EqualValues(t, MaxPktsPerQueue, slab.Stats().InUse, "AHG %v: the packets in flight keep their txreqs, the one built after is back", ahg)
		n, err := eng.Process()
		require.NoError(t, err)
		require.Equal(t, MaxPktsPerQueue, n)
		require.Equal(t, []CompEntry{{Status: Error, Errcode: EFAULT}}, dones, "AHG %v", ahg)
		require.Zero(t, slab.Stats().InUse, "AHG %v", ahg)
		info, hdr = Message(1, 4096, testTemplate, data)
		require.NoError(t, pq.Submit(context.Background(), info, &hdr, data))
		for pq.Comp(1).Status == Queued {
			_, err = eng.Process()
			require.NoError(t, err)
		}
		require.Equal(t, CompEntry{Status: Complete}, pq.Comp(1), "AHG %v", ahg)
		require.NoError(t, closeBounded(pq), "AHG %v", ahg)
	}
}
