package sdma

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fillRing sends two-descriptor packets (6 bytes + pad) until the ring refuses one, and returns
// how many it sent. The refused txreq is cleaned.
func fillRing(t *testing.T, dev *Device, e *Engine, cb Completer) int {
	t.Helper()
	n := 0
	for {
		tx := new(TxReq)
		engTestBuild(t, dev, tx, 0, make([]byte, 6), cb)
		if err := e.Send(nil, tx, false); err != nil {
			require.ErrorIs(t, err, ErrBusy)
			require.NoError(t, tx.Clean())
			return n
		}
		n++
	}
}

// sleepWindowRig is the setting of the sleep-window races: a Manual engine whose ring is full
// and processed by the hardware but not completed (CompletePoll), with the test hook that runs
// a completion pass, which frees the whole ring and is the last pass anybody runs, in the window
// of the first sleeper between its progress check and its queueing.
type sleepWindowRig struct {
	dev      *Device
	e        *Engine
	c        completions
	sent     int            // txreqs in the ring
	passDone sync.WaitGroup // the pass run in the window
	wait     time.Duration  // how long a sleeper waits for its wakeup
}

func newSleepWindowRig(t *testing.T, skipWaitLock bool) *sleepWindowRig {
	r := new(sleepWindowRig)
	r.dev, _ = engTestDevice(t, Config{Manual: true, Completion: CompletePoll, RingSize: 64})
	e := r.dev.Engine(0)
	r.e = e
	r.sent = fillRing(t, r.dev, e, &r.c)
	n, err := e.Process()
	require.NoError(t, err)
	require.Equal(t, r.sent, n)

	var once sync.Once
	e.test = &engineTestHooks{skipWaitLock: skipWaitLock}
	e.test.sleepWindow = func() {
		once.Do(func() {
			done := make(chan struct{})
			r.passDone.Add(1)
			go func() {
				defer r.passDone.Done()
				e.Poll()
				close(done)
			}()
			// Without the wait lock the pass ends here: wait for it. With it, the pass frees the
			// ring and then blocks in descAvail on the wait lock this sleeper holds: give it time
			// to get there (if it is late, it finds the sleeper queued all the same).
			if skipWaitLock {
				<-done
				return
			}
			select {
			case <-done:
			case <-time.After(50 * time.Millisecond):
			}
		})
	}
	r.wait = 10 * time.Second // generous: with the wait lock the wakeup comes
	if skipWaitLock {
		r.wait = 300 * time.Millisecond // no pass will come: the wakeup is lost for good
	}
	return r
}

// runSleepWindow drives the 2019 sleep-window race deterministically (sleepWindowRig): a
// verbs-style sleeper (ParkOrRetry) finds no progress, and the completion pass runs between that
// check and the queueing. It reports whether the sleeper was woken.
func runSleepWindow(t *testing.T, skipWaitLock bool) bool {
	r := newSleepWindowRig(t, skipWaitLock)
	dev, e, c, sent := r.dev, r.e, &r.c, r.sent
	woken := make(chan struct{}, 1)
	var w IOWait
	w.Init(func(e *Engine, w *IOWait, tx *TxReq, seq uint32, pktsSent bool) error {
		return e.ParkOrRetry(w, tx, seq, pktsSent)
	}, func(*IOWait, int) { woken <- struct{}{} }, nil)

	var tx TxReq
	engTestBuild(t, dev, &tx, 0, make([]byte, 6), c)
	require.ErrorIs(t, e.Send(&w, &tx, true), ErrBusy)
	require.Same(t, &tx, w.TxHead().Front(), "the verbs sleeper keeps the txreq")
	r.passDone.Wait()
	require.EqualValues(t, sent, c.n.Load(), "the pass in the window completed the ring")
	require.Equal(t, 63, e.DescqFreeCnt(), "the ring is free: nobody will run another pass")

	select {
	case <-woken:
	case <-time.After(r.wait):
		// Lost wakeup: the sleeper waits for a pass that will never come.
		e.waitMu.Lock()
		if e.dmawait.head == &w {
			e.dmawait.remove(&w)
		}
		e.waitMu.Unlock()
		require.NoError(t, w.TxHead().PopFront().Clean())
		return false
	}
	resend := w.TxHead().PopFront()
	require.Same(t, &tx, resend)
	require.NoError(t, e.Send(&w, resend, true))
	_, err := e.Process()
	require.NoError(t, err)
	e.Poll()
	require.EqualValues(t, sent+1, c.n.Load())
	return true
}

