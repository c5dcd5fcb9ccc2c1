package sdmatest_test

import (
	"sync"
	"testing"

	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestDiscardSinkConcurrentSameEngine: deliveries to one engine index from several goroutines at
// once (engines of the same index on devices sharing the sink) are all counted, whichever of the
// sink's two paths (the held one, the shared one) each took.
func TestDiscardSinkConcurrentSameEngine(t *testing.T) {
	var d sdmatest.DiscardSink
	const goroutines, each = 4, 2000
	seg := [][]byte{make([]byte, 3), make([]byte, 5)}
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(engine int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := d.Deliver(engine, seg); err != nil {
					t.Error(err)
					return
				}
			}
		}(g % 2) // two goroutines per engine index
	}
	wg.Wait()
	if p, b := d.Packets(), d.Bytes(); p != goroutines*each || b != goroutines*each*8 {
		t.Fatalf("%d packets, %d bytes; want %d, %d", p, b, goroutines*each, goroutines*each*8)
	}
}

// TestDiscardSinkAllocs: counting a packet allocates nothing.
func TestDiscardSinkAllocs(t *testing.T) {
	var d sdmatest.DiscardSink
	seg := [][]byte{make([]byte, 8)}
	if n := testing.AllocsPerRun(100, func() { _ = d.Deliver(0, seg) }); n != 0 {
		t.Fatalf("Deliver: %v allocs", n)
	}
}
