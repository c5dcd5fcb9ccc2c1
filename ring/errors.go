package ring

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns is one of these or an *Error that matches one
// of them with errors.Is. ErrFull and ErrClosed are returned bare, so the flow-control path does not allocate.
var (
	// ErrSize: a ring size that is not a power of two in [MinSize, MaxSize], a batch of
	// fewer than one descriptor, or a producer's call on the zero Ring (not made by New).
	ErrSize = errors.New("ring: bad size")
	// ErrFull: not enough free slots for the batch right now (hfi1: the nodesc path of
	// sdma_send_txreq). Nothing was changed; retry after the completion side has made progress.
	ErrFull = errors.New("ring: full")
	// ErrClosed: the ring is closed for reservations (Close); returned bare, nothing was
	// changed. Retry after Open.
	ErrClosed = errors.New("ring: closed")
	// ErrReset: ReserveIn's epoch is over, the ring was Reset since it was read (Epoch);
	// returned bare, nothing was changed. A reservation of the ring's current epoch needs a new
	// Epoch.
	ErrReset = errors.New("ring: reset since the epoch")
	// ErrTooBig: the batch can never fit, it is larger than the capacity Size()-1.
	ErrTooBig = errors.New("ring: batch larger than the ring's capacity")
	// ErrNotReserved: Publish of a range that lies outside the reserved, unpublished window
	// [Tail(), reserved): never reserved, or already published. Nothing was changed.
	ErrNotReserved = errors.New("ring: range not reserved")
	// ErrOrder: an index moved backwards or past the index that bounds it (head past tail,
	// swHead past hwHead), a Publish whose start is not a reservation boundary (the tail
	// stepped over it), or a Reset or an EnqueueSP while a reservation is not yet published.
	// Nothing was changed.
	ErrOrder = errors.New("ring: index out of order")
)

// Error carries the detail of a refused call; it matches its sentinel with errors.Is.
type Error struct {
	Op  string // the method: "New", "Reserve", "Publish", "SetHWHead", ...
	Msg string // what was wrong, with the values involved (empty for an out-of-order head move: Error formats order)
	Err error  // the sentinel: ErrSize, ErrTooBig, ErrNotReserved or ErrOrder
	// order: the values of a head moved out of order (SetHWHead, SetSwHead, whose panic is
	// built without a call so that they inline), formatted by Error.
	order *orderDetail
}

// orderDetail is an out-of-order head move: the new head h outside [old, bound].
type orderDetail struct{ h, old, bound uint64 }

// Error returns "ring: OP: MSG"; for an out-of-order head move MSG is built from its values
// ("head H outside [OLD, BOUND]").
func (e *Error) Error() string { return "ring: " + e.Op + ": " + e.message() }

// message is Msg, or for an out-of-order head move the text built from its values.
func (e *Error) message() string {
	if e.Msg == "" && e.order != nil {
		return fmt.Sprintf("head %#x outside [%#x, %#x]", e.order.h, e.order.old, e.order.bound)
	}
	return e.Msg
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

func errorf(op string, sentinel error, format string, args ...any) *Error {
	return &Error{Op: op, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}