func TestSleepWindowWaitLockClosesRace(t *testing.T) {
	assert.True(t, runSleepWindow(t, false), "with the wait lock the pass finds the sleeper queued")
}

// TestSleepWindowWithoutWaitLockLosesWakeup is the same run with the wait lock removed from the
// Progress check (the pre-2019 kernel): the wakeup is lost. This shows the test above would fail.
func TestSleepWindowWithoutWaitLockLosesWakeup(t *testing.T) {
	assert.False(t, runSleepWindow(t, true), "without the wait lock the sleeper must hang")
}

// runSleepWindowBlocking is runSleepWindow for SendWait's own parking (parkBlocking): the ring
// is full and processed but not completed, SendWait's waiter finds no progress, and the last
// completion pass runs in the window before it queues. It reports whether the waiter was woken
// (parkBlocking returned nil) rather than left to its context's deadline.
func runSleepWindowBlocking(t *testing.T, skipWaitLock bool) bool {
	r := newSleepWindowRig(t, skipWaitLock)
	dev, e, c, sent := r.dev, r.e, &r.c, r.sent
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, make([]byte, 6), c)
	seq := e.HeadSeq()
	require.ErrorIs(t, e.Send(nil, &tx, true), ErrBusy)
	bw := blockWaiters.Get().(*blockWaiter)
	defer blockWaiters.Put(bw)
	// SendWait drives a manual engine itself and never parks: call its parking step directly.
	ctx, cancel := context.WithTimeout(context.Background(), r.wait)
	defer cancel()
	err := e.parkBlocking(ctx, bw, &tx, seq)
	r.passDone.Wait()
	require.EqualValues(t, sent, c.n.Load(), "the pass in the window completed the ring")
	e.waitMu.Lock()
	assert.Nil(t, e.dmawait.head, "no waiter left behind")
	e.waitMu.Unlock()
	if err != nil {
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NoError(t, tx.Clean())
		return false
	}
	e.test = nil
	require.NoError(t, e.Send(nil, &tx, true), "woken with room")
	_, err = e.Process()
	require.NoError(t, err)
	e.Poll()
	require.EqualValues(t, sent+1, c.n.Load())
	return true
}

func TestSleepWindowSendWait(t *testing.T) {
	assert.True(t, runSleepWindowBlocking(t, false), "with the wait lock the pass finds SendWait's waiter queued")
	assert.False(t, runSleepWindowBlocking(t, true), "without it the wakeup is lost (the test can fail)")
}

// stressQP is a verbs-like sender: a lock (qp->s_lock), an IOWait whose sleeper is ParkOrRetry
// and whose wakeup signals the sending goroutine.
type stressQP struct {
	id   uint32
	mu   sync.Mutex
	w    IOWait
	wake chan struct{}
}

func newStressQP(id uint32) *stressQP {
	q := &stressQP{id: id, wake: make(chan struct{}, 1)}
	q.w.Init(func(e *Engine, w *IOWait, tx *TxReq, seq uint32, pktsSent bool) error {
		return e.ParkOrRetry(w, tx, seq, pktsSent)
	}, func(*IOWait, int) {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}, nil)
	return q
}

// stressPacket lays out a packet: qp id, sequence number, then a pattern of the two.
func stressPacket(qp, seq uint32, n int) []byte {
	b := make([]byte, n)
	binary.LittleEndian.PutUint32(b, qp)
	binary.LittleEndian.PutUint32(b[4:], seq)
	for i := 8; i < n; i++ {
		b[i] = byte(qp*31 + seq*7 + uint32(i))
	}
	return b
}

