package sdma

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gosdma/gosdma/sdma/internal/sm"
)

// kernelSM is a second, independent port of hfi1's __sdma_process_event and sdma_set_state
// (drivers/infiniband/hw/hfi1/sdma.c): kernelSwitch, written case by case from the kernel's
// switch rather than from stateTable, so that the two can be compared cell by cell. It records
// what the kernel does as the same stateAction bits, plus whether sdma_set_state called
// sdma_flush.
type kernelSM struct {
	cur     sm.State
	goRun   bool
	acts    stateAction
	flushed bool // sdma_set_state entered s99 from another state: sdma_flush
	moved   bool // sdma_set_state was called
}

// setState is sdma_set_state: sdma_flush on entering s99 from another state, then the action
// table's go_s99_running_tofalse (s00, s60) and go_s99_running_totrue (s99).
func (k *kernelSM) setState(next sm.State) {
	prev := k.cur
	k.cur = next
	k.moved = true
	if prev != sm.S99Running && next == sm.S99Running {
		k.flushed = true
	}
	switch next {
	case sm.S00HwDown, sm.S60IdleHaltWait:
		k.goRun = false
	case sm.S99Running:
		k.goRun = true
	}
}

// upState is the kernel's "sdma_set_state(sde, ss->go_s99_running ? s99 : s20)".
func (k *kernelSM) upState() sm.State {
	if k.goRun {
		return sm.S99Running
	}
	return sm.S20Idle
}

// event is __sdma_process_event: the case kernelSwitch names for the state and event, if any.
func (k *kernelSM) event(ev sm.Event) {
	k.acts, k.flushed, k.moved = 0, false, false
	c, ok := kernelSwitch[k.cur][ev]
	if !ok {
		return // "break"
	}
	switch c.run {
	case kSet:
		k.goRun = true
	case kClear:
		k.goRun = false
	}
	k.acts |= c.act
	switch {
	case c.to == kUp:
		k.setState(k.upState())
	case c.to != kStay:
		k.setState(sm.State(c.to - 1))
	}
}

// kto is where a case moves the engine: nowhere (kStay: no sdma_set_state), to a state (moveTo),
// or kUp (sdma_set_state(sde, ss->go_s99_running ? s99 : s20)).
type kto uint8

const (
	kStay kto = 0
	kUp   kto = 0xff
)

func moveTo(s sm.State) kto { return kto(s) + 1 }

// go_s99_running in a case: kept, set (kSet) or cleared (kClear), before sdma_set_state.
const (
	kSet   int8 = 1
	kClear int8 = -1
)

// kcase is one case of a state's switch: what it does to go_s99_running, the work it starts (as
// stateAction bits; need_progress is actProgress), and where it moves the engine.
type kcase struct {
	run int8
	act stateAction
	to  kto
}

