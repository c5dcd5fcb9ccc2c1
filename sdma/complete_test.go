package sdma

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/membarrier"
	"github.com/gosdma/gosdma/sdma/internal/sm"
)

func TestCloseAbortsInFlight(t *testing.T) {
	engTestNoLeak(t)
	m := engTestIOMMU(t)
	dev, err := NewDevice(Config{Mapper: m, Manual: true, Completion: CompletePoll, RingSize: 64})
	require.NoError(t, err)
	e := dev.Engine(0)
	var c completions
	var done, pending [3]TxReq
	for i := range done {
		engTestBuild(t, dev, &done[i], 0, make([]byte, 8), &c)
		require.NoError(t, e.Send(nil, &done[i], false))
	}
	_, err = e.Process() // delivered, not yet completed (polled)
	require.NoError(t, err)
	for i := range pending {
		engTestBuild(t, dev, &pending[i], 0, make([]byte, 8), &c)
		require.NoError(t, e.Send(nil, &pending[i], false))
	}
	assert.Zero(t, c.n.Load())
	var late TxReq // built before Close, sent after
	require.NoError(t, late.Init(0, 8, nil))
	require.NoError(t, late.AddKVAddr(dev, make([]byte, 8)))
	require.NoError(t, dev.Close())
	require.NoError(t, dev.Close(), "idempotent")
	for i := range done {
		st, ok := c.status(&done[i])
		assert.True(t, ok)
		assert.Equal(t, StatusOK, st, "delivered before Close")
		st, ok = c.status(&pending[i])
		assert.True(t, ok)
		assert.Equal(t, StatusAborted, st, "never delivered")
	}
	assert.Len(t, m.Live(), 1, "Close unmapped everything but the caller's own unsent txreq")
	assert.ErrorIs(t, e.Send(nil, &late, false), ErrClosed)
	assert.NoError(t, late.Clean(), "refused by a closed engine: still the caller's")
	assert.Empty(t, m.Live(), "Close unmapped everything, pad included")
	var tx TxReq
	require.NoError(t, tx.Init(0, 8, nil))
	assert.ErrorIs(t, tx.AddKVAddr(dev, make([]byte, 8)), ErrClosed, "no add on a closed device")
	assert.Empty(t, m.Live())
}

// engTestFullRing opens a device of one goroutine engine (a ring of 64) whose sink blocks the
// hardware goroutine in the first packet until release is closed, so that the ring stays full,
// and fills the ring with 6-byte txreqs completed by cb until a Send refuses one.
func engTestFullRing(t *testing.T, cb Completer) (dev *Device, e *Engine, release chan struct{}) {
	release = make(chan struct{})
	var first atomic.Bool
	sink := SinkFunc(func(int, [][]byte) error {
		if first.CompareAndSwap(false, true) {
			<-release
		}
		return nil
	})
	dev, err := NewDevice(Config{RingSize: 64, Sink: sink})
	require.NoError(t, err)
	e = dev.Engine(0)
	for {
		tx := new(TxReq)
		engTestBuild(t, dev, tx, 0, make([]byte, 6), cb)
		if err := e.Send(nil, tx, false); err != nil {
			require.NoError(t, tx.Clean())
			break
		}
	}
	return dev, e, release
}

func TestCloseWakesBlockedSender(t *testing.T) {
	engTestNoLeak(t)
	var c completions
	dev, e, release := engTestFullRing(t, &c)
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, make([]byte, 6), &c)
	res := make(chan error)
	go func() { res <- e.SendWait(context.Background(), &tx) }()
	time.Sleep(10 * time.Millisecond)
	closed := make(chan error)
	go func() { closed <- dev.Close() }()
	time.Sleep(10 * time.Millisecond)
	close(release)
	require.NoError(t, <-closed)
	err := <-res
	if err == nil {
		// It got room before Close stopped sends: then it completed like the rest.
		_, ok := c.status(&tx)
		assert.True(t, ok)
	} else {
		assert.ErrorIs(t, err, ErrClosed)
		require.NoError(t, tx.Clean())
	}
	assert.Zero(t, c.dup.Load())
}