// stressSink checks that every packet arrives byte-identical, once, and in order per QP.
type stressSink struct {
	t    *testing.T
	mu   sync.Mutex
	next map[uint32]uint32
	n    atomic.Int64
}

func (s *stressSink) Deliver(_ int, segs [][]byte) error {
	var p []byte
	for _, b := range segs {
		p = append(p, b...)
	}
	qp := binary.LittleEndian.Uint32(p)
	seq := binary.LittleEndian.Uint32(p[4:])
	n := 8 + int(seq%97)
	want := padded(stressPacket(qp, seq, n))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next[qp] != seq {
		s.t.Errorf("qp %d: packet %d arrived, want %d", qp, seq, s.next[qp])
	}
	s.next[qp] = seq + 1
	if string(p) != string(want) {
		s.t.Errorf("qp %d packet %d: bytes differ", qp, seq)
	}
	s.n.Add(1)
	return nil
}

type stressKind string

const (
	kindKernel   stressKind = "kernel"   // Send + ParkOrRetry, resend after wakeup
	kindBlocking stressKind = "blocking" // SendWait
	kindList     stressKind = "list"     // SendList + DeferOrRetry
)

func runStress(t *testing.T, engines int, mode CompletionMode, kinds []stressKind) {
	engTestNoLeak(t)
	perQP := 3000
	if testing.Short() {
		perQP = 400
	}
	m := engTestIOMMU(t)
	sink := &stressSink{t: t, next: map[uint32]uint32{}}
	dev, err := NewDevice(Config{Mapper: m, Engines: engines, RingSize: 64, Completion: mode, Sink: sink})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var c completions
	var wg sync.WaitGroup
	stopPoll := make(chan struct{})
	var pollers sync.WaitGroup
	if mode == CompletePoll {
		for i := 0; i < engines; i++ {
			pollers.Add(1)
			go func(e *Engine) {
				defer pollers.Done()
				for {
					select {
					case <-stopPoll:
						return
					default:
					}
					if e.Poll() == 0 {
						runtime.Gosched()
					}
				}
			}(dev.Engine(i))
		}
	}
	producers := 4
	total := producers * perQP
	for p := 0; p < producers; p++ {
		kind := kinds[p%len(kinds)]
		q := newStressQP(uint32(p))
		e := dev.SelectEngine(q.id, uint8(p))
		wg.Add(1)
		go func() {
			defer wg.Done()
			build := func(seq uint32) *TxReq {
				tx := new(TxReq)
				buf := stressPacket(q.id, seq, 8+int(seq%97))
				if err := tx.Init(0, len(buf), &c); err != nil {
					t.Error(err)
					return nil
				}
				// Two adds: header and payload, as a verbs packet.
				if err := tx.AddKVAddr(dev, buf[:8]); err != nil {
					t.Error(err)
					return nil
				}
				if len(buf) > 8 {
					if err := tx.AddKVAddr(dev, buf[8:]); err != nil {
						t.Error(err)
						return nil
					}
				}
				return tx
			}
			switch kind {
			case kindBlocking:
				for seq := 0; seq < perQP; seq++ {
					tx := build(uint32(seq))
					if err := e.SendWait(ctx, tx); err != nil {
						t.Errorf("SendWait: %v", err)
						return
					}
				}
			case kindKernel:
				pkts := false
				for seq := 0; seq < perQP; seq++ {
					tx := build(uint32(seq))
					for {
						q.mu.Lock()
						err := e.Send(&q.w, tx, pkts)
						q.mu.Unlock()
						if err == nil {
							pkts = true
							break
						}
						if err != ErrBusy {
							t.Errorf("Send: %v", err)
							return
						}
						select {
						case <-q.wake:
						case <-ctx.Done():
							t.Errorf("qp %d: no wakeup (lost?)", q.id)
							return
						}
						pkts = false
						q.mu.Lock()
						tx = q.w.TxHead().PopFront()
						q.mu.Unlock()
					}
				}
			case kindList:
				q.w.sleep = func(e *Engine, w *IOWait, tx *TxReq, seq uint32, pktsSent bool) error {
					return e.DeferOrRetry(w, tx, seq, pktsSent)
				}
				var l TxList
				for seq := 0; seq < perQP || l.Len() > 0; {
					for l.Len() < 8 && seq < perQP {
						l.PushBack(build(uint32(seq)))
						seq++
					}
					q.mu.Lock()
					_, err := e.SendList(&q.w, &l)
					q.mu.Unlock()
					if err == ErrBusy {
						select {
						case <-q.wake:
						case <-ctx.Done():
							t.Errorf("qp %d: no wakeup (lost?)", q.id)
							return
						}
					} else if err != nil {
						t.Errorf("SendList: %v", err)
						return
					}
				}
			}
			if err := q.w.Drain(ctx); err != nil {
				t.Errorf("Drain: %v", err)
			}
		}()
	}
	wg.Wait()
	// SendWait has no IOWait to drain: wait for the last completions before closing.
	require.Eventually(t, func() bool { return c.n.Load() == int64(total) }, 30*time.Second, time.Millisecond)
	close(stopPoll)
	pollers.Wait()
	require.NoError(t, dev.Close())
	assert.EqualValues(t, total, sink.n.Load(), "every packet delivered")
	assert.EqualValues(t, total, c.n.Load(), "every txreq completed")
	assert.Zero(t, c.dup.Load(), "none twice")
	for tx, st := range c.seen {
		if st != StatusOK {
			t.Errorf("txreq %p: status %d", tx, st)
		}
	}
	assert.Empty(t, m.Live(), "IOMMU leak report after Close")
	var s EngineStats
	for i := 0; i < engines; i++ {
		es := dev.Engine(i).Stats()
		s.Packets += es.Packets
		s.Sleeps += es.Sleeps
		s.Wakeups += es.Wakeups
	}
	assert.EqualValues(t, total, s.Packets)
	t.Logf("sleeps %d wakeups %d", s.Sleeps, s.Wakeups)
}

