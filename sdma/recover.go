package sdma

import (
	"runtime"
	"strings"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/internal/splitmix"
	"github.com/gosdma/gosdma/sdma/internal/sm"
)

// Faults and recovery: the state machine of state.go wired into the engine.
//
// Every event goes through raise, with hwMu held, so the hardware model is not running while the
// engine changes state. raise applies the table cell under stMu and then carries out its actions
// on the caller's goroutine, feeding the events they produce back in, until the engine rests in a
// state that waits for the outside (s99, s20, s00, s80, s82). The kernel runs the same steps in
// its err_halt_worker, sw-clean tasklet and hw-clean tasklet; a software engine has no chip to wait
// for, so each step's "done" event follows at once:
//
//	actErrHaltWorker  the hardware model consumes only in s99, so it has stopped: e15
//	actSwCleanUp      the sw clean (swCleanLocked): e40
//	actHwCleanUp      nothing to clean in a software chip: e25
//	actHwStartUp      sdma_hw_start_up: the hardware head and generation restart with the ring at 0
//	entering s10, s60 the SendDmaCtrl halt op: the hardware halts, e60
//	entering s99      sdma_flush of the flush list, then waiters are woken (sdma_desc_avail)
//
// A halt of the hardware model (a descriptor the chip rejects, an injected fault, sdmatest.InjectHalt, an
// explicit e60 or e90) therefore runs s99 → s50 → s30 → s40 → s99 inside the call that caused it:
// the packets the hardware finished complete OK, the rest of the ring and the flush list complete
// aborted, every parked waiter is woken, the ring restarts at index 0 (generation 0) and the
// engine runs again.

// evItem is a queued event of raise.
type evItem struct {
	ev    sm.Event
	cause string
	halt  *HaltError // the hardware's reason for an e60, or nil
}

// raise feeds ev to the state machine and carries out what the table asks until the engine
// rests (hfi1: sdma_process_event, with the workers and tasklets it schedules run at once). h is
// the hardware's halt record for an e60 (nil otherwise: an explicit event). hwMu held.
func (e *Engine) raise(ev sm.Event, cause string, h *HaltError) {
	var q [8]evItem // the chains are short: an event queues at most two more
	q[0] = evItem{ev, cause, h}
	for head, tail := 0, 1; head != tail; head++ {
		it := q[head%len(q)]
		for _, nx := range e.apply(it) {
			if nx.ev == sm.NumEvents {
				break
			}
			q[tail%len(q)] = nx
			tail++
		}
	}
	if e.sm.cur == sm.S99Running {
		// sdma_process_event's last step: in s99 after any event, sdma_desc_avail with the
		// free room wakes the waiters that fit (after entering s99 the list is empty already:
		// apply woke every waiter).
		e.lockHeadHW()
		e.wakeAvail()
		e.unlockHeadHW()
	}
}

// apply is one step of raise: the table cell, then its actions. It returns the events the actions
// raise (numEvents marks an unused entry). hwMu held.
func (e *Engine) apply(it evItem) (next [2]evItem) {
	next[0].ev, next[1].ev = sm.NumEvents, sm.NumEvents
	e.stMu.Lock()
	from := e.sm.cur
	acts, entered := e.sm.step(it.ev, it.cause)
	to := e.sm.cur
	if from == sm.S99Running && to != sm.S99Running {
		// Producers stop at the gate before anything is cleaned up (quiesce waits for the
		// ones already past it).
		e.gate.And(^gateRunning)
	}
	e.stMu.Unlock()

	if to == sm.S50HwHaltWait && from != sm.S50HwHaltWait {
		e.recordHalt(it)
	}
	n := 0
	push := func(ev sm.Event, cause string) {
		next[n] = evItem{ev: ev, cause: cause}
		n++
	}
	if acts&actProgress != 0 {
		e.makeProgressHW() // the final sdma_make_progress of an e60 in s99
	}
	if acts&actErrHaltWorker != 0 {
		push(sm.E15HwHaltDone, "hardware halted") // sdma_err_halt_wait: the model already stopped
	}
	if acts&actSwCleanUp != 0 {
		e.swCleanLocked()
		push(sm.E40SwCleaned, "sw clean done")
	}
	if acts&actHwCleanUp != 0 {
		push(sm.E25HwCleanUpDone, "hw clean done")
	}
	if acts&actHwStartUp != 0 {
		e.hwStartUp()
	}
	if to != from && (to == sm.S10HwStartUpHaltWait || to == sm.S60IdleHaltWait) {
		push(sm.E60HwHalted, "halt op") // SendDmaCtrl halt on entering s10 or s60: the chip halts
	}
	if entered {
		if from == sm.S40HwCleanUpWait {
			e.stats.recoveries.Add(1)
		}
		e.ring.Open() // closed by the sw clean's quiesce (if any): before the gate lets producers in
		e.gate.Or(gateRunning)
		e.lockHeadHW()
		e.flushSection()  // sdma_flush on entering s99 (the ring is empty after the start-up)
		e.wakeAllLocked() // sdma_flush's wakeups, and sdma_desc_avail for the room of a fresh ring
		e.unlockHeadHW()
		e.ringBell() // a hardware goroutine parked while the engine was not running looks again
	}
	return next
}

