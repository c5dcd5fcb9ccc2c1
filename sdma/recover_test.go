package sdma

import (
	"errors"
	"github.com/gosdma/gosdma/sdma/internal/sm"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// transitions formats the history's last n transitions as "from-event->to" strings.
func lastTransitions(e *Engine, n int) []string {
	h := e.history()
	if len(h) > n {
		h = h[len(h)-n:]
	}
	out := make([]string, len(h))
	for i, t := range h {
		out[i] = t.From.String()[:3] + "-" + t.Event.String()[:3] + "->" + t.To.String()[:3]
	}
	return out
}

func TestEngineStartsThroughStartUp(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	assert.Equal(t, sm.S99Running, e.state())
	assert.True(t, e.Running())
	assert.Equal(t, []string{"s00-e30->s10", "s10-e15->s15", "s15-e25->s99"}, lastTransitions(e, 10))
	assert.Equal(t, "NewDevice", e.history()[0].Cause)
	assert.Zero(t, e.Stats().Faults, "the start-up halt (s10) is not an error")
}

// inFlight sends n one-packet txreqs of 8 bytes and returns them.
func inFlight(t *testing.T, dev *Device, e *Engine, c *completions, n int) []*TxReq {
	t.Helper()
	txs := make([]*TxReq, n)
	for i := range txs {
		txs[i] = new(TxReq)
		engTestBuild(t, dev, txs[i], 0, engTestPattern(8, byte(i)), c)
		require.NoError(t, e.Send(nil, txs[i], false))
	}
	return txs
}

func assertStatus(t *testing.T, c *completions, txs []*TxReq, want Status) {
	t.Helper()
	for i, tx := range txs {
		st, ok := c.status(tx)
		if assert.True(t, ok, "txreq %d not completed", i) {
			assert.Equal(t, want, st, "txreq %d", i)
		}
	}
}

func TestStopAbortsAndFlushesStart(t *testing.T) {
	m := engTestIOMMU(t)
	dev, cs := engTestDevice(t, Config{Manual: true, RingSize: 64, Mapper: m})
	e := dev.Engine(0)
	var c completions
	txs := inFlight(t, dev, e, &c, 5)
	woken := make(chan int, 1)
	var w IOWait
	w.Init(nil, func(_ *IOWait, r int) { woken <- r }, nil)
	require.True(t, must(e.QueueWait(&w, 1, true)))

	require.NoError(t, e.Stop())
	assert.Equal(t, sm.S00HwDown, e.state())
	assert.False(t, e.Running())
	assertStatus(t, &c, txs, StatusAborted)
	assert.Len(t, m.Live(), 1, "every mapping undone by the clean; the device pad stays")
	assert.Zero(t, cs.Count())
	select {
	case <-woken:
	default:
		t.Fatal("Stop did not wake the parked waiter")
	}
	assert.Equal(t, []string{"s99-e00->s00"}, lastTransitions(e, 1))

	// Stopped: sends go to the flush list and complete aborted by the next flush.
	late := inFlightErr(t, dev, e, &c, 3, ErrNotRunning)
	_, err := e.Process()
	assert.ErrorIs(t, err, ErrNotRunning)
	assertStatus(t, &c, late, StatusAborted)
	_, err = e.Process()
	assert.ErrorIs(t, err, ErrNotRunning)

	require.NoError(t, e.Start())
	assert.Equal(t, sm.S99Running, e.state())
	assert.Equal(t, []string{"s00-e30->s10", "s10-e15->s15", "s15-e25->s99"}, lastTransitions(e, 3), "start-up path")
	again := inFlight(t, dev, e, &c, 2)
	n, err := e.Process()
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assertStatus(t, &c, again, StatusOK)
	assert.Equal(t, 2, cs.Count())
	assert.Zero(t, c.dup.Load())
	assert.EqualValues(t, 2+5+3, c.n.Load())
}

// inFlightErr sends n txreqs that Send must refuse with want (ErrNotRunning: flushed).
func inFlightErr(t *testing.T, dev *Device, e *Engine, c *completions, n int, want error) []*TxReq {
	t.Helper()
	txs := make([]*TxReq, n)
	for i := range txs {
		txs[i] = new(TxReq)
		engTestBuild(t, dev, txs[i], 0, engTestPattern(8, byte(i)), c)
		require.ErrorIs(t, e.Send(nil, txs[i], false), want)
	}
	return txs
}

// TestFlushRunsWithoutTheCaller: on an engine with a goroutine, a send to a stopped engine
// completes aborted without anyone calling Process or Poll (the kernel's flush worker).
func TestFlushRunsWithoutTheCaller(t *testing.T) {
	dev, _ := engTestDevice(t, Config{RingSize: 64, Wait: WaitPark})
	e := dev.Engine(0)
	require.NoError(t, e.Stop())
	var c completions
	for _, st := range []sm.Event{sm.E00GoHwDown, sm.E10GoHwStart} { // s00, then s20
		require.NoError(t, e.event(st, "test"))
		txs := inFlightErr(t, dev, e, &c, 2, ErrNotRunning)
		require.Eventually(t, func() bool {
			_, ok0 := c.status(txs[0])
			_, ok1 := c.status(txs[1])
			return ok0 && ok1
		}, 5*time.Second, time.Millisecond)
		assertStatus(t, &c, txs, StatusAborted)
	}
	assert.Equal(t, sm.S20Idle, e.state())
	require.NoError(t, e.Start())
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, make([]byte, 8), &c)
	require.NoError(t, e.Send(nil, &tx, false))
	require.Eventually(t, func() bool { _, ok := c.status(&tx); return ok }, 5*time.Second, time.Millisecond)
	assertStatus(t, &c, []*TxReq{&tx}, StatusOK)
}