func TestStress(t *testing.T) {
	for _, engines := range []int{1, 2} {
		for _, mode := range []CompletionMode{CompleteInterrupt, CompletePoll} {
			t.Run(fmt.Sprintf("engines=%d/completion=%v", engines, mode), func(t *testing.T) {
				runStress(t, engines, mode, []stressKind{kindKernel, kindBlocking, kindList})
			})
		}
	}
}

func TestIOWaitDrain(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var drained atomic.Int32
	var w IOWait
	w.Init(nil, nil, func(*IOWait) { drained.Add(1) })
	var txs [3]TxReq
	for i := range txs {
		engTestBuild(t, dev, &txs[i], 0, make([]byte, 16), nil)
		require.NoError(t, e.Send(&w, &txs[i], false))
	}
	assert.Equal(t, 3, w.Busy())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	assert.ErrorIs(t, w.Drain(ctx), context.DeadlineExceeded)
	cancel()
	done := make(chan error)
	go func() { done <- w.Drain(context.Background()) }()
	_, err := e.Process()
	require.NoError(t, err)
	require.NoError(t, <-done)
	assert.Zero(t, w.Busy())
	assert.EqualValues(t, 1, drained.Load())
}

func TestDescAvailOrderBatchAndStop(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, Completion: CompletePoll, RingSize: 64})
	e := dev.Engine(0)
	var order []int
	mk := recordWakes(&order)
	free := func() {
		t.Helper()
		fillRing(t, dev, e, nil)
		_, err := e.Process()
		require.NoError(t, err)
	}

	// 25 waiters needing 2 each: one pass wakes 20 (SDMA_WAIT_BATCH_SIZE), in queue order.
	free()
	ws := make([]*IOWait, 25)
	for i := range ws {
		ws[i] = mk(i)
		require.True(t, must(e.QueueWait(ws[i], 2, true)))
	}
	assert.False(t, must(e.QueueWait(ws[0], 2, true)), "already queued")
	e.Poll()
	require.Len(t, order, 20)
	for i := range order {
		assert.Equal(t, i, order[i])
	}
	assert.True(t, e.Waiting(ws[20]))
	e.waitMu.Lock()
	for _, w := range ws[20:] {
		e.dmawait.remove(w)
	}
	e.waitMu.Unlock()

	// Stop at the first waiter that does not fit, even if a later one would.
	order = nil
	free()
	a, b, c := mk(1), mk(2), mk(3)
	must(e.QueueWait(a, 10, true))
	must(e.QueueWait(b, 60, true))
	must(e.QueueWait(c, 2, true))
	e.Poll()
	assert.Equal(t, []int{1}, order)
	assert.True(t, e.Waiting(b))
	assert.True(t, e.Waiting(c))
	e.waitMu.Lock()
	e.dmawait.remove(b)
	e.dmawait.remove(c)
	e.waitMu.Unlock()

	// A waiter that sent nothing, or has priority, goes to the head; the highest
	// priority<<4 + starved count of a batch is woken first.
	order = nil
	free()
	p, q, r := mk(1), mk(2), mk(3)
	r.SetPriority(1)
	must(e.QueueWait(p, 2, true))  // tail
	must(e.QueueWait(q, 2, false)) // head, starved 1
	must(e.QueueWait(r, 2, true))  // head (priority)
	assert.Equal(t, 1, q.Starved())
	e.Poll()
	assert.Equal(t, []int{3, 2, 1}, order, "list order r, q, p; r ranks highest (16 > 1 > 0)")
}