// recordHalt counts a halt by cause and records it (entering s50_hw_halt_wait). hwMu held.
func (e *Engine) recordHalt(it evItem) {
	h := it.halt
	if h == nil {
		h = &HaltError{Engine: e.idx, Cause: CauseHalt, Index: e.hwHead(), Desc: e.headDesc(),
			Detail: "explicit " + it.ev.String() + ": " + it.cause}
	}
	e.haltCause.Store(h)
	e.stats.faults.Add(1)
	if h.Cause >= 0 && h.Cause < NumHaltCauses {
		e.stats.halts[h.Cause].Add(1)
	}
}

// hwStartUp restarts the hardware model (hfi1: sdma_hw_start_up: sdma_setlengen restarts the
// generation with a tail of 0, *head_dma = 0; the count of descriptors toward the count interrupt
// restarts, and its register keeps what the last interrupt loaded, 0 if none came yet, as
// sdma_hw_start_up does not write SendDmaDescCnt). The sw clean left
// the ring empty at index 0; an engine that never ran is there too. hwMu held.
func (e *Engine) hwStartUp() {
	r := e.ring
	if r.Tail() != 0 || !r.Empty() {
		e.swCleanLocked() // not reached by the table's paths; keeps the restart safe regardless
	}
	e.hw.head.Store(r.Tail())
	e.hw.sinceIntr = 0
	e.dropCountReload()
	e.hw.idle = true
}

// quiesce waits until no producer is between its gate check and its Publish, or on its way to
// the flush list: it closes the ring (ring.Close: from then on every reservation is refused, and
// a producer refused looks at the gate again and backs off, see sendBatch), waits until no
// producer is between its gate check and the flush list (inflight, flushFront), and then until
// every reservation made before the close is published (the tail reaches the reservation index,
// which nothing moves any more). The caller has cleared the gate's running bit (or set gateDown)
// first, so no new producer gets past the gate; the ring stays closed, through the sw clean's
// Reset, until apply opens it on entering s99. hwMu held.
func (e *Engine) quiesce() {
	r := e.ring
	r.Close()
	for i := 0; e.inflight.Load() != 0; i++ {
		backoffSpin(i)
	}
	for i := 0; r.Tail() != r.Reserved(); i++ {
		backoffSpin(i)
	}
}

// backoffSpin is the waiting of quiesce's loops: spin a little, then yield.
func backoffSpin(i int) {
	if i >= 64 {
		runtime.Gosched()
	}
}

// state returns the engine's state (hfi1: sde->state.current_state; sdmatest.EngineState).
func (e *Engine) state() sm.State {
	e.stMu.Lock()
	s := e.sm.cur
	e.stMu.Unlock()
	return s
}

// history returns the engine's recent state transitions, oldest first (sdmatest.History).
func (e *Engine) history() []stateChange {
	e.stMu.Lock()
	defer e.stMu.Unlock()
	return e.sm.history(make([]stateChange, 0, min(e.sm.nhist, historyLen)))
}

