package pio

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
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
// a sink's Goexit: the engine stays halted until Close, which completes everything) leaves the
// context's hwMu locked, because Process unlocks it without a defer (deliver's recover sees no
// panic and the goroutine ends): Close then hangs in Disable for ever, and so does every later
// Process. A Releaser's Goexit does the same with releaseMu (and allocMu when BufferAlloc or
// Disable ran the pass).
//
// Suggested fix (a design call, not made here): unlock hwMu (and, in the release pass,
// releaseMu; allocMu in BufferAlloc and Disable) with defers, and have run, when the chip
// goroutine ends by a Goexit, mark the context halted without a restart (flags scfHalted, chip
// off), so producers get ErrNotRunning instead of waiting for credits nobody returns, and Close
// flushes everything with PRCSCDisable, as sdma does for its engine (hwGone). Costs an
// open-coded defer on the packet path (measure with bench/icount.sh, Payload/impl=pio).
func TestSinkGoexitClose(t *testing.T) {
	t.Skip("bug: a Sink's runtime.Goexit on the chip goroutine leaves hwMu locked; Close hangs (see the suggested fix above)")
	sc, err := New(Config{Credits: 8, Threshold: 1, Sink: &goexitSink{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 8)}, nil); err != nil {
		t.Fatal(err)
	}
	for sc.Stats().Packets == 0 { // the chip took the packet up (and the sink ended its goroutine)
		runtime.Gosched()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc.Close()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang, not a timing assertion
		t.Fatal("Close hangs after a sink's Goexit on the chip goroutine")
	}
}
