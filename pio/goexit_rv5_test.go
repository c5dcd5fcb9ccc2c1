package pio

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
)

// goexitSink calls runtime.Goexit in its first Deliver (as t.FailNow does in a test's sink).
type goexitSink struct{ n atomic.Int32 }

func (s *goexitSink) Deliver(int, [][]byte) error {
	if s.n.Add(1) == 1 {
		runtime.Goexit()
	}
	return nil
}

// TestSinkGoexitClose: a Sink that ends the chip goroutine with runtime.Goexit (t.FailNow in a
// test's sink; verbs hands the SDMA device's sink to its PIO contexts, and package sdma survives
// a sink's Goexit) left the context's hwMu locked, because Process unlocked it without a defer
// (deliver's recover saw no panic and the goroutine ended): Close then hung in Disable for ever,
// and so did every later Process. Now deliver's handler releases hwMu and halts the context
// (CauseGoexit), run's marks the goroutine gone (Restart refuses), and Close flushes every packet
// once.
func TestSinkGoexitClose(t *testing.T) {
	sc, err := New(Config{Credits: 8, Threshold: 1, Sink: &goexitSink{}})
	if err != nil {
		t.Fatal(err)
	}
	rels := make([]countRel, 3)
	if err := sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 8)}, &rels[0]); err != nil {
		t.Fatal(err)
	}
	waitGoexitHalt(t, sc)
	// The halt stops allocations; what the producers had written stays for the flush.
	if _, err := sc.BufferAlloc(4, &rels[1]); err != ErrNotRunning {
		t.Fatalf("BufferAlloc after the chip goroutine's Goexit: %v, want ErrNotRunning", err)
	}
	if err := sc.Restart(); !errors.Is(err, ErrHalted) {
		t.Fatalf("Restart with the chip goroutine gone: %v, want the Goexit's halt", err)
	}
	if err := sc.Enable(); !errors.Is(err, ErrHalted) {
		t.Fatalf("Enable with the chip goroutine gone: %v, want the Goexit's halt", err)
	}
	bounded(t, "Close after a sink's Goexit on the chip goroutine", func() { sc.Close() })
	rels[0].want(t, "the packet whose Deliver exited", 1, PRCSCDisable)
	rels[1].want(t, "the refused allocation", 0, 0)
	if _, err := sc.BufferAlloc(4, nil); err != ErrClosed {
		t.Fatalf("BufferAlloc after Close: %v, want ErrClosed", err)
	}
}
