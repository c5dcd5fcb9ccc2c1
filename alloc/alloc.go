package alloc

import (
	"errors"
	"fmt"
)

// Allocator gets objects of the caller's type and takes them back.
//
// Implementations in this package are safe for concurrent use; [Allocator.Traits] says so, and
// what Get does when no object is free.
type Allocator[T any] interface {
	// Get returns an object the caller owns until it passes it to Put, or an error matching
	// ErrEmpty (or ErrClosed, or ErrNotMade for a zero value) when none can be had.
	Get() (*T, error)
	// Put gives an object back. It returns an error matching ErrDoublePut or ErrForeign, and
	// changes nothing, if p is free already or was not handed out by this allocator.
	Put(p *T) error
	// Traits describes the allocator's behaviour.
	Traits() Traits
}

// EmptyPolicy is what an allocator's Get does when it has no free object.
type EmptyPolicy uint8

const (
	// EmptyGrow: Get allocates more objects; if Traits.Capacity is non-zero and reached, it
	// returns ErrEmpty instead.
	EmptyGrow EmptyPolicy = iota + 1
	// EmptyFail: Get returns ErrEmpty and never allocates.
	EmptyFail
)

// String returns the policy's name.
func (p EmptyPolicy) String() string {
	switch p {
	case EmptyGrow:
		return "grow"
	case EmptyFail:
		return "fail"
	}
	return fmt.Sprintf("EmptyPolicy(%d)", uint8(p))
}

// Traits describes an allocator.
type Traits struct {
	// Concurrent reports whether Get and Put are safe for concurrent use by multiple goroutines.
	Concurrent bool
	// LockFree reports whether Get and Put (on their non-empty paths) take no lock. (A List's
	// Put, and a Get that moved free objects, take the List's lock while GetCtx waiters are
	// parked, to hand them objects.)
	LockFree bool
	// OnEmpty is what Get does when no object is free.
	OnEmpty EmptyPolicy
	// CanWait reports whether the allocator has a GetCtx that waits for a Put when empty.
	CanWait bool
	// Capacity is the most objects the allocator will ever own, 0 for no limit.
	Capacity int
	// Shrinks reports whether idle objects may be given back to the garbage collector.
	Shrinks bool
}

// Stats is a snapshot of an allocator's counters. It is exact when no Get or Put runs at the same
// time; under concurrent use it is a snapshot taken piece by piece, so its fields need not be
// mutually consistent (for Slab and List, InUse <= HighWater <= Objects still holds). Objects
// cached in per-P magazines count as free. See the package documentation for what concurrent use
// may do to HighWater.
type Stats struct {
	// InUse is the number of objects handed out and not yet put back (Slab and List only).
	InUse int64
	// HighWater is the largest InUse has been (Slab and List only).
	HighWater int64
	// Objects is the number of objects the allocator owns (free or in use). Pool reports the
	// objects it has created, some of which the garbage collector may since have taken back.
	Objects int64
	// Slabs is the number of slabs (Slab), 1 (List), or chunks created (Pool).
	Slabs int
}

// Errors. Misuse errors are [*PutError] values that match these with [errors.Is].
var (
	// ErrEmpty: no free object, and the allocator cannot or may not make one.
	ErrEmpty = errors.New("alloc: no free object")
	// ErrDoublePut: the object was put back while already free.
	ErrDoublePut = errors.New("alloc: object put back twice")
	// ErrForeign: the pointer is nil or was not handed out by this allocator.
	ErrForeign = errors.New("alloc: object not from this allocator")
	// ErrClosed: the allocator was closed.
	ErrClosed = errors.New("alloc: allocator closed")
	// ErrNotMade: the allocator is the zero value of a List or a Slab, not made by its
	// constructor (NewList, NewSlab); it hands out nothing and takes nothing back. (The zero
	// value of a Pool is an empty Pool, ready to use.)
	ErrNotMade = errors.New("alloc: allocator not made by its constructor")
)

// PutError reports a Put the allocator refused. It matches its Err with [errors.Is].
type PutError struct {
	// Allocator names the allocator kind ("slab", "list", "pool").
	Allocator string
	// Addr is the address that was put back.
	Addr uintptr
	// Err is ErrDoublePut or ErrForeign.
	Err error
}

// Error returns "ALLOCATOR: put ADDR: CAUSE", e.g. "slab: put 0xc000010000: alloc: object put back twice".
func (e *PutError) Error() string {
	return fmt.Sprintf("%s: put %#x: %v", e.Allocator, e.Addr, e.Err)
}

// Unwrap returns Err (ErrDoublePut or ErrForeign), so that errors.Is matches it.
func (e *PutError) Unwrap() error { return e.Err }

// Pool's object states, kept in each object's state word. (Slab and List keep theirs in the
// cell's link word: see stack.go.)
const (
	stateFree  uint32 = 0 // in the sync.Pool, or being put back (after the check, before the push)
	stateInUse uint32 = 1 // handed out: owned by the caller
)