func TestIdleEventGoesThroughIdleHalt(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var c completions
	txs := inFlight(t, dev, e, &c, 3)
	require.NoError(t, e.event(sm.E70GoIdle, "test"))
	assert.Equal(t, sm.S20Idle, e.state(), "go_s99_running was cleared in s60")
	assert.Equal(t, []string{"s99-e70->s60", "s60-e15->s30", "s30-e40->s40", "s40-e25->s20"}, lastTransitions(e, 4))
	assertStatus(t, &c, txs, StatusAborted)
	assert.Zero(t, e.Stats().Faults, "an idle halt is not an error")
	inFlightErr(t, dev, e, &c, 1, ErrNotRunning)
	require.NoError(t, e.event(sm.E30GoRunning, "test"))
	assert.Equal(t, sm.S99Running, e.state())
	assert.EqualValues(t, 4, c.n.Load(), "entering s99 flushed the txreq sent while idle")
}

func TestFreezeAndLinkDown(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var c completions
	txs := inFlight(t, dev, e, &c, 2)
	require.NoError(t, e.event(sm.E80HwFreeze, "test"))
	assert.Equal(t, sm.S80HwFreeze, e.state())
	_, ok := c.status(txs[0])
	assert.False(t, ok, "a freeze alone cleans nothing")
	inFlightErr(t, dev, e, &c, 1, ErrNotRunning)
	require.NoError(t, e.event(sm.E81HwFrozen, "test"))
	assert.Equal(t, sm.S82FreezeSwClean, e.state())
	assertStatus(t, &c, txs, StatusAborted)
	require.NoError(t, e.event(sm.E82HwUnfreeze, "test"))
	assert.Equal(t, sm.S99Running, e.state())

	require.NoError(t, e.event(sm.E85LinkDown, "test"))
	assert.Equal(t, sm.S80HwFreeze, e.state())
	require.NoError(t, e.event(sm.E81HwFrozen, "test"))
	require.NoError(t, e.event(sm.E82HwUnfreeze, "test"))
	assert.Equal(t, sm.S20Idle, e.state(), "link down cleared go_s99_running")
	require.NoError(t, e.Start())
	assert.Equal(t, sm.S99Running, e.state())
	ok2 := inFlight(t, dev, e, &c, 1)
	_, err := e.Process()
	require.NoError(t, err)
	assertStatus(t, &c, ok2, StatusOK)
	assert.Zero(t, e.Stats().Faults)
}

