package usdma

import (
	"context"
	"slices"
	"sync/atomic"
)

// CompState is the state of a completion ring entry (hfi1: enum hfi1_sdma_comp_state).
type CompState uint32

const (
	Free     CompState = iota // FREE: never used
	Queued                    // QUEUED: a request on this slot was accepted and is being sent
	Complete                  // COMPLETE: every packet of the request completed OK
	Error                     // ERROR: the request failed; Errcode says why
)

// String names the state as the uapi does.
func (s CompState) String() string {
	switch s {
	case Free:
		return "FREE"
	case Queued:
		return "QUEUED"
	case Complete:
		return "COMPLETE"
	case Error:
		return "ERROR"
	}
	return "CompState(" + utoa(uint64(s)) + ")"
}

// CompEntry is a snapshot of one completion ring entry (hfi1: struct hfi1_sdma_comp_entry).
type CompEntry struct {
	Status  CompState // FREE, QUEUED, COMPLETE or ERROR (the kernel's comp_state)
	Errcode uint32    // with Error: the errno (EFAULT, ECOMM, ...) or ErrcodeAborted; 0 otherwise
}

// compEntry is one entry of the ring as the kernel maps it to user space: two words, written
// by the queue and read by pollers without a lock.
//
// Memory ordering (hfi1: set_comp_state's smp_wmb between errcode and status): the writer
// stores errcode first and status second; both are atomic stores (sequentially consistent in
// Go, so the status store is a release of the errcode store). A poller loads status first and
// errcode second: if it loads Error, the errcode store that preceded it is visible, so the pair
// it reads is the one written together. The status word is the only one that tells the poller
// anything; errcode is meaningful only after status was read as Error. A slot is written only
// by the request that holds it (QUEUED on Submit, COMPLETE or ERROR once when the request
// ends), so the pair is stable until the caller submits on the slot again. As set_comp_state,
// only ERROR writes errcode, and a read of any other status reports errcode 0: so a poller whose
// two loads straddle the slot's reuse reads ERROR with that request's errcode (or a later
// ERROR's), never ERROR with 0, nor another state with an errcode.
type compEntry struct {
	status  atomic.Uint32 // CompState; the store that publishes the entry
	errcode atomic.Uint32 // written before status
}

func (c *compEntry) set(st CompState, errcode uint32) {
	if st == Error { // hfi1: set_comp_state writes the errcode for ERROR only
		c.errcode.Store(errcode) // first: published by the status store below
	}
	c.status.Store(uint32(st)) // release: a poller that sees st sees errcode
}

func (c *compEntry) load() CompEntry {
	return c.entry(CompState(c.status.Load())) // acquire: pairs with set's status store
}

// entry is the entry whose status was read as st: with ERROR the errcode, loaded now; 0 for
// any other state, whose errcode word may hold an earlier or a later ERROR's.
func (c *compEntry) entry(st CompState) CompEntry {
	if st != Error {
		return CompEntry{Status: st}
	}
	return CompEntry{Status: st, Errcode: c.errcode.Load()}
}

// Comp reads completion slot slot without a lock, as a PSM poller reads the mapped ring.
// An out-of-range slot reads as Free. Safe for concurrent use with everything.
func (pq *PktQ) Comp(slot int) CompEntry {
	if slot < 0 || slot >= len(pq.comps) {
		return CompEntry{}
	}
	c := &pq.comps[slot]
	st := CompState(c.status.Load())
	if pq.test != nil && pq.test.compWindow != nil {
		pq.test.compWindow()
	}
	return c.entry(st)
}

// Slots returns the number of request slots, which is the size of the completion ring
// (hfi1: n_max_reqs, hfi1_sdma_comp_ring_size).
func (pq *PktQ) Slots() int { return len(pq.comps) }

// waiter is one Wait call's wake-up: closed by the request's end, with its outcome.
type waiter struct {
	ch  chan struct{}
	err error // the request's outcome, written before ch is closed
}

// Wait blocks until the request on slot has ended, or ctx is done, and returns its outcome:
// nil for Complete, a *CompError (matching ErrFault, and the first cause) for Error. A slot
// that has already ended returns at once with the outcome of its last request; a slot never
// used is ErrSlotFree; an out-of-range slot, or a nil ctx, ErrInvalid. Safe for concurrent use; each call
// that has to wait allocates its wake-up, and takes it back if ctx ends first.
func (pq *PktQ) Wait(ctx context.Context, slot int) error {
	if ctx == nil {
		return reqErr(slot, ErrInvalid, "nil context")
	}
	if slot < 0 || slot >= len(pq.comps) {
		if len(pq.comps) == 0 {
			return errZeroPktQ("Wait")
		}
		return reqErr(slot, ErrInvalid, "slot out of 0.."+itoa(len(pq.comps)-1))
	}
	pq.compMu.Lock()
	r := &pq.reqs[slot]
	switch pq.comps[slot].load().Status {
	case Free:
		pq.compMu.Unlock()
		return reqErr(slot, ErrSlotFree, "no request was ever submitted on it")
	case Complete, Error:
		err := r.outcome
		pq.compMu.Unlock()
		return err
	}
	w := &waiter{ch: make(chan struct{})}
	r.waiters = append(r.waiters, w)
	pq.compMu.Unlock()
	select {
	case <-w.ch:
		return w.err
	case <-ctx.Done():
		pq.dropWaiter(r, w)
		return ctx.Err()
	}
}

// dropWaiter takes w, a Wait given up, off r's list, unless the request's end took it already:
// a poller that waits with short timeouts leaves nothing behind.
func (pq *PktQ) dropWaiter(r *request, w *waiter) {
	pq.compMu.Lock()
	defer pq.compMu.Unlock()
	if i := slices.Index(r.waiters, w); i >= 0 {
		r.waiters = slices.Delete(r.waiters, i, i+1)
	}
}
