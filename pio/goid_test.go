package pio

import (
	"runtime"
	"testing"

	"github.com/gosdma/gosdma/internal/goid"
)

// TestChipIdentityWithoutStack: the chip goroutine learns its identity (chipG) without
// runtime.Stack where the build has getg (amd64, arm64; not purego): New and Close of contexts
// with a chip goroutine leave goid.IDCalls unchanged and onChip allocates nothing; without getg
// each New pays one (the fallback, so the counter is seen to work). chipG names the goroutine
// while it runs and is cleared once it has ended (the runtime may hand its g to another). The
// own-goroutine checks themselves are the goexit_* tests'.
func TestChipIdentityWithoutStack(t *testing.T) {
	const n = 16
	before := goid.IDCalls()
	for range n {
		sc, err := New(Config{Type: Kernel, Credits: 8})
		if err != nil {
			t.Fatal(err)
		}
		for sc.chipG.Load() == 0 { // the chip goroutine has not run yet
			runtime.Gosched()
		}
		if sc.onChip() {
			t.Fatal("onChip on the test's goroutine")
		}
		if err := sc.Close(); err != nil {
			t.Fatal(err)
		}
		if g := sc.chipG.Load(); g != 0 {
			t.Fatalf("chipG %#x after the chip goroutine ended", g)
		}
	}
	calls := goid.IDCalls() - before
	if !goid.HaveG {
		if calls < n {
			t.Fatalf("without getg: %d runtime.Stack calls for %d contexts, want at least one each", calls, n)
		}
		return
	}
	if calls != 0 {
		t.Fatalf("with getg: %d runtime.Stack calls for %d contexts, want 0", calls, n)
	}
	sc, err := New(Config{Type: Kernel, Credits: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if a := testing.AllocsPerRun(100, func() { _ = sc.onChip() }); a != 0 {
		t.Fatalf("onChip: %v allocations, want 0", a)
	}
}