func TestShutdownDrains(t *testing.T) {
	engTestNoLeak(t)
	for _, manual := range []bool{false, true} {
		dev, cs := engTestDevice(t, Config{Manual: manual, RingSize: 256})
		e := dev.Engine(0)
		var c completions
		const n = 50
		for i := 0; i < n; i++ {
			tx := new(TxReq)
			engTestBuild(t, dev, tx, 0, engTestPattern(20, byte(i)), &c)
			require.NoError(t, e.Send(nil, tx, false))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, dev.Shutdown(ctx))
		cancel()
		assert.EqualValues(t, n, c.n.Load())
		for _, st := range c.seen {
			assert.Equal(t, StatusOK, st)
		}
		assert.Equal(t, n, cs.Count())
	}
}

// TestShutdownDeadlineAborts: a Shutdown whose deadline passes while the engine still sends
// returns the context's error, and every txreq has completed once by then: those the engine sent
// OK, the rest aborted. The sink holds the second packet until Close stops the engine: the
// Shutdown comes once the first packet went out, and its deadline passes with the drain held, so
// that some packets go out and some do not whatever the scheduling. (With a sink that took a
// millisecond per packet and nothing held, an engine goroutine that started late on a loaded
// machine sent nothing before the deadline: no packet OK.)
func TestShutdownDeadlineAborts(t *testing.T) {
	engTestNoLeak(t)
	var delivered atomic.Int64
	hold := make(chan struct{})
	sink := SinkFunc(func(int, [][]byte) error {
		if delivered.Add(1) == 2 {
			<-hold
		}
		return nil
	})
	dev, err := NewDevice(Config{RingSize: 256, Sink: sink})
	require.NoError(t, err)
	e := dev.Engine(0)
	var c completions
	const n = 100
	for i := 0; i < n; i++ {
		tx := new(TxReq)
		engTestBuild(t, dev, tx, 0, make([]byte, 8), &c)
		require.NoError(t, e.Send(nil, tx, false))
	}
	require.Eventually(t, func() bool { return delivered.Load() == 2 }, time.Minute, 100*time.Microsecond,
		"a hang guard: the engine did not reach the second packet")
	released := make(chan struct{})
	go func() { // the hold ends once Close stops the engine (or, a hang guard, after a minute)
		defer close(released)
		for deadline := time.Now().Add(time.Minute); !e.stopping.Load() && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
		close(hold)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, dev.Shutdown(ctx), context.DeadlineExceeded)
	<-released
	assert.EqualValues(t, n, c.n.Load(), "every txreq completed once Shutdown returned")
	assert.Zero(t, c.dup.Load())
	ok, aborted := 0, 0
	for _, st := range c.seen {
		if st == StatusOK {
			ok++
		} else {
			aborted++
		}
	}
	assert.NotZero(t, ok)
	assert.NotZero(t, aborted)
}