func TestInjectHaltEveryCause(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64, Mapper: engTestIOMMU(t)})
	e := dev.Engine(0)
	var c completions
	for cause := CauseNone + 1; cause < NumHaltCauses; cause++ {
		txs := inFlight(t, dev, e, &c, 2)
		require.NoError(t, e.injectHalt(cause))
		assertStatus(t, &c, txs, StatusAborted)
		assertHaltPath(t, e, cause.String())
		var h *HaltError
		require.ErrorAs(t, e.HaltCause(), &h)
		assert.Equal(t, cause, h.Cause)
		assert.EqualValues(t, 1, e.Stats().Halts[cause])
	}
	st := e.Stats()
	assert.EqualValues(t, NumHaltCauses-1, st.Faults)
	assert.EqualValues(t, NumHaltCauses-1, st.Recoveries)
	assert.Zero(t, st.Halts[CauseNone])

	require.ErrorIs(t, e.injectHalt(CauseNone), ErrInvalid)
	require.ErrorIs(t, e.injectHalt(NumHaltCauses), ErrInvalid)
	require.NoError(t, e.Stop())
	require.ErrorIs(t, e.injectHalt(CauseHalt), ErrNotRunning)
}

func TestExplicitHaltEvents(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	for _, ev := range []sm.Event{sm.E60HwHalted, sm.E90SwHalted} {
		require.NoError(t, e.event(ev, "operator"))
		assert.Equal(t, sm.S99Running, e.state())
		h := e.history()
		assert.Equal(t, ev, h[len(h)-4].Event)
		assert.Equal(t, "operator", h[len(h)-4].Cause)
	}
	assert.EqualValues(t, 2, e.Stats().Halts[CauseHalt])
	require.ErrorIs(t, e.event(sm.NumEvents, ""), ErrInvalid)
	require.NoError(t, dev.Close())
	require.ErrorIs(t, e.event(sm.E30GoRunning, ""), ErrClosed)
	require.ErrorIs(t, e.injectHalt(CauseHalt), ErrClosed)
	assert.Equal(t, sm.S00HwDown, e.state())
	assert.Equal(t, "Close", e.history()[len(e.history())-1].Cause)
}

func TestFaultPlanHaltAt(t *testing.T) {
	dev, cs := engTestDevice(t, Config{Manual: true, RingSize: 64, Mapper: engTestIOMMU(t)})
	e := dev.Engine(0)
	var c completions
	// Six-byte packets: two descriptors each (data + pad). Descriptor 5 is the third packet's first.
	require.NoError(t, e.setFaults(faultPlan{HaltAt: 5, HaltCause: CauseGenMismatch}))
	txs := make([]*TxReq, 5)
	for i := range txs {
		txs[i] = new(TxReq)
		engTestBuild(t, dev, txs[i], 0, engTestPattern(6, byte(i)), &c)
		require.NoError(t, e.Send(nil, txs[i], false))
	}
	n, err := e.Process()
	var h *HaltError
	require.ErrorAs(t, err, &h)
	assert.Equal(t, CauseGenMismatch, h.Cause)
	assert.EqualValues(t, 4, h.Index, "the halt is at the third packet's first descriptor")
	assert.Equal(t, 2, n)
	assertStatus(t, &c, txs[:2], StatusOK)
	assertStatus(t, &c, txs[2:], StatusAborted)
	assert.Equal(t, 2, cs.Count())
	// Once only.
	more := inFlight(t, dev, e, &c, 4)
	_, err = e.Process()
	require.NoError(t, err)
	assertStatus(t, &c, more, StatusOK)

	// Every packet halts at rate 1; the engine still recovers each time.
	require.NoError(t, e.setFaults(faultPlan{HaltRate: 1, Seed: 1}))
	for i := 0; i < 20; i++ {
		tx := inFlight(t, dev, e, &c, 1)
		_, err = e.Process()
		require.ErrorIs(t, err, ErrHalted)
		assertStatus(t, &c, tx, StatusAborted)
	}
	st := e.Stats()
	assert.EqualValues(t, 21, st.Faults)
	assert.EqualValues(t, 21, st.Recoveries)
	var sum uint64
	for _, v := range st.Halts {
		sum += v
	}
	assert.Equal(t, st.Faults, sum)
	require.NoError(t, e.setFaults(faultPlan{}))
	_, err = e.Process()
	require.NoError(t, err)

	for _, bad := range []faultPlan{{HaltAt: -1}, {HaltRate: 2}, {HaltCause: NumHaltCauses}, {HaltRate: -0.5}} {
		err := e.setFaults(bad)
		assert.ErrorIs(t, err, ErrInvalid, "%+v", bad)
		var ce *ConfigError
		assert.True(t, errors.As(err, &ce))
	}
	_, err = NewDevice(Config{faults: faultPlan{HaltRate: 3}})
	assert.ErrorIs(t, err, ErrConfig)
}