// kernelSwitch is __sdma_process_event's switch (drivers/infiniband/hw/hfi1/sdma.c), state by
// state and case by case as the kernel writes them, fall-throughs merged into the case they
// start from. An event a state does not name is a "break" in the kernel too (every state lists
// all fourteen).
var kernelSwitch = func() [sm.NumStates]map[sm.Event]kcase {
	down := func(act stateAction) kcase { return kcase{act: act, to: moveTo(sm.S00HwDown)} }
	// goFlag adds the e30 and e70 cases of every state but s00, s20 and s99: go_s99_running set
	// (e30) or cleared (e70), nothing else.
	goFlag := func(m map[sm.Event]kcase) map[sm.Event]kcase {
		m[sm.E30GoRunning] = kcase{run: kSet}
		m[sm.E70GoIdle] = kcase{run: kClear}
		return m
	}
	return [sm.NumStates]map[sm.Event]kcase{
		sm.S00HwDown: {
			sm.E30GoRunning: {run: kSet, to: moveTo(sm.S10HwStartUpHaltWait)}, // falls through to e10
			sm.E10GoHwStart: {to: moveTo(sm.S10HwStartUpHaltWait)},
			sm.E40SwCleaned: {act: actSwTearDown},
		},
		sm.S10HwStartUpHaltWait: goFlag(map[sm.Event]kcase{
			sm.E00GoHwDown:   down(actSwTearDown),
			sm.E15HwHaltDone: {act: actHwCleanUp, to: moveTo(sm.S15HwStartUpCleanWait)},
			sm.E60HwHalted:   {act: actErrHaltWorker},
		}),
		sm.S15HwStartUpCleanWait: goFlag(map[sm.Event]kcase{
			sm.E00GoHwDown:      down(actSwTearDown),
			sm.E25HwCleanUpDone: {act: actHwStartUp, to: kUp},
		}),
		sm.S20Idle: {
			sm.E00GoHwDown:  down(actSwTearDown),
			sm.E30GoRunning: {run: kSet, to: moveTo(sm.S99Running)},
			sm.E60HwHalted:  {act: actErrHaltWorker, to: moveTo(sm.S50HwHaltWait)},
			sm.E85LinkDown:  {act: actFreezeNotify, to: moveTo(sm.S80HwFreeze)}, // falls through, go_s99_running untouched
			sm.E80HwFreeze:  {act: actFreezeNotify, to: moveTo(sm.S80HwFreeze)},
		},
		sm.S30SwCleanUpWait: goFlag(map[sm.Event]kcase{
			sm.E00GoHwDown:  down(0),
			sm.E40SwCleaned: {act: actHwCleanUp, to: moveTo(sm.S40HwCleanUpWait)},
			sm.E85LinkDown:  {run: kClear},
		}),
		sm.S40HwCleanUpWait: goFlag(map[sm.Event]kcase{
			sm.E00GoHwDown:      down(actSwCleanUp),
			sm.E25HwCleanUpDone: {act: actHwStartUp, to: kUp},
			sm.E85LinkDown:      {run: kClear},
		}),
		sm.S50HwHaltWait: goFlag(map[sm.Event]kcase{
			sm.E00GoHwDown:   down(actSwCleanUp),
			sm.E15HwHaltDone: {act: actSwCleanUp, to: moveTo(sm.S30SwCleanUpWait)},
			sm.E60HwHalted:   {act: actErrHaltWorker},
			sm.E85LinkDown:   {run: kClear},
		}),
		sm.S60IdleHaltWait: goFlag(map[sm.Event]kcase{
			sm.E00GoHwDown:   down(actSwCleanUp),
			sm.E15HwHaltDone: {act: actSwCleanUp, to: moveTo(sm.S30SwCleanUpWait)},
			sm.E60HwHalted:   {act: actErrHaltWorker},
		}),
		sm.S80HwFreeze: goFlag(map[sm.Event]kcase{
			sm.E00GoHwDown: down(actSwCleanUp),
			sm.E81HwFrozen: {act: actSwCleanUp, to: moveTo(sm.S82FreezeSwClean)},
		}),
		sm.S82FreezeSwClean: goFlag(map[sm.Event]kcase{
			sm.E00GoHwDown:   down(actSwCleanUp),
			sm.E40SwCleaned:  {act: actUnfreezeDone},
			sm.E82HwUnfreeze: {act: actHwStartUp, to: kUp},
		}),
		sm.S99Running: {
			sm.E00GoHwDown: down(actSwCleanUp),
			sm.E60HwHalted: {act: actErrHaltWorker | actProgress, to: moveTo(sm.S50HwHaltWait)}, // need_progress, falls through to e90
			sm.E90SwHalted: {act: actErrHaltWorker, to: moveTo(sm.S50HwHaltWait)},
			sm.E70GoIdle:   {to: moveTo(sm.S60IdleHaltWait)},
			sm.E85LinkDown: {run: kClear, act: actFreezeNotify, to: moveTo(sm.S80HwFreeze)}, // falls through to e80
			sm.E80HwFreeze: {act: actFreezeNotify, to: moveTo(sm.S80HwFreeze)},
		},
	}
}()

// KernelCell is kernelSwitch's case for s and ev in the form the fault soak's model of the
// engine reads (faultsoak_test.go, package sdma_test): the next state (s if the case does not
// move the engine); up if it is instead s99 when go_s99_running, else s20 (after
// sdma_hw_start_up); the effect on go_s99_running (+1 sets it, -1 clears it, 0 keeps it); and the
// work started, as letters: T sw tear-down, C hw clean, S sw clean, H err_halt_worker,
// U sdma_hw_start_up, F freeze notify, D unfreeze done, P a final sdma_make_progress.
func KernelCell(s sm.State, ev sm.Event) (to sm.State, up bool, goSet int, acts string) {
	c := kernelSwitch[s][ev]
	switch c.to {
	case kStay:
		to = s
	case kUp:
		up = true
	default:
		to = sm.State(c.to - 1)
	}
	for i, letter := range "TCSHUFDP" { // the stateAction bits in order
		if c.act&(1<<i) != 0 {
			acts += string(letter)
		}
	}
	return to, up, int(c.run), acts
}

