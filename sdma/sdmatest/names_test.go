package sdmatest_test

import (
	"testing"

	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestStateEventNames: State and Event print the kernel's enumerator names without their
// sdma_state_ / sdma_event_ prefixes (enum sdma_states, enum sdma_events), as their
// documentation says; it said they were sdma_state_names' and sdma_event_names' strings, which
// the kernel writes in CamelCase ("s99_Running", "e30_GoRunning").
func TestStateEventNames(t *testing.T) {
	states := []string{"s00_hw_down", "s10_hw_start_up_halt_wait", "s15_hw_start_up_clean_wait",
		"s20_idle", "s30_sw_clean_up_wait", "s40_hw_clean_up_wait", "s50_hw_halt_wait",
		"s60_idle_halt_wait", "s80_hw_freeze", "s82_freeze_sw_clean", "s99_running"}
	for i, want := range states {
		if got := sdmatest.State(i).String(); got != want {
			t.Errorf("State(%d) = %q, want %q", i, got, want)
		}
	}
	events := []string{"e00_go_hw_down", "e10_go_hw_start", "e15_hw_halt_done",
		"e25_hw_clean_up_done", "e30_go_running", "e40_sw_cleaned", "e50_hw_cleaned",
		"e60_hw_halted", "e70_go_idle", "e80_hw_freeze", "e81_hw_frozen", "e82_hw_unfreeze",
		"e85_link_down", "e90_sw_halted"}
	for i, want := range events {
		if got := sdmatest.Event(i).String(); got != want {
			t.Errorf("Event(%d) = %q, want %q", i, got, want)
		}
	}
	if sdmatest.S99Running.String() != "s99_running" || sdmatest.E90SwHalted.String() != "e90_sw_halted" {
		t.Error("the named constants")
	}
}
