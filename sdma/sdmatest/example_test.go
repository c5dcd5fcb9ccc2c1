package sdmatest_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// A device-wide freeze, as the kernel runs it around a chip freeze or a link bounce: the
// engines stop (FreezeNotify), clean up — what they held completes aborted — (Freeze), and run
// again on a fresh ring (Unfreeze).
func ExampleFreeze() {
	dev, err := sdma.NewDevice(sdma.Config{Engines: 2, Manual: true})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	e := dev.Engine(0)
	send := func() {
		tx := new(sdma.TxReq)
		_ = tx.Init(0, 8, sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) {
			fmt.Println("completed:", st)
		}))
		_ = tx.AddKVAddr(dev, make([]byte, 8))
		if err := e.Send(nil, tx, false); err != nil {
			fmt.Println("send:", err)
		}
	}
	send() // in the ring when the freeze comes

	_ = sdmatest.FreezeNotify(dev, false) // hfi1: sdma_freeze_notify
	fmt.Println(sdmatest.EngineState(e), sdmatest.EngineState(dev.Engine(1)))
	_ = sdmatest.Freeze(dev) // hfi1: sdma_freeze: the sw clean aborts what the engines held
	fmt.Println(sdmatest.EngineState(e))
	_ = sdmatest.Unfreeze(dev) // hfi1: sdma_unfreeze
	fmt.Println(sdmatest.EngineState(e))
	send()
	_, _ = e.Process()
	// Output:
	// s80_hw_freeze s80_hw_freeze
	// completed: aborted
	// s82_freeze_sw_clean
	// s99_running
	// completed: ok
}

// A fault plan halts the hardware model at a chosen descriptor; the engine recovers inside the
// call that met the halt, completes what it held aborted, and History shows the way.
func ExampleSetFaults() {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64})
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	e := dev.Engine(0)
	if err := sdmatest.SetFaults(e, sdmatest.FaultPlan{HaltAt: 1, HaltCause: sdma.CauseWrongDW}); err != nil {
		panic(err)
	}
	tx := new(sdma.TxReq)
	_ = tx.Init(0, 8, sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) { fmt.Println("completed:", st) }))
	_ = tx.AddKVAddr(dev, make([]byte, 8))
	_ = e.Send(nil, tx, true)
	_, err = e.Process()
	fmt.Println(errors.Is(err, sdma.ErrHalted), errors.Is(e.HaltCause(), sdma.ErrHalted), sdmatest.EngineState(e))
	h := sdmatest.History(e)
	fmt.Println(h[len(h)-1].To)
	// Output:
	// completed: aborted
	// true true s99_running
	// s99_running
}

// TestFaultSink: a FaultSink fails and stalls a share of the deliveries; a failure is recorded
// against the engine (not a halt) and the txreq still completes OK.
func TestFaultSink(t *testing.T) {
	cs := &sdmatest.CaptureSink{}
	fs := &sdmatest.FaultSink{Sink: cs, FailRate: 0.5, StallRate: 0.1, Stall: time.Microsecond, Seed: 9}
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64, Sink: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	e := dev.Engine(0)
	ok := 0
	c := sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) {
		if st == sdma.StatusOK {
			ok++
		}
	})
	txs := make([]sdma.TxReq, 4)
	for range 10 {
		for i := range txs {
			if err := txs[i].Init(0, 8, c); err != nil {
				t.Fatal(err)
			}
			if err := txs[i].AddKVAddr(dev, make([]byte, 8)); err != nil {
				t.Fatal(err)
			}
			if err := e.Send(nil, &txs[i], true); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.Process(); err != nil {
			t.Fatal(err)
		}
	}
	if ok != 40 {
		t.Fatalf("%d of 40 completed OK", ok)
	}
	if fs.Failed() == 0 || fs.Stalled() == 0 {
		t.Fatalf("failed %d, stalled %d: want both nonzero", fs.Failed(), fs.Stalled())
	}
	if got := uint64(cs.Count()) + fs.Failed(); got != 40 {
		t.Fatalf("captured + failed = %d, want 40", got)
	}
	if s := e.Stats(); s.SinkErrors != fs.Failed() || s.Faults != 0 {
		t.Fatalf("stats: %d sink errors (want %d), %d faults (want 0: a failed delivery does not halt)", s.SinkErrors, fs.Failed(), s.Faults)
	}
	if !errors.Is(e.SinkError(), sdma.ErrInjected) {
		t.Fatalf("SinkError %v, want ErrInjected", e.SinkError())
	}
}