// TestStateTableMatchesKernel walks every event in every state, with go_s99_running clear and
// set, through stateMachine.step and through kernelSM, and compares the next state, the flag,
// the work started, whether a transition was recorded, and whether sdma_flush runs.
func TestStateTableMatchesKernel(t *testing.T) {
	for s := sm.S00HwDown; s < sm.NumStates; s++ {
		for _, g := range []bool{false, true} {
			for ev := sm.E00GoHwDown; ev < sm.NumEvents; ev++ {
				name := fmt.Sprintf("%v(go=%v)+%v", s, g, ev)
				k := kernelSM{cur: s, goRun: g}
				k.event(ev)
				m := stateMachine{cur: s, goRunning: g}
				acts, entered := m.step(ev, "test")
				if m.cur != k.cur {
					t.Errorf("%s: state %v, kernel %v", name, m.cur, k.cur)
				}
				if m.goRunning != k.goRun {
					t.Errorf("%s: go_s99_running %v, kernel %v", name, m.goRunning, k.goRun)
				}
				if acts != k.acts {
					t.Errorf("%s: actions %#x, kernel %#x", name, acts, k.acts)
				}
				if entered != k.flushed {
					t.Errorf("%s: entered s99 %v, kernel sdma_flush %v", name, entered, k.flushed)
				}
				if rec := m.nhist == 1; rec != k.moved {
					t.Errorf("%s: transition recorded %v, kernel sdma_set_state called %v", name, rec, k.moved)
				}
			}
		}
	}
}

// kernelRest runs kernelSM from (s, goRun) through ev and every event the work it starts sends,
// as the kernel's workers and tasklets do once they have run, and the chip's halt interrupt after
// a SendDmaCtrl halt op (entering s10 or s60): the state the engine rests in, and its flag.
func kernelRest(s sm.State, goRun bool, ev sm.Event) (sm.State, bool) {
	st, g, _ := kernelChain(s, goRun, ev)
	return st, g
}

// kernelChain is kernelRest, also reporting whether the chain ran a sw clean
// (sdma_sw_clean_up_task: the ring's txreqs complete, OK up to the hardware head, the rest
// aborted).
func kernelChain(s sm.State, goRun bool, ev sm.Event) (_ sm.State, _ bool, swClean bool) {
	k := kernelSM{cur: s, goRun: goRun}
	q := []sm.Event{ev}
	for len(q) > 0 {
		ev, q = q[0], q[1:]
		from := k.cur
		k.event(ev)
		if k.acts&actErrHaltWorker != 0 {
			q = append(q, sm.E15HwHaltDone) // sdma_err_halt_wait
		}
		if k.acts&actSwCleanUp != 0 {
			swClean = true
			q = append(q, sm.E40SwCleaned) // sdma_sw_clean_up_task
		}
		if k.acts&actHwCleanUp != 0 {
			q = append(q, sm.E25HwCleanUpDone) // sdma_hw_clean_up_task
		}
		if k.cur != from && (k.cur == sm.S10HwStartUpHaltWait || k.cur == sm.S60IdleHaltWait) {
			q = append(q, sm.E60HwHalted) // op_halt: the chip halts and interrupts
		}
	}
	return k.cur, k.goRun, swClean
}

// restingStates are the states an engine rests in between calls (the others pass at once:
// recover.go), with the events that bring a fresh (running) engine there.
var restingStates = []struct {
	s    sm.State
	goRn bool
	path []sm.Event
}{
	{sm.S99Running, true, nil},
	{sm.S00HwDown, false, []sm.Event{sm.E00GoHwDown}},
	{sm.S20Idle, false, []sm.Event{sm.E70GoIdle}},
	{sm.S80HwFreeze, true, []sm.Event{sm.E80HwFreeze}},
	{sm.S80HwFreeze, false, []sm.Event{sm.E85LinkDown}},
	{sm.S82FreezeSwClean, true, []sm.Event{sm.E80HwFreeze, sm.E81HwFrozen}},
	{sm.S82FreezeSwClean, false, []sm.Event{sm.E85LinkDown, sm.E81HwFrozen}},
}