// TestIOWaitParkedOnOneEngineAtATime: one IOWait queued concurrently on two engines' wait lists
// (a QP whose packets go to two engines) is never on both: the claim of its link is one atomic
// step, and under -race no access to its wait-list fields is unsynchronised.
func TestIOWaitParkedOnOneEngineAtATime(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, Engines: 2, RingSize: 64})
	var w IOWait
	w.Init(nil, func(*IOWait, int) {}, nil)
	a, b := dev.Engine(0), dev.Engine(1)
	require.True(t, must(a.QueueWait(&w, 1, true)))
	assert.False(t, must(b.QueueWait(&w, 1, true)), "parked on another engine: left there")
	assert.True(t, a.Waiting(&w))
	assert.False(t, b.Waiting(&w))
	a.waitMu.Lock()
	a.dmawait.remove(&w)
	a.waitMu.Unlock()

	rounds := 20000
	if testing.Short() {
		rounds = 2000
	}
	var holders atomic.Int64
	var queued [2]atomic.Int64
	var wg sync.WaitGroup
	for i, e := range []*Engine{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				if must(e.QueueWait(&w, 1, r&1 == 0)) {
					queued[i].Add(1)
					if h := holders.Add(1); h != 1 {
						t.Errorf("w is on %d wait lists", h)
					}
				}
				runtime.Gosched()
				e.waitMu.Lock()
				if w.on.Load() == e {
					holders.Add(-1)
					e.dmawait.remove(&w)
				}
				e.waitMu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, holders.Load())
	assert.NotZero(t, queued[0].Load()+queued[1].Load())
	assert.Zero(t, a.dmawait.n+b.dmawait.n)
}

// must unwraps QueueWait's answer in tests whose needs are all valid.
func must(queued bool, err error) bool {
	if err != nil {
		panic(err)
	}
	return queued
}