// countBatch is a BatchSink that counts what it is given.
type countBatch struct{ delivered, queued, flushed, flushes int }

func (c *countBatch) Deliver(int, [][]byte) error { c.delivered++; return nil }
func (c *countBatch) BatchLimit() (int, int)      { return 8, 0 }
func (c *countBatch) Queue(int, [][]byte) error   { c.queued++; return nil }
func (c *countBatch) Flush(_ int, errs []error)   { c.flushed += len(errs); c.flushes++ }

// TestFaultBatchSink: the batching survives the fault injector: packets are queued and flushed
// in batches, the ones drawn to fail are never queued, and the engine counts them.
func TestFaultBatchSink(t *testing.T) {
	cb := &countBatch{}
	fs := &sdmatest.FaultBatchSink{FaultSink: sdmatest.FaultSink{FailRate: 0.3, Seed: 5}, Batch: cb}
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 256, Sink: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	e := dev.Engine(0)
	txs := make([]sdma.TxReq, 40)
	for i := range txs {
		if err := txs[i].Init(0, 8, sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) {})); err != nil {
			t.Fatal(err)
		}
		if err := txs[i].AddKVAddr(dev, make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
		if err := e.Send(nil, &txs[i], true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Process(); err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	if fs.Failed() == 0 || st.SinkErrors != fs.Failed() {
		t.Fatalf("failed %d, sink errors %d: want equal, nonzero", fs.Failed(), st.SinkErrors)
	}
	if cb.queued != cb.flushed || cb.flushes < 40/8 || st.Flushes != uint64(cb.flushes) {
		t.Fatalf("queued %d, flushed %d in %d flushes (engine: %d): want batches of up to 8", cb.queued, cb.flushed, cb.flushes, st.Flushes)
	}
	if got := uint64(cb.queued+cb.delivered) + fs.Failed(); got != 40 {
		t.Fatalf("queued + delivered + failed = %d, want 40", got)
	}
}

// TestDiscardAndCaptureSink: DiscardSink counts packets and bytes; CaptureSink keeps them per engine
// and Reset forgets them.
func TestDiscardAndCaptureSink(t *testing.T) {
	var d sdmatest.DiscardSink
	var c sdmatest.CaptureSink
	for _, s := range []sdma.Sink{&d, &c} {
		if err := s.Deliver(1, [][]byte{[]byte("ab"), []byte("cde")}); err != nil {
			t.Fatal(err)
		}
	}
	if d.Packets() != 1 || d.Bytes() != 5 {
		t.Fatalf("DiscardSink: %d packets, %d bytes; want 1, 5", d.Packets(), d.Bytes())
	}
	if p := c.Packets(1); len(p) != 1 || string(p[0]) != "abcde" || c.Count() != 1 {
		t.Fatalf("CaptureSink: %q, count %d", p, c.Count())
	}
	c.Reset()
	if c.Count() != 0 {
		t.Fatal("Reset kept packets")
	}
}

// TestBadPlans: a bad fault plan, halt cause or event is refused with ErrInvalid and changes
// nothing.
func TestBadPlans(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	e := dev.Engine(0)
	for name, err := range map[string]error{
		"HaltRate 1.5":  sdmatest.SetFaults(e, sdmatest.FaultPlan{HaltRate: 1.5}),
		"HaltAt -1":     sdmatest.SetFaults(e, sdmatest.FaultPlan{HaltAt: -1}),
		"HaltCause -1":  sdmatest.SetFaults(e, sdmatest.FaultPlan{HaltCause: -1}),
		"CauseNone":     sdmatest.InjectHalt(e, sdma.CauseNone),
		"unknown event": sdmatest.RaiseEvent(e, sdmatest.Event(200), "bad"),
	} {
		if !errors.Is(err, sdma.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if sdmatest.EngineState(e) != sdmatest.S99Running || len(sdmatest.History(e)) != 3 {
		t.Fatalf("state %v, history %v: changed by refused calls", sdmatest.EngineState(e), sdmatest.History(e))
	}
}