// event raises ev on the engine, with cause recorded in the history (hfi1: sdma_process_event),
// and returns once the engine rests again (sdmatest.RaiseEvent documents it for its callers).
// ErrInvalid for an unknown event, or when called on the engine's own goroutine (from a Sink, a
// completion callback or a wakeup it runs: it would wait for itself) or from a callback that
// another call runs for this engine on the caller's goroutine (an event's sw clean, Close's; see
// host.go), or that Process or Poll runs (see Device.Close); ErrClosed once the device is
// closing. It waits for a hardware pass in progress.
func (e *Engine) event(ev sm.Event, cause string) error {
	if ev >= sm.NumEvents {
		return txErr("Event", ErrInvalid, "unknown event "+ev.String())
	}
	if err := e.ownPass("Event"); err != nil {
		return err
	}
	defer e.hosts.remove(e.hosts.add(hostEvent))
	e.hwMu.Lock()
	defer e.hwMu.Unlock()
	if e.gate.Load()&gateDown != 0 {
		return ErrClosed
	}
	if e.hwGone.Load() {
		return e.goneEvent(ev, cause)
	}
	e.raise(ev, cause, nil)
	if ev == sm.E00GoHwDown {
		// Stop's promise from every state: the table's e00 from s00, s10, s15 or s20 runs no sw
		// clean (sdma_sw_tear_down only), leaving the flush list and the parked waiters to the
		// flush worker (sdma_field_flush), which a Manual engine runs only at its next Process
		// or Poll. Run it now (the ring is empty in s00: nothing to defer it for).
		e.runFlushHW()
	}
	return nil
}

// Stop takes the engine down (e00_go_hw_down, s00_hw_down): everything in flight completes (as
// the sw clean does it: a txreq whose packet the hardware already sent StatusOK, every other one
// in the ring or on the flush list StatusAborted), waiters are woken, and sends get ErrNotRunning
// until Start. ErrInvalid on the engine's
// own goroutine (from a Sink or a callback it runs) and from a callback that another call (an
// event, Close, SendWait, Process, Poll, ...) runs for this engine on its caller's goroutine (see
// Device.Close), ErrClosed once the device is closing.
func (e *Engine) Stop() error { return e.event(sm.E00GoHwDown, "Stop") }

// Start starts a stopped or idle engine (e30_go_running): from s00 through the start-up states,
// from s20 at once, to s99. Errors as Stop's.
func (e *Engine) Start() error { return e.event(sm.E30GoRunning, "Start") }

// injectHalt makes the hardware model halt now, before its next packet, with cause c, and
// returns after the engine recovered (sdmatest.InjectHalt documents it). ErrNotRunning if the
// engine is not running, ErrInvalid for an unknown cause or CauseNone or on the engine's own
// goroutine (a Sink, a callback: it would wait for itself), ErrClosed once closing.
func (e *Engine) injectHalt(c HaltCause) error {
	if c <= CauseNone || c >= NumHaltCauses {
		return txErr("InjectHalt", ErrInvalid, "unknown halt cause "+c.String())
	}
	if err := e.ownPass("InjectHalt"); err != nil {
		return err
	}
	defer e.hosts.remove(e.hosts.add(hostEvent))
	e.hwMu.Lock()
	defer e.hwMu.Unlock()
	if e.gate.Load()&gateDown != 0 {
		return ErrClosed
	}
	if e.sm.cur != sm.S99Running {
		return errInjectNotRunning // not the bare ErrNotRunning: nothing was flushed
	}
	e.halt(e.injectedHalt(c, "injected by InjectHalt"))
	return nil
}

// errInjectNotRunning is InjectHalt's refusal of an engine that is not running, and
// errProcessNotRunning Process's answer there: both match ErrNotRunning, whose own text ("txreq
// flushed") is Send's.
var (
	errInjectNotRunning  = &TxError{Op: "InjectHalt", Reason: "engine not running: nothing to halt", Err: ErrNotRunning}
	errProcessNotRunning = &TxError{Op: "Process", Reason: "engine not running: the hardware reads nothing", Err: ErrNotRunning}
)

// injectedHalt builds the record of an injected halt at the hardware's head. hwMu held.
func (e *Engine) injectedHalt(c HaltCause, detail string) *HaltError {
	return &HaltError{Engine: e.idx, Cause: c, Index: e.hwHead(), Desc: e.headDesc(), Detail: detail}
}

// headDesc returns the descriptor at the hardware's head for a halt's record, if it is published
// (the tail, load-acquire, is past the head), else the zero descriptor: a slot at or past the
// tail is free or a producer's, which may be writing it (reading it would be a data race).
// hwMu held.
func (e *Engine) headDesc() desc.Desc {
	if e.ring.Tail() == e.hwHead() {
		return desc.Desc{}
	}
	return e.ring.Slot(e.hwHead())
}

