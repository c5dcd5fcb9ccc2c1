package sdma

import (
	"fmt"
	"github.com/gosdma/gosdma/sdma/internal/sm"
	"time"
)

// stateAction is work the engine does after a transition, outside the table: the kernel's
// tasklets, workers and helper calls.
type stateAction uint16

const (
	actSwTearDown    stateAction = 1 << iota // sdma_sw_tear_down
	actHwCleanUp                             // sdma_start_hw_clean_up: the hw-clean task, which sends e25
	actSwCleanUp                             // tasklet_hi_schedule(sdma_sw_clean_up_task): sw clean, then e40
	actErrHaltWorker                         // schedule_work(err_halt_worker): wait for the halt, then e15
	actHwStartUp                             // sdma_hw_start_up: reset the ring, reload the generation
	actFreezeNotify                          // atomic_dec(sdma_unfreeze_count) + wake
	actUnfreezeDone                          // e40 in s82: this engine finished its freeze clean
	actProgress                              // need_progress: a final sdma_make_progress after the event
)

// Keeps or changes go_s99_running.
const (
	runKeep int8 = iota
	runSet
	runClear
)

// stay marks a table entry that does not change the state.
const stay sm.State = 0xff

// startUp marks an entry whose next state is s99 if go_s99_running, else s20 (after sdma_hw_start_up).
const startUp sm.State = 0xfe

// transition is one cell of the table.
type transition struct {
	to  sm.State    // next state, stay, or startUp
	run int8        // effect on go_s99_running, applied before the state change
	act stateAction // work to do after the change
}

