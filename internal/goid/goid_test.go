package goid

import "testing"

// TestID: the id is non-zero, stable within a goroutine, and differs between goroutines.
func TestID(t *testing.T) {
	me := ID()
	if me == 0 || ID() != me {
		t.Fatalf("ID %d, then %d", me, ID())
	}
	const n = 8
	ids := make(chan uint64, n)
	for range n {
		go func() { ids <- ID() }()
	}
	seen := map[uint64]bool{me: true}
	for range n {
		id := <-ids
		if id == 0 || seen[id] {
			t.Fatalf("goroutine id %d: zero or seen before", id)
		}
		seen[id] = true
	}
}
