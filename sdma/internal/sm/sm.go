// Package sm names the states and events of the hfi1 SDMA engine state machine. Package sdma
// runs the machine; package sdmatest re-exports these names for tests and tools that drive or
// observe it (sdmatest.Event, sdmatest.EngineState, sdmatest.History). Kept internal so that the
// machine's vocabulary is not part of sdma's everyday API.
package sm

import "fmt"

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
	NumStates                          // the number of states
)

var stateNames = [NumStates]string{
	"s00_hw_down", "s10_hw_start_up_halt_wait", "s15_hw_start_up_clean_wait", "s20_idle",
	"s30_sw_clean_up_wait", "s40_hw_clean_up_wait", "s50_hw_halt_wait", "s60_idle_halt_wait",
	"s80_hw_freeze", "s82_freeze_sw_clean", "s99_running",
}

// String returns the state's enumerator name without its sdma_state_ prefix ("s99_running" for
// sdma_state_s99_running); the kernel's sdma_state_names prints "s99_Running".
func (s State) String() string {
	if s < NumStates {
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
	NumEvents                     // the number of events
)

var eventNames = [NumEvents]string{
	"e00_go_hw_down", "e10_go_hw_start", "e15_hw_halt_done", "e25_hw_clean_up_done",
	"e30_go_running", "e40_sw_cleaned", "e50_hw_cleaned", "e60_hw_halted", "e70_go_idle",
	"e80_hw_freeze", "e81_hw_frozen", "e82_hw_unfreeze", "e85_link_down", "e90_sw_halted",
}

// String returns the event's enumerator name without its sdma_event_ prefix ("e30_go_running"
// for sdma_event_e30_go_running); the kernel's sdma_event_names prints "e30_GoRunning".
func (e Event) String() string {
	if e < NumEvents {
		return eventNames[e]
	}
	return fmt.Sprintf("Event(%d)", uint8(e))
}
