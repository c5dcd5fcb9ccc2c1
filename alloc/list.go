package alloc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/membarrier"
	"github.com/gosdma/gosdma/internal/pcpu"
)

// List is a preallocated allocator: n objects created up front, never more. Get and Put are
// lock-free and safe against ABA (see the free-stack notes in stack.go), but for the hand-off to
// parked GetCtx waiters: while any wait, a Put (or a Get that moved free objects) takes the
// List's lock to hand them objects. Get on an empty List returns ErrEmpty and never allocates;
// [List.GetCtx] instead waits for a Put or the context.
//
// Like [Slab], List keeps free objects in small per-P magazines (see the package documentation),
// so a producer's Gets and a completion goroutine's Puts on another core share a cache line only
// once per magazine. The capacity is never lost in them: before it reports ErrEmpty, a Get takes
// the objects cached on every other P.
//
// List is safe for concurrent use. Make one with NewList: the zero value has no objects, and its
// Get returns ErrNotMade (its Put ErrForeign).
type List[T any] struct {
	s stack[T] // the free list; its fields document their own writers
	n int      // written by NewList, read-only after

	// closed is set once by Close (store) and read by Get (load).
	closed atomic.Bool

	// waiters counts goroutines parked in GetCtx. Incremented under mu by a waiter before its
	// last look (getSlow: every P's magazines, the depot, the free stack); loaded by every Put
	// after its push, and by every Get that moved free objects into a magazine or the depot on
	// its way (all sequentially consistent atomics, but for a Put's push in plain mode, a plain
	// store, which the waiter's membarrier.Barrier between its increment and its look orders:
	// see GetCtx). That is the Dekker pair that rules out a lost wakeup: either the waiter's
	// look sees the objects where they were put, or the goroutine that put them there sees the
	// waiter and wakes it (wake looks again, under mu, after the waiter is queued). An object
	// that moves again later is covered by the next mover's own load of waiters.
	waiters atomic.Int32
	mu      sync.Mutex      // guards queue and the hand-off to waiters
	queue   []chan *cell[T] // parked waiters, oldest first; each channel has room for one send
}

// NewList returns a List of n zero-valued objects, all free. reset, if not nil, runs on every
// object Put gives back, before it can be handed out again (if it panics, the Put is undone: the
// object stays in use). It returns an error if n is not in [1, 2^32-1), or if n objects are more
// than one allocation may hold.
func NewList[T any](n int, reset func(*T)) (*List[T], error) {
	if n < 1 || int64(n) >= nilIndex {
		return nil, fmt.Errorf("alloc: NewList: %d objects out of range [1, %d)", n, uint32(nilIndex))
	}
	if uint64(n) > maxCells[T]() {
		return nil, fmt.Errorf("alloc: NewList: %d objects of %d bytes each are more than one allocation may hold (%d bytes)", n, cellStride[T](), uint64(maxRegionBytes))
	}
	l := &List[T]{n: n}
	l.s.init(uint32(n), reset, "list")
	l.s.grow(nil, 1) // all n free
	return l, nil
}

// Get returns a free object, or ErrEmpty if all n are in use (ErrClosed after Close). It never
// allocates and never waits for a Put.
//
// Objects cached in other Ps' magazines count as free: Get drains them before it reports
// ErrEmpty, so without concurrent Gets and Puts ErrEmpty means exactly that all n are in use.
// Under concurrent use, ErrEmpty means they were, or that the last free objects were being
// moved by another goroutine's Get or Put at the time (as an object being put back was always
// out of sight until its Put finished).
func (l *List[T]) Get() (*T, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	s := &l.s
	id := pcpu.Pin()
	if uint(id) < uint(len(s.mags)) {
		if c := s.popCur(&s.mags[id]); c != nil { // placed nothing: no waiter to wake
			pcpu.Unpin()
			return &c.obj, nil
		}
	}
	pcpu.Unpin()
	return l.get()
}

// get is Get's general case: the P's magazines, the depot and the free stack, then every P's
// magazines.
func (l *List[T]) get() (*T, error) {
	if l.s.tab.Load() == nil { // the zero value: never made (a made stack has a table)
		return nil, ErrNotMade
	}
	c, placed := l.s.get()
	if c == nil {
		var p bool
		c, p = l.s.getSlow()
		placed = placed || p
	}
	if placed && l.waiters.Load() > 0 {
		// This Get moved free objects into a magazine or the depot, perhaps past a waiter's
		// last look: hand them over (see waiters).
		l.wake()
	}
	if c == nil {
		return nil, ErrEmpty
	}
	return &c.obj, nil
}

