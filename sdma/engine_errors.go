package sdma

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gosdma/gosdma/desc"
)

// Sentinel errors of the engine side of package sdma (the txreq side's are in errors.go).
var (
	ErrConfig = errors.New("sdma: invalid configuration")  // NewDevice refused a Config field
	ErrSink   = errors.New("sdma: sink failed to deliver") // a Sink returned an error or panicked
	// ErrInjected is the error of a delivery that an sdmatest.FaultSink failed on purpose.
	ErrInjected = errors.New("sdma: injected fault")
)

// ConfigError names the Config field NewDevice refused, or the field of a package sdmatest type
// that was refused: an sdmatest.FaultPlan's by sdmatest.SetFaults (Field
// "sdmatest.FaultPlan.HaltRate", say), an sdmatest.FaultSink's by its Validate, which NewDevice
// calls (Field "sdmatest.FaultSink.FailRate"). It matches ErrConfig and ErrInvalid.
type ConfigError struct {
	Field  string // e.g. "RingSize"
	Value  any    // the value given
	Reason string // what a valid value is
}

// faultPlanField prefixes the Field of a ConfigError of sdmatest.SetFaults.
const faultPlanField = "sdmatest.FaultPlan."

// sdmatestField prefixes the Field of a ConfigError about a package sdmatest type (a fault plan,
// a fault sink): Error names it as it is, not as a Config field.
const sdmatestField = "sdmatest."

// Error returns "sdma: Config.FIELD = VALUE: REASON" (an sdmatest field is named as it is,
// e.g. "sdmatest.FaultPlan.HaltRate").
func (e *ConfigError) Error() string {
	name := "Config." + e.Field
	if strings.HasPrefix(e.Field, sdmatestField) {
		name = e.Field
	}
	return fmt.Sprintf("sdma: %s = %v: %s", name, e.Value, e.Reason)
}

// Unwrap returns ErrConfig and ErrInvalid, the sentinels a *ConfigError matches.
func (e *ConfigError) Unwrap() []error { return []error{ErrConfig, ErrInvalid} }

func configErr(field string, v any, reason string) error {
	return &ConfigError{Field: field, Value: v, Reason: reason}
}

// HaltCause is why the hardware model halted an engine: the descriptor checks of the chip and an
// explicit halt (hfi1: the SEND_DMA_ENG_ERR_STATUS bits of ALL_SDMA_ENG_HALT_ERRS that a software
// engine can meet). Each halt is counted by cause in EngineStats.Halts.
type HaltCause int

const (
	// CauseNone is the zero HaltCause: no halt. No HaltError carries it (Halts[CauseNone] stays
	// 0); as sdmatest.FaultPlan.HaltCause it means CauseHalt; sdmatest.InjectHalt refuses it.
	CauseNone           HaltCause = iota
	CauseGenMismatch              // SDMA_GEN_MISMATCH: the slot's generation is not the ring pass's
	CauseFirstDesc                // SDMA_FIRST_DESC: a packet does not open with FIRST, or FIRST inside one
	CauseTooLong                  // SDMA_TOO_LONG: more than 16384 bytes read for one packet
	CauseDescOverflow             // SDMA_PACKET_DESC_OVERFLOW: more than 64 descriptors in one packet
	CauseWrongDW                  // SDMA_WRONG_DW: a packet that is not a whole number of dwords
	CauseMemRead                  // SDMA_MEM_READ: Translate refused a descriptor's range (an IOMMU fault)
	CauseHeaderSelect             // SDMA_HEADER_SELECT: an undefined AHG mode
	CauseHeaderLength             // SDMA_HEADER_LENGTH: an AHG header length the entry cannot give
	CauseHeaderAddress            // SDMA_HEADER_ADDRESS: an AHG update outside the header or an empty entry
	CauseLengthMismatch           // SDMA_LENGTH_MISMATCH: the bytes read for a descriptor are not its length
	CauseHalt                     // SDMA_HALT: an explicit halt (sdmatest.InjectHalt, an e60/e90 event, a fault plan)
	NumHaltCauses                 // the number of causes, CauseNone included (the size of EngineStats.Halts)
)

var causeNames = [...]string{
	CauseNone:           "none",
	CauseGenMismatch:    "generation mismatch",
	CauseFirstDesc:      "first descriptor",
	CauseTooLong:        "packet too long",
	CauseDescOverflow:   "packet descriptor overflow",
	CauseWrongDW:        "wrong dword count",
	CauseMemRead:        "memory read fault",
	CauseHeaderSelect:   "AHG header select",
	CauseHeaderLength:   "AHG header length",
	CauseHeaderAddress:  "AHG header address",
	CauseLengthMismatch: "length mismatch",
	CauseHalt:           "explicit halt",
}

