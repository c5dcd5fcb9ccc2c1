package sdmatest

import (
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/internal/hooks"
	"github.com/gosdma/gosdma/sdma/internal/sm"
)

// State is an SDMA engine state (hfi1: enum sdma_states); its String is the kernel's enumerator
// name without its sdma_state_ prefix, e.g. "s99_running" for sdma_state_s99_running (the
// kernel's sdma_state_names prints "s99_Running"). The table in package sdma's documentation
// says what each event does in each state.
type State = sm.State

// Event is an input to the engine state machine (hfi1: enum sdma_events); its String is the
// kernel's enumerator name without its sdma_event_ prefix, e.g. "e30_go_running" for
// sdma_event_e30_go_running (the kernel's sdma_event_names prints "e30_GoRunning").
type Event = sm.Event

// The eleven engine states of hfi1's sdma.c.
const (
	S00HwDown             = sm.S00HwDown             // sdma_state_s00_hw_down
	S10HwStartUpHaltWait  = sm.S10HwStartUpHaltWait  // sdma_state_s10_hw_start_up_halt_wait
	S15HwStartUpCleanWait = sm.S15HwStartUpCleanWait // sdma_state_s15_hw_start_up_clean_wait
	S20Idle               = sm.S20Idle               // sdma_state_s20_idle
	S30SwCleanUpWait      = sm.S30SwCleanUpWait      // sdma_state_s30_sw_clean_up_wait
	S40HwCleanUpWait      = sm.S40HwCleanUpWait      // sdma_state_s40_hw_clean_up_wait
	S50HwHaltWait         = sm.S50HwHaltWait         // sdma_state_s50_hw_halt_wait
	S60IdleHaltWait       = sm.S60IdleHaltWait       // sdma_state_s60_idle_halt_wait
	S80HwFreeze           = sm.S80HwFreeze           // sdma_state_s80_hw_freeze
	S82FreezeSwClean      = sm.S82FreezeSwClean      // sdma_state_s82_freeze_sw_clean
	S99Running            = sm.S99Running            // sdma_state_s99_running
)

// The fourteen engine events of hfi1's sdma.c.
const (
	E00GoHwDown      = sm.E00GoHwDown      // sdma_event_e00_go_hw_down
	E10GoHwStart     = sm.E10GoHwStart     // sdma_event_e10_go_hw_start
	E15HwHaltDone    = sm.E15HwHaltDone    // sdma_event_e15_hw_halt_done
	E25HwCleanUpDone = sm.E25HwCleanUpDone // sdma_event_e25_hw_clean_up_done
	E30GoRunning     = sm.E30GoRunning     // sdma_event_e30_go_running
	E40SwCleaned     = sm.E40SwCleaned     // sdma_event_e40_sw_cleaned
	E50HwCleaned     = sm.E50HwCleaned     // sdma_event_e50_hw_cleaned
	E60HwHalted      = sm.E60HwHalted      // sdma_event_e60_hw_halted
	E70GoIdle        = sm.E70GoIdle        // sdma_event_e70_go_idle
	E80HwFreeze      = sm.E80HwFreeze      // sdma_event_e80_hw_freeze
	E81HwFrozen      = sm.E81HwFrozen      // sdma_event_e81_hw_frozen
	E82HwUnfreeze    = sm.E82HwUnfreeze    // sdma_event_e82_hw_unfreeze
	E85LinkDown      = sm.E85LinkDown      // sdma_event_e85_link_down
	E90SwHalted      = sm.E90SwHalted      // sdma_event_e90_sw_halted
)

// EngineState returns e's state (hfi1: sde->state.current_state). Engine.Running says whether it
// accepts sends; this is the whole state, for tests and diagnosis. A nil engine is S00HwDown.
func EngineState(e *sdma.Engine) State {
	if e == nil {
		return S00HwDown
	}
	return State(hooks.State(e))
}
