package goid

import "testing"

// requireNames checks that id names the calling goroutine: non-zero, stable within a goroutine,
// and different for each of several goroutines alive at once (the runtime cannot give a running
// goroutine's g to another).
func requireNames(t *testing.T, name string, id func() uint64) {
	t.Helper()
	me := id()
	if me == 0 || id() != me {
		t.Fatalf("%s %d, then %d", name, me, id())
	}
	const n = 8
	ids := make(chan uint64, n)
	hold := make(chan struct{})
	defer close(hold)
	for range n {
		go func() {
			v := id()
			if v != id() {
				v = 0
			}
			ids <- v
			<-hold
		}()
	}
	seen := map[uint64]bool{me: true}
	for range n {
		v := <-ids
		if v == 0 || seen[v] {
			t.Fatalf("%s %d: zero, unstable or seen before", name, v)
		}
		seen[v] = true
	}
}

// TestID: the id names the calling goroutine.
func TestID(t *testing.T) { requireNames(t, "ID", ID) }

// TestSelf: Self names the calling goroutine too; where the build has G it is G, costs no
// allocation and takes no runtime.Stack (IDCalls unchanged), elsewhere it is ID.
func TestSelf(t *testing.T) {
	requireNames(t, "Self", Self)
	calls := IDCalls()
	allocs := testing.AllocsPerRun(100, func() { _ = Self() })
	if !HaveG {
		if Self() != ID() || IDCalls() <= calls {
			t.Fatalf("without G, Self %d is not ID %d, or took no runtime.Stack", Self(), ID())
		}
		return
	}
	if Self() != uint64(G()) {
		t.Fatalf("Self %d, G %d", Self(), G())
	}
	if allocs != 0 || IDCalls() != calls {
		t.Fatalf("Self with G: %v allocations, %d runtime.Stack calls", allocs, IDCalls()-calls)
	}
}
