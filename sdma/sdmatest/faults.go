package sdmatest

import (
	"fmt"
	"time"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/internal/hooks"
)

// FaultPlan injects halts into an engine's hardware model (SetFaults). The zero value injects
// nothing. Mapping faults are injected through the mapper (dma.FaultInjector), sink failures and
// stalls through the sink (FaultSink).
type FaultPlan struct {
	// HaltAt, if positive, halts the engine once, at the first packet that starts at or after
	// the HaltAt-th descriptor the hardware model reads from then on (1: the next packet), with
	// HaltCause (sdma.CauseHalt if sdma.CauseNone).
	HaltAt    int
	HaltCause sdma.HaltCause
	// HaltRate is the probability, drawn per packet, that the hardware halts before it with a
	// cause chosen at random among the halt causes; 0..1.
	HaltRate float64
	// Seed seeds HaltRate's draws (the engine adds its index).
	Seed uint64
}

// SetFaults replaces e's fault plan (p's zero value stops injecting). A bad plan is refused with
// an *sdma.ConfigError (it matches sdma.ErrInvalid) naming the field, and changes nothing.
// SetFaults never waits: the plan is left for the hardware model, whose next pass takes it before
// it reads a descriptor (HaltAt counts the descriptors read from that pass on). Once SetFaults
// returns, every pass that starts uses the plan; a pass running meanwhile on another goroutine
// ends with the old one. From a Sink, a completion or a wakeup (on the engine's goroutine, or
// under the caller's own Process, Poll, Stop, RaiseEvent, ...), the pass that runs it ends with
// the old plan, and the new one applies from the next pass: the next Process of a Manual engine.
func SetFaults(e *sdma.Engine, p FaultPlan) error {
	if e == nil {
		return errNil("SetFaults", "engine")
	}
	return hooks.SetFaults(e, hooks.FaultPlan{HaltAt: p.HaltAt, HaltCause: int(p.HaltCause), HaltRate: p.HaltRate, Seed: p.Seed})
}

// InjectHalt makes e's hardware model halt now, before its next packet, with cause c (as the
// chip sets an ENG_ERR_STATUS halt bit), and returns after the engine recovered. It is the
// explicit form of a FaultPlan halt. A halt of an engine that is not running does nothing but say
// so: sdma.ErrNotRunning. sdma.ErrInvalid for an unknown cause or sdma.CauseNone; sdma.ErrClosed
// once the device is closing.
func InjectHalt(e *sdma.Engine, c sdma.HaltCause) error {
	if e == nil {
		return errNil("InjectHalt", "engine")
	}
	return hooks.InjectHalt(e, int(c))
}

// errNil is the refusal of a nil engine or device (sdma.ErrInvalid).
func errNil(fn, what string) error {
	return fmt.Errorf("sdmatest.%s: nil %s: %w", fn, what, sdma.ErrInvalid)
}

// RaiseEvent raises ev on e, with cause recorded in its history (hfi1: sdma_process_event), and
// returns once the engine rests again: the table in package sdma's documentation says what each
// event does in each state. An explicit E60HwHalted or E90SwHalted in s99 halts the engine with
// CauseHalt and recovers it; E70GoIdle takes a running engine through the idle halt to s20;
// E80HwFreeze/E85LinkDown move it to s80, E81HwFrozen cleans it (s82), E82HwUnfreeze restarts
// it; E00GoHwDown stops it (s00) and E30GoRunning starts it (Engine.Stop and Start are those
// two). Sends while the engine is not in s99 go to the flush list (sdma.ErrNotRunning) and
// complete aborted.
//
// Errors: sdma.ErrInvalid for an unknown event, or when called on the engine's own goroutine
// (from a Sink, a completion or a wakeup it runs: it would wait for itself); sdma.ErrClosed
// once the device is closing. RaiseEvent waits for a hardware pass in progress; from a completion or
// Sink that the caller's own Process or Poll runs it would deadlock: do not.
func RaiseEvent(e *sdma.Engine, ev Event, cause string) error {
	if e == nil {
		return errNil("RaiseEvent", "engine")
	}
	return hooks.Event(e, uint8(ev), cause)
}

// Transition records one state change of an engine, for diagnosis.
type Transition struct {
	From, To State     // the state before and after
	Event    Event     // the event that moved it
	Cause    string    // why the event was raised (a halt cause, "Close", "user", …)
	At       time.Time // when it happened
}

// String formats the transition as "s99_running -e90_sw_halted-> s50_hw_halt_wait (cause)".
func (t Transition) String() string {
	s := fmt.Sprintf("%v -%v-> %v", t.From, t.Event, t.To)
	if t.Cause != "" {
		s += " (" + t.Cause + ")"
	}
	return s
}

// History returns e's recent state transitions, oldest first, each with the event and the cause
// that moved it (at most the last 32). The slice is new and the caller's.
func History(e *sdma.Engine) []Transition {
	if e == nil {
		return nil // a nil engine has no history
	}
	h := hooks.History(e)
	out := make([]Transition, len(h))
	for i, t := range h {
		out[i] = Transition{From: State(t.From), To: State(t.To), Event: Event(t.Event), Cause: t.Cause, At: t.At}
	}
	return out
}

// FreezeNotify tells every engine of dev that the chip is freezing (hfi1: sdma_freeze_notify):
// each gets e85_link_down if linkDown, else e80_hw_freeze. A running or idle engine moves to
// s80_hw_freeze and stops consuming its ring; sends get sdma.ErrNotRunning and go to the flush
// list. Nothing is cleaned yet: that is Freeze. e85 also clears go_s99_running, so after a
// link-down freeze Unfreeze leaves the engines idle (s20) until Engine.Start, as in the kernel.
// Engines in other states ignore the event. sdma.ErrClosed once the device is closing.
func FreezeNotify(dev *sdma.Device, linkDown bool) error {
	if dev == nil {
		return errNil("FreezeNotify", "device")
	}
	if linkDown {
		return hooks.DeviceEvent(dev, "notify-linkdown")
	}
	return hooks.DeviceEvent(dev, "notify")
}

// Freeze completes a freeze (hfi1: sdma_freeze): every engine in s80_hw_freeze gets
// e81_hw_frozen and runs its sw clean (s82_freeze_sw_clean): what its hardware finished
// completes StatusOK, everything else in its ring and flush list StatusAborted, every mapping is
// undone and every parked waiter is woken. The kernel waits for every engine to reach s80 first
// and for every clean to finish after; here both happen inside the calls, so Freeze returns with
// every engine cleaned. Call FreezeNotify first; an engine not in s80 ignores e81.
// sdma.ErrClosed once the device is closing.
func Freeze(dev *sdma.Device) error {
	if dev == nil {
		return errNil("Freeze", "device")
	}
	return hooks.DeviceEvent(dev, "freeze")
}

// Unfreeze restarts the engines after a freeze (hfi1: sdma_unfreeze): every engine in
// s82_freeze_sw_clean gets e82_hw_unfreeze, restarts its ring at index 0 (sdma_hw_start_up) and
// runs again (s99), or stays idle (s20) after a link-down freeze until Engine.Start.
// sdma.ErrClosed once the device is closing.
func Unfreeze(dev *sdma.Device) error {
	if dev == nil {
		return errNil("Unfreeze", "device")
	}
	return hooks.DeviceEvent(dev, "unfreeze")
}