// String names the cause.
func (c HaltCause) String() string {
	if c >= 0 && c < NumHaltCauses {
		return causeNames[c]
	}
	return fmt.Sprintf("HaltCause(%d)", int(c))
}

// HaltError is the recorded reason an engine halted: the descriptor the hardware model refused
// (or stood at, for an injected halt) and why. It matches ErrHalted, and for a CauseMemRead halt
// of a read the mapper refused it wraps the mapper's *dma.Fault (Err); an injected halt
// (sdmatest.InjectHalt, a FaultPlan) of any cause, CauseMemRead included, has none.
type HaltError struct {
	Engine int       // engine index
	Cause  HaltCause // which check failed
	Index  uint64    // ring index (free-running) of the offending descriptor
	Desc   desc.Desc // the descriptor as the hardware read it
	Detail string    // a sentence saying what was wrong
	Err    error     // the underlying error (a *dma.Fault), or nil
}

// Error returns "sdma: engine E halted: CAUSE at descriptor INDEX (QW0 QW1): DETAIL", then
// ": " and the underlying error, if any.
func (e *HaltError) Error() string {
	s := fmt.Sprintf("sdma: engine %d halted: %v at descriptor %#x (%#016x %#016x): %s",
		e.Engine, e.Cause, e.Index, e.Desc.Qw0, e.Desc.Qw1, e.Detail)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrHalted and the underlying error, if any, for errors.Is and errors.As.
func (e *HaltError) Unwrap() []error { return sentinelAnd(ErrHalted, e.Err) }

// SinkError records a failed delivery: the error a Sink returned, or the value it panicked with.
// It matches ErrSink. A failed delivery does not halt the engine: the txreq completes normally.
type SinkError struct {
	Engine int   // engine index
	Err    error // the error Deliver returned; nil if it panicked
	Panic  any   // the value Deliver panicked with; nil if it returned an error
}

// Error returns "sdma: engine E: sink: ERR", or "sdma: engine E: sink panicked: VALUE".
func (e *SinkError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("sdma: engine %d: sink: %v", e.Engine, e.Err)
	}
	return fmt.Sprintf("sdma: engine %d: sink panicked: %v", e.Engine, e.Panic)
}

// Unwrap returns ErrSink and the error Deliver returned, if any, for errors.Is and errors.As.
func (e *SinkError) Unwrap() []error { return sentinelAnd(ErrSink, e.Err) }

// CallbackError records a completion-side callback that panicked: a txreq's Completer, an
// IOWait's drained callback or its wakeup. The panic was recovered on the completion pass, which
// went on: the txreq counted as completed (its mappings were undone before the call), the
// iowait's busy count dropped, the waiter was off the wait list. Engine.CallbackError returns the
// last one; EngineStats.CallbackPanics counts them.
//
// A callback that called runtime.Goexit on a caller's goroutine (a Process, Poll or Stop that
// ran it: that goroutine ended) is recorded too, with Goexit set: the pass's locks were released
// and the engine goes on (see Sink for a Goexit on the engine's own goroutine, which halts it).
type CallbackError struct {
	Engine   int    // engine index
	Callback string // "completion", "drained" or "wakeup"
	Panic    any    // the value it panicked with
	Stack    []byte // the goroutine's stack at the recovery (runtime/debug.Stack)
	Goexit   bool   // it called runtime.Goexit instead (Panic and Stack nil)
}

// Error returns "sdma: engine E: CALLBACK callback panicked: VALUE" (without the stack), or
// "... callback called runtime.Goexit".
func (e *CallbackError) Error() string {
	if e.Goexit {
		return fmt.Sprintf("sdma: engine %d: %s callback called runtime.Goexit", e.Engine, e.Callback)
	}
	return fmt.Sprintf("sdma: engine %d: %s callback panicked: %v", e.Engine, e.Callback, e.Panic)
}

// sentinelAnd is every typed error's Unwrap: its sentinel first, then its cause if it has one.
// (One way for all of them: errors.Is matches the sentinel, errors.Is and errors.As the cause.)
func sentinelAnd(sentinel, cause error) []error {
	if cause != nil {
		return []error{sentinel, cause}
	}
	return []error{sentinel}
}