func TestSendList(t *testing.T) {
	dev, cs := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var c completions
	var l TxList
	txs := make([]TxReq, 40)
	for i := range txs {
		engTestBuild(t, dev, &txs[i], 0, engTestPattern(8, byte(i)), &c) // 1 descriptor each
		l.PushBack(&txs[i])
	}
	n, err := e.SendList(nil, &l)
	require.NoError(t, err)
	assert.Equal(t, 40, n)
	assert.Zero(t, l.Len())
	_, err = e.Process()
	require.NoError(t, err)
	got := cs.Packets(0)
	require.Len(t, got, 40)
	for i := range got {
		assert.Equal(t, engTestPattern(8, byte(i)), got[i])
	}

	// A list longer than the room: 63 go, the rest stay at the head, ErrBusy without a wait.
	cs.Reset()
	txs = make([]TxReq, 70)
	for i := range txs {
		engTestBuild(t, dev, &txs[i], 0, make([]byte, 8), &c)
		l.PushBack(&txs[i])
	}
	n, err = e.SendList(nil, &l)
	assert.ErrorIs(t, err, ErrBusy)
	assert.Equal(t, 63, n)
	assert.Equal(t, 7, l.Len())
	assert.Same(t, &txs[63], l.Front())
	_, err = e.Process()
	require.NoError(t, err)

	// An unfinished txreq stops the list there.
	var bad TxReq
	require.NoError(t, bad.Init(0, 8, nil))
	l.PushBack(&bad)
	n, err = e.SendList(nil, &l)
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Equal(t, 7, n)
	assert.Same(t, &bad, l.Front())
	require.NoError(t, bad.Clean())
	l.PopFront()
	_, err = e.Process()
	require.NoError(t, err)
	assert.EqualValues(t, 40+70, c.n.Load())
}

// TestSendListPublishesEvery32: a long list is published in batches of at most 32 txreqs
// (SDMA_TAIL_UPDATE_THRESH), and the hardware sees the first batch before the list is done.
func TestSendListPublishesEvery32(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 128})
	e := dev.Engine(0)
	var c completions
	var batches []int
	var tailAtFirst uint64
	e.test = &engineTestHooks{listPublish: func(k int) {
		if len(batches) == 0 {
			tailAtFirst = e.ring.Tail()
		}
		batches = append(batches, k)
	}}
	var l TxList
	txs := make([]TxReq, 70)
	for i := range txs {
		engTestBuild(t, dev, &txs[i], 0, make([]byte, 8), &c) // one descriptor each
		l.PushBack(&txs[i])
	}
	n, err := e.SendList(nil, &l)
	require.NoError(t, err)
	assert.Equal(t, 70, n)
	assert.Equal(t, []int{32, 32, 6}, batches)
	assert.EqualValues(t, 32, tailAtFirst, "the first 32 were published on their own")
	n, err = e.Process()
	require.NoError(t, err)
	assert.Equal(t, 70, n)
	assert.EqualValues(t, 70, c.n.Load())
}

func TestSendListStoppedFlushes(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64, Mapper: engTestIOMMU(t)})
	e := dev.Engine(0)
	var c completions
	require.NoError(t, e.Stop())
	var w IOWait
	w.Init(nil, nil, nil)
	var l TxList
	txs := make([]TxReq, 5)
	for i := range txs {
		engTestBuild(t, dev, &txs[i], 0, make([]byte, 8), &c)
		l.PushBack(&txs[i])
	}
	n, err := e.SendList(&w, &l)
	assert.ErrorIs(t, err, ErrNotRunning)
	assert.Equal(t, 5, n)
	assert.Zero(t, l.Len())
	assert.Equal(t, 5, w.Busy())
	e.Poll()
	assert.Zero(t, w.Busy())
	for i := range txs {
		st, _ := c.status(&txs[i])
		assert.Equal(t, StatusAborted, st)
	}
}

func TestProgressSemantics(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, Completion: CompletePoll, RingSize: 64})
	e := dev.Engine(0)
	fillRing(t, dev, e, nil)
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, make([]byte, 6), nil)
	seq := e.HeadSeq()
	assert.False(t, e.Progress(seq, &tx), "no pass since seq")
	e.Poll() // a pass, but the hardware has not moved: no room
	assert.False(t, e.Progress(seq, &tx), "a pass ran, but tx still does not fit")
	_, err := e.Process()
	require.NoError(t, err)
	assert.False(t, e.Progress(e.HeadSeq(), &tx))
	e.Poll()
	assert.True(t, e.Progress(seq, &tx), "a pass ran and freed room")
	require.NoError(t, tx.Clean())
}