// faultPlan is a plan of halts for an engine's hardware model (sdmatest.FaultPlan, which
// documents the fields; Config.faults for in-package tests). The zero value injects nothing.
type faultPlan struct {
	HaltAt    int
	HaltCause HaltCause
	HaltRate  float64
	Seed      uint64
}

// validate checks p's fields.
func (p faultPlan) validate() error {
	if p.HaltAt < 0 {
		return configErr("Faults.HaltAt", p.HaltAt, "want 0 (never) or the descriptor count to halt at")
	}
	if p.HaltCause < CauseNone || p.HaltCause >= NumHaltCauses {
		return configErr("Faults.HaltCause", p.HaltCause, "want a HaltCause")
	}
	if !(p.HaltRate >= 0 && p.HaltRate <= 1) {
		return configErr("Faults.HaltRate", p.HaltRate, "want a probability, 0..1")
	}
	return nil
}

// faultState is a faultPlan being carried out. Guarded by hwMu.
type faultState struct {
	active    bool   // any fault planned: the hardware model looks at the rest
	haltAt    uint64 // descriptors to read before the planned halt; 0: none planned
	seen      uint64 // descriptors read since the plan was set
	haltCause HaltCause
	threshold uint64 // a draw below it halts; 0: no random halts
	rng       uint64 // splitmix64 state
}

// setFaults replaces the engine's fault plan (sdmatest.SetFaults) without taking a lock: it
// stores the plan in faultsNext and sets pendFaults, and the next hardware pass to start takes it
// (takeFaults) before it reads a descriptor. The plan is read only by passes, so for a caller
// outside a pass this is as if it had waited for hwMu and set it (a pass running meanwhile on
// another goroutine goes on with the old plan, as it did before the lock was released); from a
// Sink, a completion or a wakeup that a pass runs (on the engine's goroutine, under a Stop or
// a SendWait, or under the caller's own Process or Poll, which hold hwMu), the plan takes effect
// at the next pass, where waiting for hwMu deadlocked. ErrInvalid (a *ConfigError) for a bad
// plan, which changes nothing.
func (e *Engine) setFaults(p faultPlan) error {
	if err := p.validate(); err != nil {
		if ce, ok := err.(*ConfigError); ok { // the caller's field is sdmatest.FaultPlan's, not a Config's
			ce.Field = faultPlanField + strings.TrimPrefix(ce.Field, "Faults.")
		}
		return err
	}
	e.faultsNext.Store(&p)
	e.pending.Or(pendFaults) // after the store: a pass that sees the bit finds this plan or a later one
	return nil
}

// takeFaults makes the plan that setFaults left the engine's, at the start of a pass. The bit is
// cleared before the plan is taken: a setFaults meanwhile stores its plan (taken now, or by the
// next pass) and then sets the bit again (the next pass then finds nil, or its plan). hwMu held.
func (e *Engine) takeFaults() {
	e.pending.And(^pendFaults)
	if p := e.faultsNext.Swap(nil); p != nil {
		e.setFaultsLocked(*p)
	}
}

// setFaultsLocked makes p the engine's fault plan, its descriptor count starting now. hwMu held,
// or the engine not running yet (NewDevice).
func (e *Engine) setFaultsLocked(p faultPlan) {
	f := faultState{haltAt: uint64(p.HaltAt), haltCause: p.HaltCause, rng: p.Seed + uint64(e.idx)}
	if f.haltCause == CauseNone {
		f.haltCause = CauseHalt
	}
	f.threshold = splitmix.Threshold(p.HaltRate)
	f.active = f.haltAt > 0 || f.threshold > 0
	e.hw.faults = f
}

// plannedHalt is the fault plan's check before the packet at ring index head: a halt record, or
// nil. hwMu held.
func (e *Engine) plannedHalt() *HaltError {
	f := &e.hw.faults
	if f.haltAt > 0 && f.seen+1 >= f.haltAt {
		f.haltAt = 0
		f.active = f.threshold > 0
		return e.injectedHalt(f.haltCause, "injected by FaultPlan.HaltAt")
	}
	if f.threshold > 0 {
		x := splitmix.Next(&f.rng)
		if x>>1 < f.threshold {
			c := CauseNone + 1 + HaltCause(splitmix.Mix(x)%uint64(NumHaltCauses-1))
			return e.injectedHalt(c, "injected by FaultPlan.HaltRate")
		}
	}
	return nil
}
