package usdma

import (
	"context"
	"maps"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/internal/leakcheck"
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

// putPanicAlloc is an alloc.List whose Get call numbered emptyAt (1-based) reports it empty, and
// whose Put records every txreq given back and panics, once, after taking the txreq that the Get
// after that one handed out (the txreq waitTx gets and the packets may not need: the spare).
type putPanicAlloc struct {
	l        *alloc.List[TxReq]
	mu       sync.Mutex
	gets     int
	emptyAt  int
	spare    *TxReq
	panicked bool
	puts     map[*TxReq]int
}

func (a *putPanicAlloc) Get() (*TxReq, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gets++
	if a.gets == a.emptyAt {
		return nil, alloc.ErrEmpty
	}
	tx, err := a.l.Get()
	if a.gets == a.emptyAt+1 {
		a.spare = tx
	}
	return tx, err
}

func (a *putPanicAlloc) putsOf(tx *TxReq) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.puts[tx]
}

func (a *putPanicAlloc) Traits() alloc.Traits { tr := a.l.Traits(); tr.CanWait = false; return tr }

func (a *putPanicAlloc) Put(p *TxReq) error {
	a.mu.Lock()
	a.puts[p]++
	n := a.puts[p]
	again := n > 1
	if !again {
		_ = a.l.Put(p)
	}
	panicNow := p == a.spare && !a.panicked
	a.panicked = a.panicked || panicNow
	a.mu.Unlock()
	if panicNow {
		panic("putPanicAlloc: Put")
	}
	return nil
}

// TestSpareTxPutPanicGivesItBackOnce: the txreq a Submit got while it waited for one (the
// allocator had reported empty), which no packet needed in the end as the allocator had more
// again, goes back to the allocator exactly once as the sending ends, also when the allocator's
// Put panics after taking it: the panic goes on to Submit's caller, and the clean-up of the
// panicking Submit does not give it back a second time. Before, endSend cleared its reference
// only after Put returned, and the clean-up's endSend put it again (two Puts of one txreq).
func TestSpareTxPutPanicGivesItBackOnce(t *testing.T) {
	l, err := alloc.NewList[TxReq](16, nil)
	require.NoError(t, err)
	a := &putPanicAlloc{l: l, emptyAt: 2, puts: map[*TxReq]int{}}
	dev := testDevice(t, sdma.Config{Manual: true, Sink: &sdmatest.DiscardSink{}})
	eng := dev.Engine(0)
	pq, err := New(Config{Device: dev, Engine: eng, Slots: 2, MTU: 4096, Alloc: a})
	require.NoError(t, err)
	data := pattern(4*4096, 1)
	info, hdr := Message(0, 4096, testTemplate, data)
	require.PanicsWithValue(t, "putPanicAlloc: Put", func() { _ = pq.Submit(context.Background(), info, &hdr, data) })
	require.NotNil(t, a.spare)
	require.Equal(t, 1, a.putsOf(a.spare), "the spare txreq was given back once")
	require.Zero(t, eng.AHGInUse(), "the AHG entry is freed as the sending ends")
	for pq.Comp(0).Status == Queued {
		_, err := eng.Process()
		require.NoError(t, err)
	}
	require.Equal(t, CompEntry{Status: Complete}, pq.Comp(0), "every packet was handed over")
	a.mu.Lock()
	puts := maps.Clone(a.puts)
	a.mu.Unlock()
	for tx, n := range puts {
		require.Equal(t, 1, n, "txreq %p given back %d times", tx, n)
	}
	require.Len(t, puts, 5, "4 packets' txreqs and the spare")
	require.Zero(t, l.Stats().InUse)
	require.NoError(t, closeBounded(pq))
}

// getCtxPanicAlloc is an alloc.List (it can wait) whose GetCtx panics.
type getCtxPanicAlloc struct{ *alloc.List[TxReq] }

func (a getCtxPanicAlloc) GetCtx(context.Context) (*TxReq, error) {
	panic("getCtxPanicAlloc: GetCtx")
}

// TestWaitTxPanicStopsItsWatcher: a panic in a Submit's wait for a txreq (the allocator's GetCtx,
// with packets of the queue in flight) ends the goroutine that wait started to watch for the
// queue's packets to drain as the panic leaves Submit, not once those packets complete: no
// goroutine is left after the panic is recovered, while they are still in flight. Before, the
// round's context was cancelled only on a return, and the watcher waited for the drain.
func TestWaitTxPanicStopsItsWatcher(t *testing.T) {
	before := goleak.IgnoreCurrent()
	l, err := alloc.NewList[TxReq](2, nil)
	require.NoError(t, err)
	dev := testDevice(t, sdma.Config{Manual: true, Sink: &sdmatest.DiscardSink{}})
	eng := dev.Engine(0)
	pq, err := New(Config{Device: dev, Engine: eng, Slots: 2, MTU: 4096, Alloc: getCtxPanicAlloc{l}})
	require.NoError(t, err)
	data := pattern(4*256, 1)
	info, hdr := Message(0, 256, testTemplate, data)
	require.PanicsWithValue(t, "getCtxPanicAlloc: GetCtx", func() { _ = pq.Submit(context.Background(), info, &hdr, data) })
	require.Equal(t, 2, pq.busy.Busy(), "two packets in flight")
	leakcheck.VerifyNone(t, before)
	require.Nil(t, pq.txWait.Load())
	for pq.Comp(0).Status == Queued {
		_, err := eng.Process()
		require.NoError(t, err)
	}
	require.Equal(t, CompEntry{Status: Error, Errcode: EFAULT}, pq.Comp(0))
	require.Zero(t, l.Stats().InUse)
	require.NoError(t, closeBounded(pq))
}