func TestProgressSchedule(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, Completion: CompletePoll, RingSize: 64})
	e := dev.Engine(0)
	var c completions
	for i := 0; i < 3; i++ { // 6 descriptors in process: below 64/8
		tx := new(TxReq)
		engTestBuild(t, dev, tx, 0, make([]byte, 6), &c)
		require.NoError(t, e.Send(nil, tx, false))
	}
	_, err := e.Process()
	require.NoError(t, err)
	assert.Equal(t, 7, e.ring.InProcess())
	assert.False(t, e.ProgressSchedule(), "7 < 64/8")
	tx := new(TxReq)
	engTestBuild(t, dev, tx, 0, make([]byte, 8), &c) // one descriptor: exactly an eighth
	require.NoError(t, e.Send(nil, tx, false))
	_, err = e.Process()
	require.NoError(t, err)
	assert.Equal(t, 8, e.ring.InProcess())
	assert.True(t, e.ProgressSchedule())
	assert.EqualValues(t, 4, c.n.Load())
	assert.Equal(t, 63, e.DescqFreeCnt())
}

func TestIdleEngineParks(t *testing.T) {
	engTestNoLeak(t)
	dev, _ := engTestDevice(t, Config{})
	e := dev.Engine(0)
	require.Eventually(t, e.hwSleeping.Load, 5*time.Second, time.Millisecond, "an idle spin-park engine parks")
	var c completions
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, make([]byte, 8), &c)
	require.NoError(t, e.Send(nil, &tx, false))
	require.Eventually(t, func() bool { return c.n.Load() == 1 }, 5*time.Second, time.Millisecond, "the doorbell woke it")
	require.Eventually(t, e.hwSleeping.Load, 5*time.Second, time.Millisecond)
	require.NoError(t, dev.Close())
}

// hwPasses reads the hardware model's pass count.
func hwPasses(e *Engine) uint64 {
	e.hwMu.Lock()
	defer e.hwMu.Unlock()
	return e.hw.passes
}

// requireParkedAndStill waits for the hardware goroutine to park, then checks that it stays
// parked: over 50ms it makes no more passes than one stale doorbell can cause (a spin of
// spinLimit passes). A goroutine that spun would make thousands. (On a starved machine a
// spinning goroutine might make few passes: then the test passes wrongly, never fails wrongly.)
func requireParkedAndStill(t *testing.T, e *Engine, what string) {
	t.Helper()
	require.Eventually(t, e.hwSleeping.Load, 10*time.Second, time.Millisecond, "%s: the goroutine parks", what)
	p0 := hwPasses(e)
	time.Sleep(50 * time.Millisecond)
	p1 := hwPasses(e)
	assert.LessOrEqual(t, p1-p0, uint64(spinLimit+2), "%s: the goroutine spins instead of parking", what)
}