// TestQueueWaitRefusesANeedTheRingCannotMeet: QueueWait with a need beyond the ring's capacity
// is ErrInvalid naming the capacity, and queues nothing; so a waiter queued after it is woken by
// the next pass that frees its room (a waiter needing 1000 of 63 would stop every wakeup at itself).
func TestQueueWaitRefusesANeedTheRingCannotMeet(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	woken := 0
	var big, small IOWait
	big.Init(nil, func(*IOWait, int) { t.Error("the refused waiter was woken") }, nil)
	small.Init(nil, func(*IOWait, int) { woken++ }, nil)

	queued, err := e.QueueWait(&big, 1000, false)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "capacity 63")
	assert.False(t, queued)
	assert.False(t, e.Waiting(&big), "nothing changed")
	assert.Zero(t, big.Starved(), "nothing changed")

	// A txreq on TxHead that the ring can never hold is the same need.
	var tx TxReq
	require.NoError(t, tx.Init(0, 64*4, nil))
	for i := 0; i < 64; i++ {
		require.NoError(t, tx.AddKVAddr(dev, make([]byte, 4)))
	}
	big.TxHead().PushBack(&tx)
	_, err = e.QueueWait(&big, 0, false)
	require.ErrorIs(t, err, ErrInvalid)
	big.TxHead().PopFront()
	require.NoError(t, tx.Clean())

	_, err = e.QueueWait(nil, 1, false)
	require.ErrorIs(t, err, ErrInvalid)

	// The waiter behind is woken by the next pass that frees room.
	require.True(t, must(e.QueueWait(&small, 2, true)))
	var one TxReq
	require.NoError(t, one.Init(0, 4, nil))
	require.NoError(t, one.AddKVAddr(dev, make([]byte, 4)))
	require.NoError(t, e.Send(nil, &one, false))
	_, err = e.Process()
	require.NoError(t, err)
	e.Poll()
	assert.Equal(t, 1, woken)
}

// TestIOWaitParkingWithoutWakeupRefused: an IOWait whose sleeper parks (ParkOrRetry,
// DeferOrRetry, or a sleeper calling QueueWait) but that has no wakeup callback would never be
// woken: it is refused with ErrInvalid at the park, nothing queued and tx still the caller's.
func TestIOWaitParkingWithoutWakeupRefused(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var c completions
	fillRing(t, dev, e, &c)
	for name, sleep := range map[string]SleepFunc{
		"ParkOrRetry":  (*Engine).ParkOrRetry,
		"DeferOrRetry": (*Engine).DeferOrRetry,
	} {
		var w IOWait
		w.Init(sleep, nil, nil)
		tx := new(TxReq)
		engTestBuild(t, dev, tx, 0, make([]byte, 6), &c)
		err := e.Send(&w, tx, false)
		require.ErrorIs(t, err, ErrInvalid, name)
		assert.Contains(t, err.Error(), "wakeup", name)
		assert.False(t, e.Waiting(&w), "%s: nothing queued", name)
		assert.Zero(t, w.TxHead().Len(), "%s: tx not kept", name)
		require.NoError(t, tx.Clean(), "%s: tx is the caller's", name)
	}
	var w IOWait
	w.Init(nil, nil, nil)
	queued, err := e.QueueWait(&w, 1, true)
	require.ErrorIs(t, err, ErrInvalid)
	assert.False(t, queued)
	assert.False(t, e.Waiting(&w))
}

// TestQueueWaitAfterCloseRefused: a waiter that a custom sleeper (or any caller) queues once
// Close has begun would never be woken (Close wakes the wait list once, in its sw clean), and
// would stay claimed by the closed engine, so that no other engine could queue it. QueueWait
// refuses it with ErrClosed; one queued before Close is woken by it. Before the fix QueueWait
// queued it and Waiting stayed true forever.
func TestQueueWaitAfterCloseRefused(t *testing.T) {
	dev, err := NewDevice(Config{Manual: true, RingSize: 64})
	require.NoError(t, err)
	e := dev.Engine(0)
	var before, after IOWait
	woken := 0
	before.Init(nil, func(*IOWait, int) { woken++ }, nil)
	after.Init(nil, func(*IOWait, int) { woken++ }, nil)
	queued, err := e.QueueWait(&before, 1, true)
	require.NoError(t, err)
	require.True(t, queued)
	require.NoError(t, dev.Close())
	assert.Equal(t, 1, woken, "Close wakes the waiter parked before it")
	assert.False(t, e.Waiting(&before))
	queued, err = e.QueueWait(&after, 1, true)
	require.ErrorIs(t, err, ErrClosed)
	assert.False(t, queued)
	assert.False(t, e.Waiting(&after), "nothing would ever wake it")
	// It can still be queued on a live engine.
	dev2, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	queued, err = dev2.Engine(0).QueueWait(&after, 1, true)
	require.NoError(t, err)
	assert.True(t, queued)
}
