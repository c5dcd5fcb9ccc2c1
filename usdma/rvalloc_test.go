package usdma

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/sdma"
)

// drive runs e's chip and completions on a goroutine until the test ends (the chip and its
// interrupts, for a Manual engine).
func drive(t *testing.T, e *sdma.Engine) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = e.Process()
			e.Poll()
			runtime.Gosched()
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
}

// checkWire checks that pkts are the packets of one eager message of data in fragments of frag
// bytes, sent with the template testTemplate: each exactly once and in order (PSN template + k,
// KDETH offset template + bytes before it, the payload those bytes).
func checkWire(t *testing.T, pkts [][]byte, data []byte, frag int) {
	t.Helper()
	require.Len(t, pkts, (len(data)+frag-1)/frag)
	off := 0
	for k, p := range pkts {
		n := min(frag, len(data)-off)
		psn := binary.BigEndian.Uint32(p[24:]) &^ (1 << 31)
		require.Equal(t, (testTemplate.PSN+uint32(k))&0xffffff, psn, "packet %d PSN", k)
		if k > 0 {
			require.Equal(t, testTemplate.Offset+uint32(off), binary.LittleEndian.Uint32(p[60:]), "packet %d offset", k)
		}
		require.Equal(t, data[off:off+n], p[HeaderSize:HeaderSize+n], "packet %d payload", k)
		off += n
	}
}

// TestBoundedAllocatorWaitsForTxReqs: Config.Alloc takes any of package alloc's allocators,
// among them a pre-allocated alloc.List (seed 000: "slabs? pre-allocated lists? dma pools?"). A
// request of more packets than the list holds is valid: its packets' txreqs come back as they
// complete, and Submit waits for them, as the kernel's kmem_cache_alloc(GFP_KERNEL) waits for
// memory rather than fail. It used to fail with ENOMEM at the first empty Get: here 40 packets
// over a list of 20, the engine completing packets all along, ended ERROR 12. Every packet
// reaches the wire exactly once, in order, and every txreq is back at the end.
func TestBoundedAllocatorWaitsForTxReqs(t *testing.T) {
	sink := &recSink{}
	dev := testDevice(t, sdma.Config{Manual: true, RingSize: 2048, Sink: sink})
	l, err := alloc.NewList[TxReq](20, nil)
	require.NoError(t, err)
	pq := testQueue(t, Config{Device: dev, Alloc: l})
	drive(t, dev.Engine(0))
	data := pattern(40*256, 1)
	info, hdr := Message(0, 256, testTemplate, data)
	require.NoError(t, pq.Submit(context.Background(), info, &hdr, data))
	require.NoError(t, waitSlot(t, pq, 0))
	pkts, _ := sink.packets()
	checkWire(t, pkts, data, 256)
	assert.Zero(t, l.Stats().InUse)
}

// TestBoundedAllocatorConcurrent: requests of many more packets than the allocator holds go
// back to back through a small ring, with the engine on its own goroutine: for an allocator that
// can wait (alloc.List, GetCtx) and one that cannot (a Slab capped by MaxSlabs, woken by the
// queue's completions). Every request ends COMPLETE exactly once, every packet reaches the wire
// exactly once and in order, and every txreq is back at the end.
func TestBoundedAllocatorConcurrent(t *testing.T) {
	list, err := alloc.NewList[TxReq](5, nil)
	require.NoError(t, err)
	slab, err := alloc.NewSlab(alloc.SlabConfig[TxReq]{ObjectsPerSlab: 3, MaxSlabs: 2})
	require.NoError(t, err)
	for name, a := range map[string]interface {
		alloc.Allocator[TxReq]
		Stats() alloc.Stats
	}{"list": list, "slab": slab} {
		t.Run(name, func(t *testing.T) {
			sink := &recSink{}
			dev := testDevice(t, sdma.Config{RingSize: 64, Sink: sink})
			pq := testQueue(t, Config{Device: dev, Alloc: a, Slots: 8})
			ends := newEndCounter(pq)
			const reqs, frag = 8, 128
			var msgs [][]byte
			for i := range reqs {
				data := pattern((30+i)*frag-i, byte(i))
				msgs = append(msgs, data)
				info, hdr := Message(i, frag, testTemplate, data)
				require.NoError(t, pq.Submit(context.Background(), info, &hdr, data))
			}
			for i := range reqs {
				require.NoError(t, waitSlot(t, pq, i))
			}
			assert.Equal(t, reqs, ends.total())
			pkts, _ := sink.packets()
			for _, data := range msgs {
				n := (len(data) + frag - 1) / frag
				require.GreaterOrEqual(t, len(pkts), n)
				checkWire(t, pkts[:n], data, frag)
				pkts = pkts[n:]
			}
			assert.Empty(t, pkts)
			assert.Zero(t, a.Stats().InUse)
		})
	}
}

