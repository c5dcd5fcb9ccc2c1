package pio

import (
	"errors"
	"strconv"
)

// Sentinel errors of package pio, with the kernel's answer each stands for. Every error the
// package returns is one of these or an *Error (or *HaltError) matching one with errors.Is.
// ErrNoCredits and ErrNotRunning are returned bare, so the flow-control path does not allocate.
var (
	// ErrInvalid: a bad argument (type, credits, MTU, threshold, a copy of bytes that are not
	// whole dwords, a Restart of a context that is not halted, a nil context.Context). Nothing
	// was changed (-EINVAL). A PBC that does not match its buffer is not refused: the chip halts
	// on it (CausePBCLength, CauseBadPBC), as the real chip does.
	ErrInvalid = errors.New("pio: invalid argument")
	// ErrMsgSize: a packet longer than the context's buffer or than a PBC can describe.
	ErrMsgSize = errors.New("pio: packet too long for the send context")
	// ErrNoCredits: not enough free blocks right now (sc_buffer_alloc returned NULL). Nothing was
	// changed; wait for a credit return (SendWait, QueueWait: they ask the chip for one), or ask
	// for one (ReturnCredits) and retry. A bare retry may never succeed: below the credit-return
	// threshold, with nobody waiting, the chip writes nothing back by itself (the kernel's callers
	// pio_wait, which forces a return).
	ErrNoCredits = errors.New("pio: no send credits")
	// ErrNotRunning: the context is not enabled: halted, stopped or disabled (sc_buffer_alloc's
	// ERR_PTR(-ECOMM)). Nothing was allocated.
	ErrNotRunning = errors.New("pio: send context not enabled")
	// ErrClosed: the context was closed (sc_free).
	ErrClosed = errors.New("pio: send context closed")
	// ErrHalted: the chip halted the context (a HaltError carries the cause).
	ErrHalted = errors.New("pio: send context halted")
	// ErrState: a buffer used out of order (a copy after the end, a mid before a start).
	ErrState = errors.New("pio: buffer used out of order")
)

// Error carries the detail of a refused call; it matches its sentinel with errors.Is.
type Error struct {
	Op  string // the function: "New", "BufferAlloc", "Copy", ...
	Msg string // what was wrong, with the values involved
	Err error  // the sentinel
}

// Error returns "pio: OP: MSG"; the sentinel's text is not repeated.
func (e *Error) Error() string { return "pio: " + e.Op + ": " + e.Msg }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

func errf(op string, sentinel error, msg string) *Error {
	return &Error{Op: op, Msg: msg, Err: sentinel}
}

// refusedInCallback ends the message of Close's refusals on a chip goroutine (see Close): they
// hold for as long as the callback that called Close runs.
const refusedInCallback = ", and is refused for as long as that callback runs (a retry from it loops for ever): return, and Close from another goroutine"

func itoa(n int) string { return strconv.Itoa(n) }

// errNotMade is the refusal of a zero SendContext's allocations and Enable: it has no credits, so
// every packet would read as too large for it ("want 2..0"), and an Enable as a success.
func errNotMade(op string) *Error {
	return errf(op, ErrInvalid, "the zero SendContext, not made by New: it has no send buffer")
}

// errNilContext is the answer of an entry point that takes a context to a nil one: ErrInvalid,
// before anything is done (as sdma's). A nil ctx would otherwise panic, and only when the call
// had to wait.
func errNilContext(op string) error { return errf(op, ErrInvalid, "nil context") }

// HaltCause names why the chip model halted a context (hfi1: the send context error bits that
// sc_stop(sc, SCF_HALTED) reacts to).
type HaltCause uint8

const (
	CauseInjected  HaltCause = iota + 1 // an injected halt (FaultPlan, InjectHalt)
	CausePBCLength                      // the PBC's length does not match the blocks written (a PBC error)
	CauseBadPBC                         // a PBC of fewer than 2 dwords or past MaxPacketDWs
	CauseGoexit                         // a Sink, Releaser or (chip goroutine) wake-up called runtime.Goexit (see Sink): halted until Restart or Close
)

// String names the cause.
func (c HaltCause) String() string {
	switch c {
	case CauseInjected:
		return "injected"
	case CausePBCLength:
		return "pbc-length"
	case CauseBadPBC:
		return "bad-pbc"
	case CauseGoexit:
		return "goexit"
	}
	return "HaltCause(" + itoa(int(c)) + ")"
}

// HaltError records one halt of a context; it matches ErrHalted.
type HaltError struct {
	Context int       // the context's software index
	Cause   HaltCause // why
	Packet  uint64    // packets the chip took up before the halt, over the context's life as FaultPlan counts them (the halted packet is Packet+1)
	// Detail is what the chip model saw, with its values (e.g. "PBC length 3 dwords" for
	// CauseBadPBC, "InjectHalt" for CauseInjected); empty if it has none. It is for people to
	// read: programs match on Cause.
	Detail string
}

// Error returns "pio: send context N halted (CAUSE) at packet P[: DETAIL]", P counting from 1
// (Packet+1, the halted packet).
func (e *HaltError) Error() string {
	s := "pio: send context " + itoa(e.Context) + " halted (" + e.Cause.String() + ") at packet " + strconv.FormatUint(e.Packet+1, 10)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns ErrHalted, the sentinel every *HaltError matches (errors.Is): typed errors
// match their sentinels through Unwrap throughout the module.
func (e *HaltError) Unwrap() error { return ErrHalted }