// TestIdleEngineDoesNotSpin: an idle engine, one holding a packet whose LAST is not published,
// and a frozen engine holding descriptors all park their hardware goroutine instead of burning
// a core; the doorbell (a publish, a state change) wakes it.
func TestIdleEngineDoesNotSpin(t *testing.T) {
	engTestNoLeak(t)
	for _, ws := range []WaitStrategy{WaitSpinPark, WaitPark} {
		t.Run(ws.String(), func(t *testing.T) {
			dev, cs := engTestDevice(t, Config{RingSize: 64, Wait: ws})
			e := dev.Engine(0)
			requireParkedAndStill(t, e, "idle")

			// A packet whose FIRST is published but not its LAST: the chip waits for the rest.
			_, err := e.ring.Enqueue([]desc.Desc{rawDesc(0, 0, true, false)}, 0)
			require.NoError(t, err)
			e.afterPublish()
			requireParkedAndStill(t, e, "incomplete packet")
			assert.Zero(t, cs.Count())
			_, err = e.ring.Enqueue([]desc.Desc{rawDesc(uint64(dev.padAddr()), 4, false, true)}, 0)
			require.NoError(t, err)
			e.afterPublish()
			require.Eventually(t, func() bool { return cs.Count() == 1 }, 10*time.Second, time.Millisecond, "the doorbell woke it")
			requireParkedAndStill(t, e, "idle again")

			// Frozen with descriptors in the ring: nothing to do until the state changes.
			_, err = e.ring.Enqueue([]desc.Desc{rawDesc(0, 0, true, false)}, 0)
			require.NoError(t, err)
			require.NoError(t, e.event(sm.E80HwFreeze, "test"))
			e.afterPublish()
			requireParkedAndStill(t, e, "frozen")
			require.NoError(t, e.event(sm.E81HwFrozen, "test"))
			require.NoError(t, e.event(sm.E82HwUnfreeze, "test"))
			require.Equal(t, sm.S99Running, e.state())
			var c completions
			var tx TxReq
			engTestBuild(t, dev, &tx, 0, engTestPattern(8, 1), &c)
			require.NoError(t, e.Send(nil, &tx, false))
			require.Eventually(t, func() bool { return c.n.Load() == 1 }, 10*time.Second, time.Millisecond)
			requireParkedAndStill(t, e, "after the freeze")
			require.NoError(t, dev.Close())
		})
	}
}

func TestSendWaitContext(t *testing.T) {
	engTestNoLeak(t)
	dev, e, release := engTestFullRing(t, nil)
	defer func() { close(release); require.NoError(t, dev.Close()) }()
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, make([]byte, 6), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, e.SendWait(ctx, &tx), context.DeadlineExceeded)
	e.waitMu.Lock()
	assert.Nil(t, e.dmawait.head, "no waiter left behind")
	e.waitMu.Unlock()
	require.NoError(t, tx.Clean())
}

func TestZeroAllocsPerPacket(t *testing.T) {
	if txTestRace {
		t.Skip("the race detector allocates")
	}
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 256, Sink: discardSink{}})
	e := dev.Engine(0)
	hdr := make([]byte, 40)
	payload := make([]byte, 1000)
	var tx TxReq
	done := 0
	var cb CompleterFunc = func(*TxReq, Status) { done++ }
	one := func() {
		if err := tx.Init(0, len(hdr)+len(payload), cb); err != nil {
			panic(err)
		}
		if err := tx.AddKVAddr(dev, hdr); err != nil {
			panic(err)
		}
		if err := tx.AddKVAddr(dev, payload); err != nil {
			panic(err)
		}
		if err := e.Send(nil, &tx, false); err != nil {
			panic(err)
		}
		if _, err := e.Process(); err != nil {
			panic(err)
		}
	}
	for i := 0; i < 100; i++ {
		one()
	}
	assert.Zero(t, testing.AllocsPerRun(1000, one), "init + 2 adds + send + hardware + completion")
	assert.Equal(t, 1100+1, done)
}