// stateTable is the engine state machine, cell for cell the switch in hfi1's __sdma_process_event.
// A zero cell (to 0 = s00 with nothing else) never occurs by accident: every cell that does nothing
// is written {to: stay}. Entering a state also applies sdma_set_state's side effects (see enter).
//
// Rows are states, columns events e00 e10 e15 e25 e30 e40 e50 e60 e70 e80 e81 e82 e85 e90.
var stateTable = func() (t [sm.NumStates][sm.NumEvents]transition) {
	for s := range t {
		for e := range t[s] {
			t[s][e] = transition{to: stay}
		}
	}
	setRun := transition{to: stay, run: runSet}
	clrRun := transition{to: stay, run: runClear}
	down := func(act stateAction) transition { return transition{to: sm.S00HwDown, act: act} }
	haltWorker := transition{to: stay, act: actErrHaltWorker}

	// s00_hw_down: e30 sets go_s99_running and falls through to e10.
	t[sm.S00HwDown][sm.E10GoHwStart] = transition{to: sm.S10HwStartUpHaltWait}
	t[sm.S00HwDown][sm.E30GoRunning] = transition{to: sm.S10HwStartUpHaltWait, run: runSet}
	t[sm.S00HwDown][sm.E40SwCleaned] = transition{to: stay, act: actSwTearDown}

	// s10_hw_start_up_halt_wait
	t[sm.S10HwStartUpHaltWait][sm.E00GoHwDown] = down(actSwTearDown)
	t[sm.S10HwStartUpHaltWait][sm.E15HwHaltDone] = transition{to: sm.S15HwStartUpCleanWait, act: actHwCleanUp}
	t[sm.S10HwStartUpHaltWait][sm.E30GoRunning] = setRun
	t[sm.S10HwStartUpHaltWait][sm.E60HwHalted] = haltWorker
	t[sm.S10HwStartUpHaltWait][sm.E70GoIdle] = clrRun

	// s15_hw_start_up_clean_wait
	t[sm.S15HwStartUpCleanWait][sm.E00GoHwDown] = down(actSwTearDown)
	t[sm.S15HwStartUpCleanWait][sm.E25HwCleanUpDone] = transition{to: startUp, act: actHwStartUp}
	t[sm.S15HwStartUpCleanWait][sm.E30GoRunning] = setRun
	t[sm.S15HwStartUpCleanWait][sm.E70GoIdle] = clrRun

	// s20_idle: e85 falls through to e80 (without clearing go_s99_running, as in the kernel).
	t[sm.S20Idle][sm.E00GoHwDown] = down(actSwTearDown)
	t[sm.S20Idle][sm.E30GoRunning] = transition{to: sm.S99Running, run: runSet}
	t[sm.S20Idle][sm.E60HwHalted] = transition{to: sm.S50HwHaltWait, act: actErrHaltWorker}
	t[sm.S20Idle][sm.E80HwFreeze] = transition{to: sm.S80HwFreeze, act: actFreezeNotify}
	t[sm.S20Idle][sm.E85LinkDown] = transition{to: sm.S80HwFreeze, act: actFreezeNotify}

	// s30_sw_clean_up_wait
	t[sm.S30SwCleanUpWait][sm.E00GoHwDown] = down(0)
	t[sm.S30SwCleanUpWait][sm.E30GoRunning] = setRun
	t[sm.S30SwCleanUpWait][sm.E40SwCleaned] = transition{to: sm.S40HwCleanUpWait, act: actHwCleanUp}
	t[sm.S30SwCleanUpWait][sm.E70GoIdle] = clrRun
	t[sm.S30SwCleanUpWait][sm.E85LinkDown] = clrRun

	// s40_hw_clean_up_wait
	t[sm.S40HwCleanUpWait][sm.E00GoHwDown] = down(actSwCleanUp)
	t[sm.S40HwCleanUpWait][sm.E25HwCleanUpDone] = transition{to: startUp, act: actHwStartUp}
	t[sm.S40HwCleanUpWait][sm.E30GoRunning] = setRun
	t[sm.S40HwCleanUpWait][sm.E70GoIdle] = clrRun
	t[sm.S40HwCleanUpWait][sm.E85LinkDown] = clrRun

	// s50_hw_halt_wait
	t[sm.S50HwHaltWait][sm.E00GoHwDown] = down(actSwCleanUp)
	t[sm.S50HwHaltWait][sm.E15HwHaltDone] = transition{to: sm.S30SwCleanUpWait, act: actSwCleanUp}
	t[sm.S50HwHaltWait][sm.E30GoRunning] = setRun
	t[sm.S50HwHaltWait][sm.E60HwHalted] = haltWorker
	t[sm.S50HwHaltWait][sm.E70GoIdle] = clrRun
	t[sm.S50HwHaltWait][sm.E85LinkDown] = clrRun

	// s60_idle_halt_wait
	t[sm.S60IdleHaltWait][sm.E00GoHwDown] = down(actSwCleanUp)
	t[sm.S60IdleHaltWait][sm.E15HwHaltDone] = transition{to: sm.S30SwCleanUpWait, act: actSwCleanUp}
	t[sm.S60IdleHaltWait][sm.E30GoRunning] = setRun
	t[sm.S60IdleHaltWait][sm.E60HwHalted] = haltWorker
	t[sm.S60IdleHaltWait][sm.E70GoIdle] = clrRun

	// s80_hw_freeze
	t[sm.S80HwFreeze][sm.E00GoHwDown] = down(actSwCleanUp)
	t[sm.S80HwFreeze][sm.E30GoRunning] = setRun
	t[sm.S80HwFreeze][sm.E70GoIdle] = clrRun
	t[sm.S80HwFreeze][sm.E81HwFrozen] = transition{to: sm.S82FreezeSwClean, act: actSwCleanUp}

	// s82_freeze_sw_clean
	t[sm.S82FreezeSwClean][sm.E00GoHwDown] = down(actSwCleanUp)
	t[sm.S82FreezeSwClean][sm.E30GoRunning] = setRun
	t[sm.S82FreezeSwClean][sm.E40SwCleaned] = transition{to: stay, act: actUnfreezeDone}
	t[sm.S82FreezeSwClean][sm.E70GoIdle] = clrRun
	t[sm.S82FreezeSwClean][sm.E82HwUnfreeze] = transition{to: startUp, act: actHwStartUp}

	// s99_running: e60 asks for a final progress pass and falls through to e90; e85 clears
	// go_s99_running and falls through to e80. The kernel's e60 also calls
	// sdma_err_progress_check_schedule, whose body needs "!is_bx(sde->dd)": an A-step
	// workaround that, 10 jiffies later, halts with e90 every other running engine with
	// descriptors outstanding whose head has not moved. On the B-step chips the model is, it
	// does nothing, and neither does the model (TestHaltLeavesOtherEnginesAloneAsKernel).
	t[sm.S99Running][sm.E00GoHwDown] = down(actSwCleanUp)
	t[sm.S99Running][sm.E60HwHalted] = transition{to: sm.S50HwHaltWait, act: actErrHaltWorker | actProgress}
	t[sm.S99Running][sm.E90SwHalted] = transition{to: sm.S50HwHaltWait, act: actErrHaltWorker}
	t[sm.S99Running][sm.E70GoIdle] = transition{to: sm.S60IdleHaltWait}
	t[sm.S99Running][sm.E80HwFreeze] = transition{to: sm.S80HwFreeze, act: actFreezeNotify}
	t[sm.S99Running][sm.E85LinkDown] = transition{to: sm.S80HwFreeze, run: runClear, act: actFreezeNotify}

	return t
}()

