package ring

import (
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// TestResetRefusesUnpublishedReservation: Reset's precondition is that no reservation is
// unpublished (the kernel's sw clean holds tail_lock). An abandoned reservation that a Reset
// went past stayed usable: after Reset(0) and Open, a new Reserve got the same slots, the stale
// reservation's Write overwrote them and its Publish (its start equal to the new tail) published
// them, and the new owner's Publish then panicked with ErrOrder; with Reset to any other start
// the stale Publish waited forever. Reset now refuses, before it changes anything, with a panic
// matching ErrOrder: the reservation can still be published and the ring Reset after.
func TestResetRefusesUnpublishedReservation(t *testing.T) {
	for _, closed := range []bool{false, true} {
		r, err := New(64)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Enqueue(make([]desc.Desc, 3), 0); err != nil {
			t.Fatal(err)
		}
		v, err := r.Reserve(5)
		if err != nil {
			t.Fatal(err)
		}
		if closed {
			r.Close()
		}
		seq, ep := r.Seq().Count(), r.Epoch()
		p := panicOf(func() { r.Reset(0) })
		if !isErr(p, ErrOrder) {
			t.Fatalf("closed %v: Reset with [3, 8) reserved and unpublished: panic %v, want ErrOrder", closed, p)
		}
		if r.Tail() != 3 || r.Reserved() != 8 || r.SwHead() != 0 || r.Seq().Count() != seq || r.Epoch() != ep || r.Closed() != closed {
			t.Fatalf("closed %v: the refused Reset changed the ring: tail %d reserved %d swHead %d seq %d epoch %d closed %v",
				closed, r.Tail(), r.Reserved(), r.SwHead(), r.Seq().Count(), r.Epoch(), r.Closed())
		}
		v.Write(0, make([]desc.Desc, 5), 0)
		v.Publish()
		r.Reset(0)
		if r.Tail() != 0 || r.Reserved() != 0 || !r.Empty() || r.Epoch() != ep+1 {
			t.Fatalf("closed %v: Reset after the Publish: tail %d reserved %d", closed, r.Tail(), r.Reserved())
		}
	}
}