// TestSendIsABatchOfOne: Send and SendList share one admit/reserve/publish path: a Send is one
// publish of one txreq; on a stopped engine both flush, on a closed device both refuse, and a
// txreq that cannot be sent gets the same error from both, with nothing changed.
func TestSendIsABatchOfOne(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var c completions
	var batches []int
	e.test = &engineTestHooks{listPublish: func(k int) { batches = append(batches, k) }}
	var a, b TxReq
	engTestBuild(t, dev, &a, 0, make([]byte, 8), &c)
	require.NoError(t, e.Send(nil, &a, false))
	assert.Equal(t, []int{1}, batches, "Send publishes once, one txreq")
	engTestBuild(t, dev, &b, 0, make([]byte, 8), &c)
	var l TxList
	l.PushBack(&b)
	n, err := e.SendList(nil, &l)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []int{1, 1}, batches)
	_, err = e.Process()
	require.NoError(t, err)
	assert.EqualValues(t, 2, c.n.Load())

	// The same refusal from both, nothing changed.
	var unfinished TxReq
	require.NoError(t, unfinished.Init(0, 16, &c))
	require.NoError(t, unfinished.AddKVAddr(dev, make([]byte, 8)))
	errSend := e.Send(nil, &unfinished, false)
	l.PushBack(&unfinished)
	n, errList := e.SendList(nil, &l)
	require.ErrorIs(t, errSend, ErrInvalid)
	require.ErrorIs(t, errList, ErrInvalid)
	assert.Equal(t, errSend.Error(), errList.Error())
	assert.Zero(t, n)
	assert.Equal(t, 1, l.Len())
	l.PopFront()
	require.NoError(t, unfinished.Clean())

	// Stopped: both flush (ErrNotRunning), and both complete aborted.
	require.NoError(t, e.Stop())
	var sa, sb TxReq
	engTestBuild(t, dev, &sa, 0, make([]byte, 8), &c)
	engTestBuild(t, dev, &sb, 0, make([]byte, 8), &c)
	require.ErrorIs(t, e.Send(nil, &sa, false), ErrNotRunning)
	l.PushBack(&sb)
	n, err = e.SendList(nil, &l)
	require.ErrorIs(t, err, ErrNotRunning)
	assert.Equal(t, 1, n)
	assert.Equal(t, []int{1, 1}, batches, "nothing published while stopped")
	e.Poll()
	assert.EqualValues(t, 4, c.n.Load())
	for _, tx := range []*TxReq{&sa, &sb} {
		st, ok := c.status(tx)
		assert.True(t, ok)
		assert.Equal(t, StatusAborted, st)
	}

	// Closed: both refuse, the txreqs still the caller's.
	var ca, cb TxReq
	engTestBuild(t, dev, &ca, 0, make([]byte, 8), &c)
	engTestBuild(t, dev, &cb, 0, make([]byte, 8), &c)
	require.NoError(t, dev.Close())
	require.ErrorIs(t, e.Send(nil, &ca, false), ErrClosed)
	l.PushBack(&cb)
	n, err = e.SendList(nil, &l)
	require.ErrorIs(t, err, ErrClosed)
	assert.Zero(t, n)
	assert.Equal(t, 1, l.Len())
	require.NoError(t, ca.Clean(), "the caller's")
	require.NoError(t, cb.Clean(), "the caller's")
	assert.Zero(t, c.dup.Load())
}

// TestSendChecksTheTxReqBeforeTheEngine: a txreq that cannot be sent gets its own ErrInvalid
// from Send and SendList whatever the engine's state (running, stopped, closed), as the kernel
// checks the txreq before the engine; a nil txreq too.
func TestSendChecksTheTxReqBeforeTheEngine(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var c completions
	check := func(state string) {
		var unfinished TxReq
		require.NoError(t, unfinished.Init(0, 16, &c))
		require.NoError(t, unfinished.AddKVAddr(dev, make([]byte, 8)))
		assert.ErrorIs(t, e.Send(nil, &unfinished, false), ErrInvalid, state)
		var l TxList
		l.PushBack(&unfinished)
		n, err := e.SendList(nil, &l)
		assert.ErrorIs(t, err, ErrInvalid, state)
		assert.Zero(t, n, state)
		assert.ErrorIs(t, e.Send(nil, nil, false), ErrInvalid, state)
		l.PopFront()
		require.NoError(t, unfinished.Clean())
	}
	check("running")
	require.NoError(t, e.Stop())
	check("stopped")
	// Closed: AddKVAddr refuses on a closed device, so build before Close.
	var late TxReq
	require.NoError(t, late.Init(0, 16, &c))
	require.NoError(t, late.AddKVAddr(dev, make([]byte, 8)))
	require.NoError(t, dev.Close())
	assert.ErrorIs(t, e.Send(nil, &late, false), ErrInvalid, "closed")
	var l TxList
	l.PushBack(&late)
	_, err := e.SendList(nil, &l)
	assert.ErrorIs(t, err, ErrInvalid, "closed")
	assert.ErrorIs(t, e.Send(nil, nil, false), ErrInvalid, "closed")
	l.PopFront()
	require.NoError(t, late.Clean())
	assert.Zero(t, c.n.Load())
}