// TestDeviceFreezeUnfreeze: the device-wide freeze (sdma_freeze_notify, sdma_freeze,
// sdma_unfreeze) moves every engine through s80 and s82 back to s99, aborting what each held;
// a link-down freeze leaves them idle until Start; an engine that is stopped ignores it all.
func TestDeviceFreezeUnfreeze(t *testing.T) {
	m := engTestIOMMU(t)
	dev, _ := engTestDevice(t, Config{Manual: true, Engines: 3, RingSize: 64, Mapper: m})
	var c completions
	require.NoError(t, dev.Engine(2).Stop())
	for _, linkDown := range []bool{false, true} {
		held := [][]*TxReq{inFlight(t, dev, dev.Engine(0), &c, 2), inFlight(t, dev, dev.Engine(1), &c, 3)}
		require.NoError(t, dev.freezeNotify(linkDown))
		for i := 0; i < 2; i++ {
			e := dev.Engine(i)
			assert.Equal(t, sm.S80HwFreeze, e.state(), "engine %d", i)
			assert.False(t, e.Running())
			_, ok := c.status(held[i][0])
			assert.False(t, ok, "FreezeNotify cleans nothing")
		}
		assert.Equal(t, sm.S00HwDown, dev.Engine(2).state(), "a stopped engine ignores the freeze")
		late := inFlightErr(t, dev, dev.Engine(0), &c, 1, ErrNotRunning)

		require.NoError(t, dev.freeze())
		for i := 0; i < 2; i++ {
			assert.Equal(t, sm.S82FreezeSwClean, dev.Engine(i).state(), "engine %d", i)
			assertStatus(t, &c, held[i], StatusAborted)
		}
		assertStatus(t, &c, late, StatusAborted)
		assert.Len(t, m.Live(), 1, "every mapping undone; the pad stays")

		require.NoError(t, dev.unfreeze())
		want := sm.S99Running
		if linkDown {
			want = sm.S20Idle
		}
		for i := 0; i < 2; i++ {
			e := dev.Engine(i)
			require.Equal(t, want, e.state(), "engine %d, link down %v", i, linkDown)
			if linkDown {
				require.NoError(t, e.Start())
			}
			ok := inFlight(t, dev, e, &c, 1)
			_, err := e.Process()
			require.NoError(t, err)
			assertStatus(t, &c, ok, StatusOK)
			assert.Zero(t, e.Stats().Faults, "a freeze is not a halt")
		}
		assert.Equal(t, sm.S00HwDown, dev.Engine(2).state())
	}
	assert.Zero(t, c.dup.Load())
	require.NoError(t, dev.Close())
	assert.ErrorIs(t, dev.freezeNotify(false), ErrClosed)
	assert.ErrorIs(t, dev.freeze(), ErrClosed)
	assert.ErrorIs(t, dev.unfreeze(), ErrClosed)
}

