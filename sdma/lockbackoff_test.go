package sdma

import "testing"

// TestWaitBackoffStartsOverWhenTurnMoves: a waiter's backoff (wait) starts over when the turn
// moves, and only then: a waiter that reached its sleeps behind a long hold spins again once the
// lock changes hands, so that a queue of short holds is not served through sleeps (the convoy
// of BenchmarkTicketLockContended), and one that sees the same turn keeps sleeping.
func TestWaitBackoffStartsOverWhenTurnMoves(t *testing.T) {
	b := waitBackoff{turn: 7}
	for b.park == 0 {
		b.seen(7)
		b.pause()
	}
	if b.i != spinPolls+yieldPolls {
		t.Fatalf("first sleep after %d polls, want %d", b.i, spinPolls+yieldPolls)
	}
	parked := b
	b.seen(7)
	if b != parked {
		t.Fatalf("the same turn reset the backoff: %+v, was %+v", b, parked)
	}
	b.seen(8)
	if b != (waitBackoff{turn: 8}) {
		t.Fatalf("a moved turn left the backoff at %+v, want it started over", b)
	}
}