// unmapOrder is a Completer that checks, at each callback, that the completing txreq's mappings
// are gone already (its own unmaps before its callback) and counts the callbacks.
type unmapOrder struct {
	t     *testing.T
	m     *dma.IOMMU
	addrs map[*TxReq][]dma.Addr // the bus addresses each txreq mapped, recorded before Send
	n     int
}

func (u *unmapOrder) Complete(tx *TxReq, st Status) {
	u.n++
	assert.Equal(u.t, StatusOK, st)
	for _, a := range u.addrs[tx] {
		_, err := u.m.Translate(a, 4, dma.ToDevice)
		assert.Error(u.t, err, "a mapping of the txreq is live at its callback")
	}
}

// TestCompletionUnmapsBeforeCallback: a completion pass over one mapped txreq (its clean unmaps
// it, no batch), over a few (one batch), and over more than one chunk of unmapChunkBatch unmaps,
// with txreqs that mapped nothing (daddr) among them, undoes every mapping exactly once, each
// txreq's before its callback, and keeps the caller's daddr memory mapped.
func TestCompletionUnmapsBeforeCallback(t *testing.T) {
	for _, n := range []int{1, 2, 5, 3 * unmapChunkBatch / 2} {
		t.Run(itoa(n), func(t *testing.T) {
			m := engTestIOMMU(t)
			c := dma.NewCounting(m)
			dev, err := NewDevice(Config{Mapper: c, Manual: true, Completion: CompletePoll, RingSize: 1024})
			require.NoError(t, err)
			defer dev.Close()
			e := dev.Engine(0)
			own := make([]byte, 8)
			ownAddr, err := m.MapSingle(own, dma.ToDevice)
			require.NoError(t, err)
			u := &unmapOrder{t: t, m: m, addrs: make(map[*TxReq][]dma.Addr)}
			txs := make([]TxReq, n)
			for i := range txs {
				tx := &txs[i]
				require.NoError(t, tx.Init(0, 24, u))
				if i%3 == 2 { // maps nothing: the caller's bus address
					require.NoError(t, tx.AddDAddr(dev, ownAddr, 8))
				} else {
					require.NoError(t, tx.AddKVAddr(dev, make([]byte, 8)))
				}
				require.NoError(t, tx.AddKVAddr(dev, make([]byte, 16)))
				for _, d := range tx.Descs() {
					if d.MapType() != desc.MapNone {
						u.addrs[tx] = append(u.addrs[tx], dma.Addr(d.Addr()))
					}
				}
				require.NoError(t, e.Send(nil, tx, false))
			}
			_, err = e.Process()
			require.NoError(t, err)
			assert.Equal(t, n, e.Poll())
			assert.Equal(t, n, u.n, "each callback once")
			cs := c.Counts()
			assert.Equal(t, cs.MapSingle, cs.UnmapSingle, "every map undone")
			assert.Zero(t, cs.Errors)
			assert.Zero(t, dev.UnmapErrors())
			_, err = m.Translate(ownAddr, 8, dma.ToDevice)
			assert.NoError(t, err, "daddr memory stays the caller's")
			require.NoError(t, m.UnmapSingle(ownAddr, 8, dma.ToDevice))
		})
	}
}

