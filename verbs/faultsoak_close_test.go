package verbs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/leakcheck"
	"github.com/gosdma/gosdma/pio"
	"github.com/gosdma/gosdma/sdma"
	"go.uber.org/goleak"
)

// blockSink blocks the first Deliver until release is closed, after telling entered.
type blockSink struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (s *blockSink) Deliver(int, [][]byte) error {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.entered)
		<-s.release
	}
	return nil
}

// TestCloseTwiceConcurrentWaitsForTheWork: a Close that finds another one at work returns only
// once every PIO context is closed (context 0's Close waits for the Sink, context 1 is not reached), as pio's Close does for its context: it returned nil at once,
// while the first Close was still closing the contexts (a Sink held up its chip), so the caller's
// "closed" saw contexts still enabled and PIO packets not yet released.
func TestCloseTwiceConcurrentWaitsForTheWork(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	sink := &blockSink{entered: make(chan struct{}), release: make(chan struct{})}
	sd, err := sdma.NewDevice(sdma.Config{Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	d, err := New(Config{SDMA: sd, Contexts: 2})
	if err != nil {
		t.Fatal(err)
	}
	f := d.NewFlow(0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.Send(ctx, [][]byte{make([]byte, 64)}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sink.entered:
	case <-ctx.Done():
		t.Fatal("the chip never delivered the packet")
	}
	first := make(chan error, 1)
	go func() { first <- d.Close() }() // waits for the chip's Deliver
	for !d.closed.Load() {
		time.Sleep(time.Millisecond)
	}
	second := make(chan error, 1)
	go func() { second <- d.Close() }()
	waits := []chan error{first, second}
	select {
	case err := <-second:
		waits = waits[:1]
		if err != nil {
			t.Errorf("the second Close: %v", err)
		}
		open := 0
		for i := range d.NumContexts() {
			if d.Context(i).Enabled() { // not BufferAlloc: the first Close holds context 0's lock
				open++
			}
		}
		if open > 0 {
			t.Errorf("the second Close returned %v with %d contexts not closed, the first Close still at work", err, open)
		}
	case <-time.After(50 * time.Millisecond):
	}
	close(sink.release)
	for _, c := range waits {
		select {
		case err := <-c:
			if err != nil {
				t.Errorf("Close: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("Close hangs")
		}
	}
}

// TestCloseRefusedInCallbackIsNotLost: a Close called where a PIO context refuses its own Close
// (a Sink on that context's chip goroutine) says so, and a later Close from elsewhere closes that
// context. It returned nil, marked the Device closed, left the context open, and every later
// Close returned nil at once: the context and its chip goroutine lived on for ever.
func TestCloseRefusedInCallbackIsNotLost(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	var d *Device
	inSink := make(chan error, 1)
	var once sync.Once
	sd, err := sdma.NewDevice(sdma.Config{Sink: sdma.SinkFunc(func(int, [][]byte) error {
		once.Do(func() { inSink <- d.Close() })
		return nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	d, err = New(Config{SDMA: sd})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.NewFlow(0, 0).Send(ctx, [][]byte{make([]byte, 64)}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-inSink:
		if !errors.Is(err, pio.ErrInvalid) {
			t.Errorf("Close from a Sink on the context's chip goroutine: %v, want pio.ErrInvalid", err)
		}
	case <-ctx.Done():
		t.Fatal("the chip never delivered the packet")
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close from the test: %v", err)
	}
	if d.Context(0).Enabled() {
		t.Error("after the Device's Close: context 0 still enabled")
	}
}

// panicMapper is a Mapper (not a SoleMapper: every AddKVAddr maps through MapSingle) whose
// MapSingle numbered panicAt (1-based) panics.
type panicMapper struct {
	dma.Mapper
	maps    atomic.Int32
	panicAt int32
}

func (m *panicMapper) MapSingle(buf []byte, dir dma.Direction) (dma.Addr, error) {
	if m.maps.Add(1) == m.panicAt {
		panic("panicMapper: MapSingle")
	}
	return m.Mapper.MapSingle(buf, dir)
}

// TestSendMapperPanicLeavesNothingMapped: a panic of the SDMA device's Mapper while Send builds an
// SDMA packet goes on to the caller (as usdma's Submit lets it), and the pieces of the packet
// mapped before it are unmapped: the flow sends on, nothing stays mapped once it drained, and no
// Completion is told of the packet that panicked. The mappings of the earlier pieces leaked (the
// txreq was dropped half built, never cleaned). Each piece of a packet of one, two and three
// segments panics in turn: a packet of one segment takes sendSDMA's add, without addSegs'
// deferred cleanup, which must leave nothing mapped as well.
func TestSendMapperPanicLeavesNothingMapped(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	for nseg := 1; nseg <= 3; nseg++ {
		for at := 1; at <= nseg; at++ {
			t.Run(fmt.Sprintf("segments=%d/panic=%d", nseg, at), func(t *testing.T) {
				sendMapperPanic(t, nseg, int32(at))
			})
		}
	}
}

// sendMapperPanic sends a packet of nseg segments whose Mapper panics at its at-th map, then one
// more, and checks that nothing stays mapped and only the second is told Done.
func sendMapperPanic(t *testing.T, nseg int, at int32) {
	iommu, err := dma.NewIOMMU(dma.IOMMUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m := &panicMapper{Mapper: iommu, panicAt: at}
	sd, err := sdma.NewDevice(sdma.Config{Manual: true, Mapper: m})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	d, err := New(Config{SDMA: sd, DisablePIO: true, ManualPIO: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	base := iommu.LiveCount() // the device's pad
	f := d.NewFlow(0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	buf := make([]byte, 3000)
	segs := make([][]byte, nseg)
	for i := range segs {
		segs[i] = buf[i*1000 : (i+1)*1000]
	}
	c := &rvRec{}
	func() {
		defer func() {
			if p := recover(); p != "panicMapper: MapSingle" {
				t.Errorf("Send under a panicking mapper: recovered %v, want the mapper's panic", p)
			}
		}()
		_, _ = f.Send(ctx, segs, c)
	}()
	if c.n.Load() != 0 {
		t.Errorf("the packet whose build panicked was told Done %d times", c.n.Load())
	}
	if n := iommu.LiveCount() - base; n != 0 {
		t.Errorf("after the panic: %d mappings left", n)
	}
	c2 := &rvRec{}
	if p, err := f.Send(ctx, segs, c2); p != PathSDMA || err != nil {
		t.Fatalf("Send after the panic: %v, %v", p, err)
	}
	if err := f.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if c2.n.Load() != 1 {
		t.Errorf("the packet after the panic was told Done %d times", c2.n.Load())
	}
	if n := iommu.LiveCount() - base; n != 0 {
		t.Errorf("after Drain: %d mappings left", n)
	}
}
