package sdma

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// orderRec records every completion in order (rv2 review of the SendList epoch pin).
type orderRec struct {
	mu    sync.Mutex
	order []*TxReq
	st    map[*TxReq]Status
	dup   int
}

func (o *orderRec) Complete(tx *TxReq, st Status) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.st == nil {
		o.st = make(map[*TxReq]Status)
	}
	if _, ok := o.st[tx]; ok {
		o.dup++
	}
	o.st[tx] = st
	o.order = append(o.order, tx)
}

// rv2Fill sends n one-descriptor txreqs with Send (a Manual engine: they stay in the ring).
func rv2Fill(t *testing.T, dev *Device, e *Engine, n int, c Completer) []TxReq {
	txs := make([]TxReq, n)
	for i := range txs {
		engTestBuild(t, dev, &txs[i], 0, []byte{0xee, 0, 0, 0, 0, 0, 0, 0}, c)
		require.NoError(t, e.Send(nil, &txs[i], false))
	}
	return txs
}

// rv2List builds n one-descriptor txreqs on a list, byte 0 the index (tag in byte 1).
func rv2List(t *testing.T, dev *Device, n int, tag byte, c Completer) ([]TxReq, *TxList) {
	txs := make([]TxReq, n)
	l := &TxList{}
	for i := range txs {
		engTestBuild(t, dev, &txs[i], 0, []byte{byte(i), tag, 0, 0, 0, 0, 0, 0}, c)
		l.PushBack(&txs[i])
	}
	return txs, l
}

// TestSendListSleeperRetryAcrossStopRestart: a SendList whose first batch is in the ring runs out
// of room; its sleeper (a DeferOrRetry-like one) sees the engine stopped and restarted and says
// ErrAgain. The list is pinned: the rest is flushed (ErrNotRunning, all 40 taken), every txreq
// completes aborted exactly once, in list order, nothing reaches the wire, and w's busy count
// returns to 0.
func TestSendListSleeperRetryAcrossStopRestart(t *testing.T) {
	dev, sink := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var fillC completions
	rv2Fill(t, dev, e, 50, &fillC) // 13 slots left
	var c orderRec
	txs, l := rv2List(t, dev, 40, 1, &c)
	sleeps := 0
	var w IOWait
	w.Init(func(e *Engine, w *IOWait, tx *TxReq, seq uint32, pktsSent bool) error {
		sleeps++
		require.True(t, pktsSent, "the first batch went in")
		require.Same(t, &txs[13], tx)
		if sleeps == 1 {
			require.NoError(t, e.Stop())
			require.NoError(t, e.Start())
		}
		return ErrAgain
	}, nil, nil)
	n, err := e.SendList(&w, l)
	require.ErrorIs(t, err, ErrNotRunning)
	require.Equal(t, 40, n)
	require.Zero(t, l.Len())
	require.Equal(t, 1, sleeps)
	for range 4 {
		_, _ = e.Process()
		e.Poll()
	}
	c.mu.Lock()
	require.Zero(t, c.dup)
	require.Len(t, c.order, 40)
	for i := range txs {
		require.Same(t, &txs[i], c.order[i], "completion %d out of order", i)
		require.Equal(t, StatusAborted, c.st[&txs[i]], "txreq %d", i)
	}
	c.mu.Unlock()
	require.Zero(t, w.Busy())
	sink.mu.Lock()
	require.Empty(t, sink.pkts[0])
	sink.mu.Unlock()
	require.EqualValues(t, 50, fillC.n.Load())
}

// TestSendListBusyAcrossStopRestartThenResend: a SendList with no sleeper (w nil) stops at ErrBusy
// with its first batch in the ring; the engine is stopped and restarted (the batch aborted); the
// caller sends the rest with a second SendList, which is a new list in the new epoch: it goes
// into the ring whole and completes OK, in order, as in the kernel (two sdma_send_txlist calls).
func TestSendListBusyAcrossStopRestartThenResend(t *testing.T) {
	dev, sink := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var fillC completions
	rv2Fill(t, dev, e, 50, &fillC)
	var c orderRec
	txs, l := rv2List(t, dev, 40, 2, &c)
	n, err := e.SendList(nil, l)
	require.ErrorIs(t, err, ErrBusy)
	require.Equal(t, 13, n)
	require.Equal(t, 27, l.Len())
	require.Same(t, &txs[13], l.Front())
	require.NoError(t, e.Stop())
	require.NoError(t, e.Start())
	n, err = e.SendList(nil, l)
	require.NoError(t, err)
	require.Equal(t, 27, n)
	for range 4 {
		_, _ = e.Process()
		e.Poll()
	}
	c.mu.Lock()
	require.Zero(t, c.dup)
	require.Len(t, c.order, 40)
	for i := range txs {
		require.Same(t, &txs[i], c.order[i], "completion %d out of order", i)
		want := StatusOK
		if i < 13 {
			want = StatusAborted
		}
		require.Equal(t, want, c.st[&txs[i]], "txreq %d", i)
	}
	c.mu.Unlock()
	sink.mu.Lock()
	require.Len(t, sink.pkts[0], 27)
	for i, p := range sink.pkts[0] {
		require.EqualValues(t, 13+i, p[0])
	}
	sink.mu.Unlock()
}

