package sdma

import (
	"fmt"
	"time"
)

// State is an SDMA engine state (hfi1: enum sdma_states).
type State uint8

// The eleven engine states of hfi1's sdma.c.
const (
	S00HwDown             State = iota // sdma_state_s00_hw_down
	S10HwStartUpHaltWait               // sdma_state_s10_hw_start_up_halt_wait
	S15HwStartUpCleanWait              // sdma_state_s15_hw_start_up_clean_wait
	S20Idle                            // sdma_state_s20_idle
	S30SwCleanUpWait                   // sdma_state_s30_sw_clean_up_wait
	S40HwCleanUpWait                   // sdma_state_s40_hw_clean_up_wait
	S50HwHaltWait                      // sdma_state_s50_hw_halt_wait
	S60IdleHaltWait                    // sdma_state_s60_idle_halt_wait
	S80HwFreeze                        // sdma_state_s80_hw_freeze
	S82FreezeSwClean                   // sdma_state_s82_freeze_sw_clean
	S99Running                         // sdma_state_s99_running
	numStates
)

var stateNames = [numStates]string{
	"s00_hw_down", "s10_hw_start_up_halt_wait", "s15_hw_start_up_clean_wait", "s20_idle",
	"s30_sw_clean_up_wait", "s40_hw_clean_up_wait", "s50_hw_halt_wait", "s60_idle_halt_wait",
	"s80_hw_freeze", "s82_freeze_sw_clean", "s99_running",
}

// String returns the kernel's name of the state (sdma_state_names).
func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Event is an input to the engine state machine (hfi1: enum sdma_events).
type Event uint8

// The fourteen engine events of hfi1's sdma.c.
const (
	E00GoHwDown      Event = iota // sdma_event_e00_go_hw_down
	E10GoHwStart                  // sdma_event_e10_go_hw_start
	E15HwHaltDone                 // sdma_event_e15_hw_halt_done
	E25HwCleanUpDone              // sdma_event_e25_hw_clean_up_done
	E30GoRunning                  // sdma_event_e30_go_running
	E40SwCleaned                  // sdma_event_e40_sw_cleaned
	E50HwCleaned                  // sdma_event_e50_hw_cleaned
	E60HwHalted                   // sdma_event_e60_hw_halted
	E70GoIdle                     // sdma_event_e70_go_idle
	E80HwFreeze                   // sdma_event_e80_hw_freeze
	E81HwFrozen                   // sdma_event_e81_hw_frozen
	E82HwUnfreeze                 // sdma_event_e82_hw_unfreeze
	E85LinkDown                   // sdma_event_e85_link_down
	E90SwHalted                   // sdma_event_e90_sw_halted
	numEvents
)

var eventNames = [numEvents]string{
	"e00_go_hw_down", "e10_go_hw_start", "e15_hw_halt_done", "e25_hw_clean_up_done",
	"e30_go_running", "e40_sw_cleaned", "e50_hw_cleaned", "e60_hw_halted", "e70_go_idle",
	"e80_hw_freeze", "e81_hw_frozen", "e82_hw_unfreeze", "e85_link_down", "e90_sw_halted",
}

// String returns the kernel's name of the event (sdma_event_names).
func (e Event) String() string {
	if e < numEvents {
		return eventNames[e]
	}
	return fmt.Sprintf("Event(%d)", uint8(e))
}

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
const stay State = 0xff

// startUp marks an entry whose next state is s99 if go_s99_running, else s20 (after sdma_hw_start_up).
const startUp State = 0xfe

// transition is one cell of the table.
type transition struct {
	to  State       // next state, stay, or startUp
	run int8        // effect on go_s99_running, applied before the state change
	act stateAction // work to do after the change
}