// TestSwCleanWaitsForReservedPublishConcurrent: a producer that has reserved its slots but not
// yet published them (the sw clean's ring close does not refuse a reservation already made) holds up the sw
// clean of a halt: the event returns only after the Publish, the txreq completes aborted exactly
// once, and the engine runs again.
func TestSwCleanWaitsForReservedPublishConcurrent(t *testing.T) {
	engTestNoLeak(t)
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	tx, c, sent, release := sendHeldAt(t, dev, e, func(h *engineTestHooks, hold func()) { h.reserved = hold })
	evDone := make(chan error, 1)
	go func() { evDone <- e.event(sm.E60HwHalted, "test") }()
	select {
	case err := <-evDone:
		t.Fatalf("the sw clean did not wait for the reservation's Publish (event: %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-sent)
	require.NoError(t, <-evDone)
	require.Eventually(t, func() bool { return c.n.Load() == 1 }, 5*time.Second, time.Millisecond)
	c.mu.Lock()
	st := c.seen[tx]
	c.mu.Unlock()
	assert.Equal(t, StatusAborted, st, "the txreq published during the clean completes aborted")
	assert.Zero(t, c.dup.Load(), "completed twice")

	sendsAgain(t, dev, e) // the engine runs again: a new packet completes OK
	require.NoError(t, dev.Close())
}

// TestStopFromIdleOrDownCompletesFlushList: Stop promises that everything in flight completes
// (the flush list aborted) and that waiters are woken before it returns. From s20 or s00 the
// table does only sdma_sw_tear_down (no sw clean), so on a Manual engine a txreq sent to the
// flush list stayed uncompleted and a parked waiter stayed parked after Stop, until the next
// Process or Poll (or Start). Stop now runs the flush worker's work itself.
func TestStopFromIdleOrDownCompletesFlushList(t *testing.T) {
	for _, path := range [][]sm.Event{{sm.E70GoIdle}, {sm.E00GoHwDown}} {
		dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
		e := dev.Engine(0)
		for _, ev := range path {
			require.NoError(t, e.event(ev, "setup"))
		}
		var c completions
		tx := new(TxReq)
		engTestBuild(t, dev, tx, 0, engTestPattern(8, 1), &c)
		require.ErrorIs(t, e.Send(nil, tx, false), ErrNotRunning)
		woken := 0
		var w IOWait
		w.Init(nil, func(_ *IOWait, _ int) { woken++ }, nil)
		require.True(t, must(e.QueueWait(&w, 1, true)))

		require.NoError(t, e.Stop())
		assert.Equal(t, sm.S00HwDown, e.state())
		st, ok := c.status(tx)
		assert.True(t, ok && st == StatusAborted, "from %v: flush-list txreq after Stop: %v %v", path, st, ok)
		assert.Equal(t, 1, woken, "from %v: parked waiter woken by Stop", path)
		require.NoError(t, dev.Close())
	}
}

// TestNotRunningErrorsSayWhat: InjectHalt and Process on an engine that is not running returned
// the bare ErrNotRunning, "engine not running; txreq flushed", Send's answer: nothing was
// flushed (no txreq is involved). They still match ErrNotRunning, and name the call.
func TestNotRunningErrorsSayWhat(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	require.NoError(t, e.Stop())
	ierr := e.injectHalt(CauseHalt)
	_, perr := e.Process()
	for name, err := range map[string]error{"InjectHalt": ierr, "Process": perr} {
		assert.ErrorIs(t, err, ErrNotRunning, name)
		if err != nil {
			assert.NotContains(t, err.Error(), "flushed", name)
			assert.Contains(t, err.Error(), name, name)
		}
	}
}