// TestTicketLockTryLock: TryLock takes a free lock and fails on a held one, also when the caller
// is the holder; with the bias (bias=on), whichever way the holder holds it: with the ticket of
// its first hold, the one that also grants it the bias, and through the bias once it owns it (a
// reentrant success would let the inner Unlock release the outer hold). Another goroutine's
// TryLock fails on the owner's biased hold without waiting for it.
func TestTicketLockTryLock(t *testing.T) {
	forEachBias(t, func(t *testing.T, biasable bool) {
		var l ticketLock
		l.biasable = biasable
		require.True(t, l.TryLock(), "free")
		assert.False(t, l.TryLock(), "held")
		l.Unlock()
		l.Lock()
		assert.False(t, l.TryLock(), "held by Lock")
		l.Unlock()
		assert.True(t, l.TryLock(), "free again")
		l.Unlock()
		holds := 0
		for range 8 { // earn the bias where there is one
			l.Lock()
			holds++
			l.Unlock()
		}
		l.Lock()
		assert.False(t, l.TryLock(), "held by Lock, by its owner")
		other := make(chan bool)
		go func() { other <- l.TryLock() }()
		assert.False(t, <-other, "held: another goroutine's TryLock")
		l.Unlock()
		go func() {
			ok := l.TryLock()
			if ok {
				l.Unlock()
			}
			other <- ok
		}()
		assert.True(t, <-other, "free: another goroutine's TryLock")
		if biasable {
			assert.Nil(t, l.bias.Load(), "which revoked the bias")
		}
		l.Lock()
		holds++
		l.Unlock()
		assert.Equal(t, 9, holds)
		assert.Equal(t, atomic.LoadUint32(&l.next), l.turn.Load(), "every ticket released once")
	})
}

// TestTicketLockMutualExclusionConcurrent: goroutines that take the lock by Lock and TryLock never
// overlap, and every increment made under it survives (a plain counter: -race sees the
// lock's happens-before edges or reports the counter). With the bias too where the build has
// it (bias=on: each goroutine's run of holds earns it, the next goroutine's revokes it).
func TestTicketLockMutualExclusionConcurrent(t *testing.T) {
	forEachBias(t, func(t *testing.T, biasable bool) {
		var l ticketLock
		l.biasable = biasable
		var inside atomic.Int32
		count := 0
		const workers, rounds = 4, 2000
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < rounds; i++ {
					if i%3 == 0 {
						if !l.TryLock() {
							l.Lock()
						}
					} else {
						l.Lock()
					}
					if inside.Add(1) != 1 {
						t.Error("two holders at once")
					}
					count++
					inside.Add(-1)
					l.Unlock()
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, workers*rounds, count)
	})
}

// forEachBias runs f on a lock that is not biasable (bias=off) and, where the build has the bias
// (getg and membarrier: see ticketLock), on one that is (bias=on).
func forEachBias(t *testing.T, f func(t *testing.T, biasable bool)) {
	t.Run("bias=off", func(t *testing.T) { f(t, false) })
	t.Run("bias=on", func(t *testing.T) {
		if !canBias || !membarrier.Available() {
			t.Skip("no bias on this build")
		}
		f(t, true)
	})
}

// TestTicketLockFIFOConcurrent: a goroutine that takes and releases the lock in a tight loop (the
// busy-polling hardware goroutine's pattern) does not starve a waiter: the waiter's ticket comes
// up after the holder's current hold; with the bias too (the looping goroutine owns it; the
// waiter revokes it, and waits only for the owner's current hold).
func TestTicketLockFIFOConcurrent(t *testing.T) {
	forEachBias(t, func(t *testing.T, biasable bool) {
		var l ticketLock
		l.biasable = biasable
		stop := make(chan struct{})
		var loops atomic.Int64
		var looper sync.WaitGroup
		engTestLoop(stop, &looper, func(int) {
			l.Lock()
			loops.Add(1)
			l.Unlock()
		})
		for loops.Load() < 100 {
			time.Sleep(time.Millisecond)
		}
		taken := 0
		for i := 0; i < 100; i++ {
			l.Lock() // must not wait for the looping goroutine to stop
			taken++
			l.Unlock()
		}
		assert.Equal(t, 100, taken)
		close(stop)
		looper.Wait()
	})
}