// TestBoundedAllocatorFailsWithNothingInFlight: with the allocator empty and no packet of the
// queue in flight to give a txreq back, Submit fails at once with ErrNoMem and the slot ends
// ERROR ENOMEM; while it waits, ctx ending or Close stop it, and the packets sent end the slot.
func TestBoundedAllocatorFailsWithNothingInFlight(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		dev := testDevice(t, sdma.Config{Manual: true})
		l, err := alloc.NewList[TxReq](2, nil)
		require.NoError(t, err)
		held := [2]*TxReq{}
		for i := range held {
			held[i], err = l.Get()
			require.NoError(t, err)
		}
		pq := testQueue(t, Config{Device: dev, Alloc: l})
		data := pattern(3*256, 1)
		info, hdr := Message(0, 256, testTemplate, data)
		err = pq.Submit(context.Background(), info, &hdr, data)
		require.ErrorIs(t, err, ErrNoMem)
		require.Equal(t, CompEntry{Status: Error, Errcode: ENOMEM}, pq.Comp(0))
		for _, tx := range held {
			require.NoError(t, l.Put(tx))
		}
	})
	for _, how := range []string{"ctx", "close"} {
		t.Run(how, func(t *testing.T) {
			dev := testDevice(t, sdma.Config{Manual: true})
			l, err := alloc.NewList[TxReq](4, nil)
			require.NoError(t, err)
			pq := testQueue(t, Config{Device: dev, Alloc: l})
			data := pattern(10*256, 1)
			info, hdr := Message(0, 256, testTemplate, data)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- pq.Submit(ctx, info, &hdr, data) }()
			for pq.txWait.Load() == nil { // the 4 packets are in the ring, nobody completes them
				runtime.Gosched()
			}
			if how == "ctx" {
				cancel()
				err := <-done
				require.ErrorIs(t, err, ErrFault) // as a ctx ending in the wait for ring room
				require.ErrorContains(t, err, context.Canceled.Error())
			} else {
				closed := make(chan error, 1)
				go func() { closed <- pq.Close(context.Background()) }()
				require.ErrorIs(t, <-done, ErrClosed)
				drive(t, dev.Engine(0))
				require.NoError(t, <-closed)
			}
			drive(t, dev.Engine(0))
			var ce *CompError
			require.ErrorAs(t, waitSlot(t, pq, 0), &ce)
			assert.NotZero(t, ce.Errcode)
			assert.Zero(t, l.Stats().InUse)
		})
	}
}

// stealingAlloc is an allocator that cannot wait whose Put, once steal is set, keeps the
// objects from the list: another user of a shared allocator taking every txreq that comes back.
type stealingAlloc struct {
	l      *alloc.List[TxReq]
	steal  atomic.Bool
	mu     sync.Mutex
	stolen []*TxReq
}

func (a *stealingAlloc) Get() (*TxReq, error) { return a.l.Get() }
func (a *stealingAlloc) Traits() alloc.Traits { tr := a.l.Traits(); tr.CanWait = false; return tr }
func (a *stealingAlloc) Put(p *TxReq) error {
	if a.steal.Load() {
		a.mu.Lock()
		a.stolen = append(a.stolen, p)
		a.mu.Unlock()
		return nil
	}
	return a.l.Put(p)
}