// TestSendListStopStartRace: producers send lists (most longer than a batch) to an engine with
// its own goroutine while another goroutine stops and starts it in a loop. Every txreq completes
// exactly once; each call's returned count is what left the list; each call's txreqs complete in
// list order; a call's OK completions are a prefix of it (once one is aborted, none after it in
// the same call is OK); an error is only nil, ErrNotRunning or ErrBusy (the list stays then).
func TestSendListStopStartRace(t *testing.T) {
	for _, defer_ := range []bool{false, true} {
		t.Run(fmt.Sprintf("deferOrRetry=%v", defer_), func(t *testing.T) { sendListStopStartRace(t, defer_) })
	}
}

// sendListStopStartRace is TestSendListStopStartRace; withWait: each producer's SendList has an
// IOWait with DeferOrRetry (ErrBusy queues it; the producer resends once it is woken).
func sendListStopStartRace(t *testing.T, withWait bool) {
	engTestNoLeak(t)
	lists := 60
	if testing.Short() {
		lists = 25
	}
	var c orderRec
	dev, _ := engTestDevice(t, Config{RingSize: 128})
	e := dev.Engine(0)
	stop := make(chan struct{})
	var chaos sync.WaitGroup
	var cycles atomic.Int64
	chaos.Add(1)
	go func() {
		defer chaos.Done()
		for {
			select {
			case <-stop:
				require.NoError(t, e.Start())
				return
			default:
			}
			if e.Stop() == nil && e.Start() == nil {
				cycles.Add(1)
			}
		}
	}()
	type call struct{ txs []*TxReq }
	var callsMu sync.Mutex
	var calls []call
	var waits []*IOWait
	var notRunning atomic.Int64
	var prods sync.WaitGroup
	for p := range 3 {
		prods.Add(1)
		go func() {
			defer prods.Done()
			rng := rand.New(rand.NewPCG(uint64(p), 7))
			var w *IOWait
			if withWait {
				w = &IOWait{}
				w.Init(func(e *Engine, w *IOWait, tx *TxReq, seq uint32, pktsSent bool) error {
					return e.DeferOrRetry(w, tx, seq, pktsSent)
				}, func(*IOWait, int) {}, nil)
				callsMu.Lock()
				waits = append(waits, w)
				callsMu.Unlock()
			}
			for range lists {
				n := 1 + rng.IntN(90)
				txs := make([]TxReq, n)
				l := &TxList{}
				for i := range txs {
					if err := txs[i].Init(0, 8, &c); err != nil {
						t.Error(err)
						return
					}
					if err := txs[i].AddKVAddr(dev, make([]byte, 8)); err != nil {
						t.Error(err)
						return
					}
					l.PushBack(&txs[i])
				}
				next := 0
				for l.Len() > 0 {
					k, err := e.SendList(w, l)
					if k+l.Len() != n-next {
						t.Errorf("SendList took %d, left %d of %d", k, l.Len(), n-next)
						return
					}
					cl := call{}
					for i := next; i < next+k; i++ {
						cl.txs = append(cl.txs, &txs[i])
					}
					next += k
					callsMu.Lock()
					calls = append(calls, cl)
					callsMu.Unlock()
					if err != nil && err != ErrNotRunning && err != ErrBusy {
						t.Errorf("SendList: %v", err)
						return
					}
					if err == ErrNotRunning {
						notRunning.Add(1)
					}
					if err == ErrNotRunning && l.Len() != 0 {
						t.Errorf("ErrNotRunning with %d left", l.Len())
						return
					}
					for w != nil && e.Waiting(w) {
						runtime.Gosched() // woken by a completion pass or a sw clean
					}
				}
			}
		}()
	}
	prods.Wait()
	close(stop)
	chaos.Wait()
	// Drain: everything completes (Stop flushes, the goroutine sends the rest).
	require.NoError(t, e.Stop())
	require.NoError(t, e.Start())
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Zero(t, c.dup)
	pos := make(map[*TxReq]int, len(c.order))
	for i, tx := range c.order {
		pos[tx] = i
	}
	total := 0
	for ci, cl := range calls {
		aborted := false
		for i, tx := range cl.txs {
			total++
			p, ok := pos[tx]
			require.True(t, ok, "call %d txreq %d never completed", ci, i)
			if i > 0 {
				require.Greater(t, p, pos[cl.txs[i-1]], "call %d txreq %d completed before %d", ci, i, i-1)
			}
			if c.st[tx] != StatusOK {
				aborted = true
			} else if aborted {
				t.Fatalf("call %d: txreq %d OK after an aborted one of the same call", ci, i)
			}
		}
	}
	require.Len(t, c.order, total)
	for _, w := range waits {
		require.Zero(t, w.Busy())
		require.False(t, e.Waiting(w))
	}
	t.Logf("%d calls (%d ErrNotRunning), %d txreqs, %d stop/start cycles", len(calls), notRunning.Load(), total, cycles.Load())
}