// stateChange records one state change for diagnosis (sdmatest.History reports them).
type stateChange struct {
	From, To sm.State
	Event    sm.Event
	Cause    string    // why the event was raised (a halt cause, "Close", "user", …)
	At       time.Time // when it happened
}

// String formats the transition as "s99_running -e90_sw_halted-> s50_hw_halt_wait (cause)".
func (t stateChange) String() string {
	s := fmt.Sprintf("%v -%v-> %v", t.From, t.Event, t.To)
	if t.Cause != "" {
		s += " (" + t.Cause + ")"
	}
	return s
}

// historyLen is how many recent transitions an engine keeps.
const historyLen = 32

// stateMachine is the engine's state (hfi1: struct sdma_state). It is not safe for concurrent
// use: the engine serialises events under its state lock (the kernel holds tail_lock and head_lock).
type stateMachine struct {
	cur       sm.State
	goRunning bool                    // go_s99_running
	hist      [historyLen]stateChange // ring of recent transitions
	nhist     int                     // transitions recorded in all
}

// step applies event ev: the table cell, then sdma_set_state's side effects if the state changed.
// It returns the actions the engine must carry out, and whether the engine entered s99 from
// another state (the kernel calls sdma_flush then).
func (m *stateMachine) step(ev sm.Event, cause string) (acts stateAction, enteredRunning bool) {
	if ev >= sm.NumEvents {
		return 0, false
	}
	cell := stateTable[m.cur][ev]
	switch cell.run {
	case runSet:
		m.goRunning = true
	case runClear:
		m.goRunning = false
	}
	to := cell.to
	if to == startUp {
		to = sm.S20Idle
		if m.goRunning {
			to = sm.S99Running
		}
	}
	if to == stay {
		return cell.act, false
	}
	from := m.cur
	m.enter(to)
	m.hist[m.nhist%historyLen] = stateChange{From: from, To: to, Event: ev, Cause: cause, At: time.Now()}
	m.nhist++
	return cell.act, to == sm.S99Running && from != sm.S99Running
}

// enter is sdma_set_state's bookkeeping: go_s99_running is cleared on entering s00 or s60 and set
// on entering s99. (The SendDmaCtrl CSR writes that go with it have no software counterpart.)
func (m *stateMachine) enter(s sm.State) {
	switch s {
	case sm.S00HwDown, sm.S60IdleHaltWait:
		m.goRunning = false
	case sm.S99Running:
		m.goRunning = true
	}
	m.cur = s
}

// history returns the recorded transitions, oldest first, appended to dst.
func (m *stateMachine) history(dst []stateChange) []stateChange {
	n := m.nhist
	start := 0
	if n > historyLen {
		start = n - historyLen
	}
	for i := start; i < n; i++ {
		dst = append(dst, m.hist[i%historyLen])
	}
	return dst
}