// stateTable is the engine state machine, cell for cell the switch in hfi1's __sdma_process_event.
// A zero cell (to 0 = s00 with nothing else) never occurs by accident: every cell that does nothing
// is written {to: stay}. Entering a state also applies sdma_set_state's side effects (see enter).
//
// Rows are states, columns events e00 e10 e15 e25 e30 e40 e50 e60 e70 e80 e81 e82 e85 e90.
var stateTable = func() (t [numStates][numEvents]transition) {
	for s := range t {
		for e := range t[s] {
			t[s][e] = transition{to: stay}
		}
	}
	setRun := transition{to: stay, run: runSet}
	clrRun := transition{to: stay, run: runClear}
	down := func(act stateAction) transition { return transition{to: S00HwDown, act: act} }
	haltWorker := transition{to: stay, act: actErrHaltWorker}

	// s00_hw_down: e30 sets go_s99_running and falls through to e10.
	t[S00HwDown][E10GoHwStart] = transition{to: S10HwStartUpHaltWait}
	t[S00HwDown][E30GoRunning] = transition{to: S10HwStartUpHaltWait, run: runSet}
	t[S00HwDown][E40SwCleaned] = transition{to: stay, act: actSwTearDown}

	// s10_hw_start_up_halt_wait
	t[S10HwStartUpHaltWait][E00GoHwDown] = down(actSwTearDown)
	t[S10HwStartUpHaltWait][E15HwHaltDone] = transition{to: S15HwStartUpCleanWait, act: actHwCleanUp}
	t[S10HwStartUpHaltWait][E30GoRunning] = setRun
	t[S10HwStartUpHaltWait][E60HwHalted] = haltWorker
	t[S10HwStartUpHaltWait][E70GoIdle] = clrRun

	// s15_hw_start_up_clean_wait
	t[S15HwStartUpCleanWait][E00GoHwDown] = down(actSwTearDown)
	t[S15HwStartUpCleanWait][E25HwCleanUpDone] = transition{to: startUp, act: actHwStartUp}
	t[S15HwStartUpCleanWait][E30GoRunning] = setRun
	t[S15HwStartUpCleanWait][E70GoIdle] = clrRun

	// s20_idle: e85 falls through to e80 (without clearing go_s99_running, as in the kernel).
	t[S20Idle][E00GoHwDown] = down(actSwTearDown)
	t[S20Idle][E30GoRunning] = transition{to: S99Running, run: runSet}
	t[S20Idle][E60HwHalted] = transition{to: S50HwHaltWait, act: actErrHaltWorker}
	t[S20Idle][E80HwFreeze] = transition{to: S80HwFreeze, act: actFreezeNotify}
	t[S20Idle][E85LinkDown] = transition{to: S80HwFreeze, act: actFreezeNotify}

	// s30_sw_clean_up_wait
	t[S30SwCleanUpWait][E00GoHwDown] = down(0)
	t[S30SwCleanUpWait][E30GoRunning] = setRun
	t[S30SwCleanUpWait][E40SwCleaned] = transition{to: S40HwCleanUpWait, act: actHwCleanUp}
	t[S30SwCleanUpWait][E70GoIdle] = clrRun
	t[S30SwCleanUpWait][E85LinkDown] = clrRun

	// s40_hw_clean_up_wait
	t[S40HwCleanUpWait][E00GoHwDown] = down(actSwCleanUp)
	t[S40HwCleanUpWait][E25HwCleanUpDone] = transition{to: startUp, act: actHwStartUp}
	t[S40HwCleanUpWait][E30GoRunning] = setRun
	t[S40HwCleanUpWait][E70GoIdle] = clrRun
	t[S40HwCleanUpWait][E85LinkDown] = clrRun

	// s50_hw_halt_wait
	t[S50HwHaltWait][E00GoHwDown] = down(actSwCleanUp)
	t[S50HwHaltWait][E15HwHaltDone] = transition{to: S30SwCleanUpWait, act: actSwCleanUp}
	t[S50HwHaltWait][E30GoRunning] = setRun
	t[S50HwHaltWait][E60HwHalted] = haltWorker
	t[S50HwHaltWait][E70GoIdle] = clrRun
	t[S50HwHaltWait][E85LinkDown] = clrRun

	// s60_idle_halt_wait
	t[S60IdleHaltWait][E00GoHwDown] = down(actSwCleanUp)
	t[S60IdleHaltWait][E15HwHaltDone] = transition{to: S30SwCleanUpWait, act: actSwCleanUp}
	t[S60IdleHaltWait][E30GoRunning] = setRun
	t[S60IdleHaltWait][E60HwHalted] = haltWorker
	t[S60IdleHaltWait][E70GoIdle] = clrRun

	// s80_hw_freeze
	t[S80HwFreeze][E00GoHwDown] = down(actSwCleanUp)
	t[S80HwFreeze][E30GoRunning] = setRun
	t[S80HwFreeze][E70GoIdle] = clrRun
	t[S80HwFreeze][E81HwFrozen] = transition{to: S82FreezeSwClean, act: actSwCleanUp}

	// s82_freeze_sw_clean
	t[S82FreezeSwClean][E00GoHwDown] = down(actSwCleanUp)
	t[S82FreezeSwClean][E30GoRunning] = setRun
	t[S82FreezeSwClean][E40SwCleaned] = transition{to: stay, act: actUnfreezeDone}
	t[S82FreezeSwClean][E70GoIdle] = clrRun
	t[S82FreezeSwClean][E82HwUnfreeze] = transition{to: startUp, act: actHwStartUp}

	// s99_running: e60 asks for a final progress pass and falls through to e90; e85 clears
	// go_s99_running and falls through to e80.
	t[S99Running][E00GoHwDown] = down(actSwCleanUp)
	t[S99Running][E60HwHalted] = transition{to: S50HwHaltWait, act: actErrHaltWorker | actProgress}
	t[S99Running][E90SwHalted] = transition{to: S50HwHaltWait, act: actErrHaltWorker}
	t[S99Running][E70GoIdle] = transition{to: S60IdleHaltWait}
	t[S99Running][E80HwFreeze] = transition{to: S80HwFreeze, act: actFreezeNotify}
	t[S99Running][E85LinkDown] = transition{to: S80HwFreeze, run: runClear, act: actFreezeNotify}

	return t
}()

// stateChange records one state change for diagnosis (sdmatest.History reports them).
type stateChange struct {
	From, To State
	Event    Event
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
	cur       State
	goRunning bool                    // go_s99_running
	hist      [historyLen]stateChange // ring of recent transitions
	nhist     int                     // transitions recorded in all
}

// step applies event ev: the table cell, then sdma_set_state's side effects if the state changed.
// It returns the actions the engine must carry out, and whether the engine entered s99 from
// another state (the kernel calls sdma_flush then).
func (m *stateMachine) step(ev Event, cause string) (acts stateAction, enteredRunning bool) {
	if ev >= numEvents {
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
		to = S20Idle
		if m.goRunning {
			to = S99Running
		}
	}
	if to == stay {
		return cell.act, false
	}
	from := m.cur
	m.enter(to)
	m.hist[m.nhist%historyLen] = stateChange{From: from, To: to, Event: ev, Cause: cause, At: time.Now()}
	m.nhist++
	return cell.act, to == S99Running && from != S99Running
}

// enter is sdma_set_state's bookkeeping: go_s99_running is cleared on entering s00 or s60 and set
// on entering s99. (The SendDmaCtrl CSR writes that go with it have no software counterpart.)
func (m *stateMachine) enter(s State) {
	switch s {
	case S00HwDown, S60IdleHaltWait:
		m.goRunning = false
	case S99Running:
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