// GetCtx returns a free object, waiting for a Put if all are in use. It returns ctx.Err() if ctx
// is done first, or ErrClosed if the List is or gets closed. Waiters are served oldest first; a
// Get that does not wait may still take an object ahead of them. As with a semaphore, GetCtx may
// succeed without waiting even when ctx is already done.
//
// A nil ctx is refused with an error (whether or not an object is free), and changes nothing;
// a ctx whose Done closed while its Err is nil (against the context.Context contract) gets an
// error too, never a nil object with a nil error.
//
// Waiting allocates (a channel); the non-waiting path does not.
func (l *List[T]) GetCtx(ctx context.Context) (*T, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if p, err := l.Get(); err != ErrEmpty {
		return p, err
	}
	done := ctx.Done() // before we are queued: a Done that panics leaves no waiter behind
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	l.waiters.Add(1)
	if l.s.biased {
		// A Put in a P's plain mode (magazine.go) pushes with a plain store, then loads
		// waiters: the machine may let the load pass the store, so that the Put sees no waiter
		// while our look below misses its object (in a cur that was empty, which a drain does
		// not revoke). The barrier runs a full fence on every running thread: a Put whose load
		// came before that fence has its store visible to our look, and one whose load came
		// after sees our count (the asymmetric Dekker pair of plain mode, with the waiter,
		// the slow side, paying).
		membarrier.Barrier()
	}
	if c, _ := l.s.getSlow(); c != nil {
		l.waiters.Add(-1)
		l.mu.Unlock()
		return &c.obj, nil
	}
	ch := make(chan *cell[T], 1)
	l.queue = append(l.queue, ch)
	l.mu.Unlock()

	select {
	case c := <-ch:
		return l.handed(c)
	case <-done:
	}
	l.mu.Lock()
	for k, q := range l.queue {
		if q == ch {
			l.queue = append(l.queue[:k], l.queue[k+1:]...)
			l.waiters.Add(-1)
			l.mu.Unlock()
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, errDoneNoErr // a Context that breaks its contract: never (nil, nil)
		}
	}
	l.mu.Unlock()
	// A Put or Close dequeued us before we could: its send is already in ch.
	return l.handed(<-ch)
}

// errNilContext is GetCtx's answer to a nil context (which would otherwise leave a waiter queued
// that nobody reads: the next Put's object would be handed to it and lost).
var errNilContext = errors.New("alloc: List.GetCtx: nil context")

// errDoneNoErr is GetCtx's answer when ctx's Done channel closed but its Err is nil (which the
// context.Context contract rules out): an error, so the caller never gets no object and no error.
var errDoneNoErr = errors.New("alloc: List.GetCtx: context done, but its Err is nil")

func (l *List[T]) handed(c *cell[T]) (*T, error) {
	if c == nil {
		return nil, ErrClosed
	}
	return &c.obj, nil
}

// Put gives p back for re-use, running the reset hook on it first, and hands a free object to the
// oldest waiter in GetCtx, if any. It returns a [*PutError] matching ErrForeign if p is nil or not
// from this List (also one that no Get ever handed out), or ErrDoublePut if p is already free
// after a Get handed it out; the List is unchanged then. Put works
// after Close.
func (l *List[T]) Put(p *T) error {
	if err := l.s.put(p); err != nil {
		return err
	}
	if l.waiters.Load() > 0 {
		l.wake()
	}
	return nil
}

// wake hands free objects to parked waiters, oldest first, while both last.
func (l *List[T]) wake() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.queue) > 0 {
		c, _ := l.s.getSlow()
		if c == nil {
			return
		}
		l.queue[0] <- c // never blocks: room for one, and only we send, once
		l.queue[0] = nil
		l.queue = l.queue[1:]
		l.waiters.Add(-1)
	}
}

// Close makes Get and GetCtx return ErrClosed from now on, and wakes every waiting GetCtx with
// ErrClosed. Objects in use may still be put back. Close is idempotent.
func (l *List[T]) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed.Store(true)
	for _, ch := range l.queue {
		ch <- nil
	}
	l.waiters.Add(-int32(len(l.queue)))
	l.queue = nil
	return nil
}

// Owns reports whether p points to an object of this List, free or in use.
func (l *List[T]) Owns(p *T) bool {
	c, _ := l.s.find(p)
	return c != nil
}

// Len returns the number of objects the List holds.
func (l *List[T]) Len() int { return l.n }

// Stats returns the List's counters. Get and Put update no counter: Stats counts by reading
// every object's state, so it costs O(Objects) and is for monitoring, not for a hot path. It is
// exact when no Get or Put runs concurrently (objects cached in per-P magazines count as free),
// and a snapshot otherwise (see the package documentation).
func (l *List[T]) Stats() Stats { return l.s.stats() }

// Traits describes List: concurrent, lock-free, fails (or waits, with GetCtx) when empty, never
// grows.
func (l *List[T]) Traits() Traits {
	return Traits{Concurrent: true, LockFree: true, OnEmpty: EmptyFail, CanWait: true, Capacity: l.n}
}

var _ Allocator[int] = (*List[int])(nil)