// TestEngineEveryEventEveryRestingState drives a real engine into each state it can rest in
// (and each go_s99_running it can rest with), raises every event, and compares the state it
// rests in afterwards, and its go_s99_running, with the kernel's once its workers have run; then
// checks that a send is accepted exactly when the engine is in s99.
func TestEngineEveryEventEveryRestingState(t *testing.T) {
	for _, rs := range restingStates {
		for ev := sm.E00GoHwDown; ev < sm.NumEvents; ev++ {
			name := fmt.Sprintf("%v(go=%v)+%v", rs.s, rs.goRn, ev)
			dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
			e := dev.Engine(0)
			for _, p := range rs.path {
				if err := e.event(p, "setup"); err != nil {
					t.Fatalf("%s: setup %v: %v", name, p, err)
				}
			}
			if e.state() != rs.s || e.sm.goRunning != rs.goRn {
				t.Fatalf("%s: setup rests in %v go=%v", name, e.state(), e.sm.goRunning)
			}
			wantS, wantG := kernelRest(rs.s, rs.goRn, ev)
			if err := e.event(ev, "test"); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := e.state(); got != wantS || e.sm.goRunning != wantG {
				t.Errorf("%s: rests in %v go=%v, kernel %v go=%v", name, got, e.sm.goRunning, wantS, wantG)
			}
			if e.Running() != (wantS == sm.S99Running) {
				t.Errorf("%s: Running %v in %v", name, e.Running(), wantS)
			}
			var c completions
			tx := new(TxReq)
			engTestBuild(t, dev, tx, 0, engTestPattern(8, 1), &c)
			err := e.Send(nil, tx, false)
			if wantS == sm.S99Running {
				if err != nil {
					t.Errorf("%s: Send in s99: %v", name, err)
				}
				if _, err := e.Process(); err != nil {
					t.Errorf("%s: Process: %v", name, err)
				}
				e.Poll()
				if st, ok := c.status(tx); !ok || st != StatusOK {
					t.Errorf("%s: txreq sent in s99: %v %v", name, st, ok)
				}
			} else {
				if !errors.Is(err, ErrNotRunning) {
					t.Errorf("%s: Send in %v: %v, want ErrNotRunning", name, wantS, err)
				}
				e.Poll() // the flush worker's turn: the flush list completes aborted
				if st, ok := c.status(tx); !ok || st != StatusAborted {
					t.Errorf("%s: txreq sent in %v: %v %v, want aborted", name, wantS, st, ok)
				}
			}
			_ = dev.Close()
		}
	}
}

// TestEngineEventFatesOfRingTxreqs: with txreqs in the ring, some the hardware has sent (not yet
// completed: CompletePoll) and some it has not, every event in s99 and in s80 (frozen with the
// ring held) leaves them as the kernel does: a chain that runs the sw clean completes the sent
// ones OK and the rest aborted before the call returns; any other leaves all of them in flight.
func TestEngineEventFatesOfRingTxreqs(t *testing.T) {
	for _, from := range []struct {
		s    sm.State
		path []sm.Event
	}{{sm.S99Running, nil}, {sm.S80HwFreeze, []sm.Event{sm.E80HwFreeze}}} {
		for ev := sm.E00GoHwDown; ev < sm.NumEvents; ev++ {
			name := fmt.Sprintf("%v+%v", from.s, ev)
			dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64, Completion: CompletePoll})
			e := dev.Engine(0)
			var c completions
			sent := inFlight(t, dev, e, &c, 3)
			if _, err := e.Process(); err != nil {
				t.Fatal(err)
			}
			queued := inFlight(t, dev, e, &c, 2)
			for _, p := range from.path {
				if err := e.event(p, "setup"); err != nil {
					t.Fatal(err)
				}
			}
			_, _, clean := kernelChain(from.s, true, ev)
			if err := e.event(ev, "test"); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for i, tx := range append(append([]*TxReq(nil), sent...), queued...) {
				st, ok := c.status(tx)
				want := StatusOK
				if i >= len(sent) {
					want = StatusAborted
				}
				switch {
				case clean && (!ok || st != want):
					t.Errorf("%s: txreq %d: %v %v, want %v (the sw clean ran)", name, i, st, ok, want)
				case !clean && ok && !(ev == sm.E60HwHalted && from.s == sm.S99Running && i < len(sent)):
					t.Errorf("%s: txreq %d completed %v with no sw clean", name, i, st)
				}
			}
			_ = dev.Close()
		}
	}
}
