package usdma

import (
	"errors"
	"strconv"
)

// Sentinel errors of package usdma, with the errno hfi1's user_sdma returns for each. Typed
// errors (*ReqError, *CompError) carry detail and match these with errors.Is.
var (
	ErrInvalid    = errors.New("usdma: invalid request")                       // -EINVAL
	ErrSlotInUse  = errors.New("usdma: completion slot in use")                // -EBADSLT
	ErrExpected   = errors.New("usdma: EXPECTED (TID) requests not supported") // -EINVAL in spirit: receive-side TIDs are out of scope
	ErrNotRunning = errors.New("usdma: engine not running")                    // -ECOMM
	ErrFault      = errors.New("usdma: request failed")                        // -EFAULT: a packet of the request completed with an error
	ErrNoMem      = errors.New("usdma: no txreq or mapping")                   // -ENOMEM, and -ENOSPC from a mapping
	ErrClosed     = errors.New("usdma: packet queue closed")                   // PktQ.Close or the device's Close or Shutdown began: new Submits are refused
	ErrSlotFree   = errors.New("usdma: completion slot never used")            // PktQ.Wait on a slot no request was submitted on
)

// Errno values written to a completion entry's Errcode, as the kernel writes them.
const (
	EFAULT    = 14  // a packet of the request completed with an error, or sending stopped after one
	ENOMEM    = 12  // no txreq could be had: the allocator was empty with nothing in flight to give one back
	ENOSPC    = 28  // a mapping failed (sdma_txadd_*'s -ENOSPC)
	EINVAL    = 22  // the request failed a check while sending
	ECOMM     = 70  // the engine stopped while sending
	ESHUTDOWN = 108 // the device or the queue closed while sending (gosdma's; the kernel has no close mid-request)
	// ErrcodeAborted is what user_sdma_txreq_cb writes for a packet that completed aborted:
	// set_comp_state's errcode = -ret with ret = SDMA_TXREQ_S_ABORTED (2), as a u32.
	ErrcodeAborted = 0xfffffffe
)

// ReqError reports a request that Submit refused, with the check that failed. A request refused
// by the checks made before its slot is claimed (the validation Submit documents, a slot in use)
// changed nothing: the slot is as it was, nothing was sent or pinned. One refused after the claim
// (its engine not running, ErrNotRunning; its device closed, ErrClosed; a vector that could not
// be pinned, ErrNoMem) sent nothing either, but its slot has ended ERROR with the errno (ECOMM,
// ESHUTDOWN, ENOSPC), exactly once, as the kernel's free_req path sets it. ErrNotRunning means
// the engine is stopped or halted and may run again (a retry can succeed); ErrClosed that it
// never will (sdma.Engine.Closed).
//
// The refusals made before the claim (and New's for a bad Config) have no Cause, but for a
// Submit whose context ended while it waited for its slot's ending Config.Done: ErrSlotInUse,
// with the context's error as Cause. Each refusal
// after the claim keeps the error behind it as Cause, which the ReqError matches too, beside its
// sentinel: a stopped or halted engine sdma.ErrNotRunning (errors.Is(err, sdma.ErrNotRunning)
// with ErrNotRunning), a closed device sdma.ErrClosed (with ErrClosed), a failed pin the pin's
// error (with ErrNoMem). A Submit that stopped sending after its claim keeps the error that
// stopped it as Cause (its context's, sdma's, the allocator's, ...): errors.Is(err,
// context.Canceled) for a Submit cut short by its context, errors.Is(err, sdma.ErrMapping) for a
// failed mapping, errors.Is(err, alloc.ErrEmpty) for its ErrNoMem for want of a txreq (the
// allocator empty with nothing in flight to give one back; a failing allocator's own error).
type ReqError struct {
	Slot   int    // the request's completion slot (info.CompIdx)
	Reason string // what was wrong
	Err    error  // the sentinel
	Cause  error  // the error behind a refusal after the claim or that stopped sending, or nil
	// config marks New's refusal of a Config (Slot -1, Reason naming the field): no request.
	config bool
}

// Error returns "usdma: request slot N: REASON", or for a bad Config given to New (Slot -1)
// "usdma: New: Config.FIELD ...", naming the field.
func (e *ReqError) Error() string {
	if e.config {
		return "usdma: New: Config." + e.Reason
	}
	return "usdma: request slot " + strconv.Itoa(e.Slot) + ": " + e.Reason
}

// Unwrap returns the sentinel.
func (e *ReqError) Unwrap() error { return e.Err }

// Is reports whether Cause matches target (errors.Is), beside the sentinel Unwrap gives.
func (e *ReqError) Is(target error) bool { return e.Cause != nil && errors.Is(e.Cause, target) }

// As finds target in Cause (errors.As), beside the sentinel Unwrap gives.
func (e *ReqError) As(target any) bool { return e.Cause != nil && errors.As(e.Cause, target) }

func reqErr(slot int, sentinel error, reason string) error {
	return &ReqError{Slot: slot, Reason: reason, Err: sentinel}
}

// CompError is the outcome of a request that ended in state Error: the errcode its completion
// entry holds and the first error that caused it. It matches ErrFault, and the cause.
type CompError struct {
	Slot    int    // the request's completion slot (info.CompIdx)
	Errcode uint32 // as in the completion entry
	Cause   error  // the first error (a halt's abort, a mapping failure, ...), or nil
}

// Error returns "usdma: request slot N failed, errcode E", then ": " and the cause, if any.
// Errcode is printed as the completion entry holds it (a u32: ErrcodeAborted is 4294967294).
func (e *CompError) Error() string {
	s := "usdma: request slot " + strconv.Itoa(e.Slot) + " failed, errcode " + strconv.FormatUint(uint64(e.Errcode), 10)
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns ErrFault and the cause.
func (e *CompError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrFault, e.Cause}
	}
	return []error{ErrFault}
}

func itoa(n int) string { return strconv.Itoa(n) }

// utoa formats n in decimal: a uint32 state past the int32 range, which int(n) turns negative on
// 32-bit GOARCHes.
func utoa(n uint64) string { return strconv.FormatUint(n, 10) }