// TestBoundedAllocatorFailsWhenDrained: a Submit waiting for a txreq while the queue's packets
// complete, whose txreqs all go to another user of the allocator, fails with ErrNoMem once the
// last one completed (woken by that completion, or by the drain if it looked before the count
// dropped), not at the first completion and not never.
func TestBoundedAllocatorFailsWhenDrained(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true})
	l, err := alloc.NewList[TxReq](4, nil)
	require.NoError(t, err)
	a := &stealingAlloc{l: l}
	pq := testQueue(t, Config{Device: dev, Alloc: a})
	data := pattern(10*256, 1)
	info, hdr := Message(0, 256, testTemplate, data)
	done := make(chan error, 1)
	go func() { done <- pq.Submit(context.Background(), info, &hdr, data) }()
	for pq.txWait.Load() == nil { // 4 packets in the ring, the allocator empty
		runtime.Gosched()
	}
	a.steal.Store(true)
	drive(t, dev.Engine(0))
	err = <-done
	require.ErrorIs(t, err, ErrNoMem)
	var ce *CompError
	require.ErrorAs(t, waitSlot(t, pq, 0), &ce)
	assert.EqualValues(t, ENOMEM, ce.Errcode)
	a.steal.Store(false)
	a.mu.Lock()
	stolen := a.stolen
	a.mu.Unlock()
	assert.Len(t, stolen, 4, "every packet sent completed, its txreq taken by the other user")
	for _, tx := range stolen {
		require.NoError(t, l.Put(tx))
	}
	assert.Zero(t, l.Stats().InUse)
}

// failingAlloc is an allocator that can wait whose Get fails with getErr once the list is
// empty, and whose GetCtx fails with ctxErr at once: one that cannot give a txreq for a reason of
// its own.
type failingAlloc struct {
	l              *alloc.List[TxReq]
	getErr, ctxErr error
}

func (a *failingAlloc) Get() (*TxReq, error) {
	tx, err := a.l.Get()
	if err != nil {
		return nil, a.getErr
	}
	return tx, nil
}
func (a *failingAlloc) Put(p *TxReq) error                     { return a.l.Put(p) }
func (a *failingAlloc) Traits() alloc.Traits                   { return a.l.Traits() }
func (a *failingAlloc) GetCtx(context.Context) (*TxReq, error) { return nil, a.ctxErr }

// TestNoTxReqHasCause: a Submit that fails with ErrNoMem for want of a txreq keeps the
// allocator's error as ReqError.Cause, as every other stop after the claim keeps its own, and so
// does the slot's CompError: alloc.ErrEmpty when the allocator is empty with nothing in flight
// to give one back, a failing allocator's own error from its Get (nothing in flight) or its
// GetCtx (packets in flight). The Cause was nil.
func TestNoTxReqHasCause(t *testing.T) {
	errOwn := errors.New("the allocator's own refusal")
	for _, tc := range []struct {
		name   string
		alloc  func(l *alloc.List[TxReq]) alloc.Allocator[TxReq]
		cause  error
		wait   bool // packets in flight when the txreqs run out: the waiting Get's refusal
		reason string
	}{
		{"empty", func(l *alloc.List[TxReq]) alloc.Allocator[TxReq] { return l }, alloc.ErrEmpty, false, "no packet of the queue is in flight"},
		{"get fails", func(l *alloc.List[TxReq]) alloc.Allocator[TxReq] { return &failingAlloc{l: l, getErr: errOwn} }, errOwn, false, errOwn.Error()},
		{"getctx fails", func(l *alloc.List[TxReq]) alloc.Allocator[TxReq] {
			return &failingAlloc{l: l, getErr: alloc.ErrEmpty, ctxErr: errOwn}
		}, errOwn, true, errOwn.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := testDevice(t, sdma.Config{Manual: true})
			l, err := alloc.NewList[TxReq](2, nil)
			require.NoError(t, err)
			held := []*TxReq{}
			if !tc.wait { // nothing for the request: every txreq held elsewhere
				for range 2 {
					tx, err := l.Get()
					require.NoError(t, err)
					held = append(held, tx)
				}
			}
			pq := testQueue(t, Config{Device: dev, Alloc: tc.alloc(l)})
			data := pattern(3*256, 1)
			info, hdr := Message(0, 256, testTemplate, data)
			err = pq.Submit(context.Background(), info, &hdr, data)
			require.ErrorIs(t, err, ErrNoMem)
			require.ErrorIs(t, err, tc.cause)
			require.ErrorContains(t, err, tc.reason)
			var re *ReqError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, 0, re.Slot)
			assert.ErrorIs(t, re.Cause, tc.cause)
			if tc.wait {
				drive(t, dev.Engine(0))
			}
			var ce *CompError
			require.ErrorAs(t, waitSlot(t, pq, 0), &ce)
			assert.EqualValues(t, ENOMEM, ce.Errcode)
			assert.ErrorIs(t, ce, tc.cause)
			for _, tx := range held {
				require.NoError(t, l.Put(tx))
			}
		})
	}
}
