package verbs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/census"
	"github.com/gosdma/gosdma/internal/leakcheck"
	"github.com/gosdma/gosdma/sdma"
	"go.uber.org/goleak"
)

// TestCrossLayerClosesHandedOffFromCallbacks: the way out that Device.Close's and sdma's
// Device.Close's docs give for two callbacks of two layers that close each other's layer at once
// (called there, each Close waits for the other's goroutine for ever): the Sink, run by the SDMA
// engine's goroutine and by the PIO context's chip goroutine at once, hands the verbs Device's
// Close (from the engine) and the SDMA device's Close (from the chip) each to a goroutine of its
// own and returns. Both Closes return nil, the sends return, and no goroutine is left.
func TestCrossLayerClosesHandedOffFromCallbacks(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	var d *Device
	var sd *sdma.Device
	var engOnce, chipOnce sync.Once
	var both sync.WaitGroup // the two callbacks are in the Sink at once
	both.Add(2)
	closes := make(chan error, 2)
	sink := sdma.SinkFunc(func(engine int, _ [][]byte) error {
		if engine < sd.NumEngines() {
			engOnce.Do(func() { both.Done(); both.Wait(); go func() { closes <- d.Close() }() })
		} else {
			chipOnce.Do(func() { both.Done(); both.Wait(); go func() { closes <- sd.Close() }() })
		}
		return nil
	})
	var err error
	if sd, err = sdma.NewDevice(sdma.Config{Sink: sink}); err != nil {
		t.Fatal(err)
	}
	if d, err = New(Config{SDMA: sd}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var sends sync.WaitGroup
	for _, n := range []int{64, 1000} { // one by PIO, one by SDMA, on flows of their own
		f := d.NewFlow(uint32(n), 0)
		sends.Add(1)
		go func() {
			defer sends.Done()
			if _, err := f.Send(ctx, [][]byte{make([]byte, n)}, nil); err != nil {
				t.Errorf("Send of %d bytes: %v", n, err)
			}
		}()
	}
	for range 2 {
		select {
		case err := <-closes:
			if err != nil {
				t.Errorf("a Close handed off from the Sink: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("the Closes handed off from the Sink did not return in a minute")
		}
	}
	sends.Wait() // bounded by ctx
}

// unmapPanic is unmapPanicMapper's panic.
const unmapPanic = "unmapPanicMapper: UnmapSingle"

// unmapPanicMapper is a Mapper (not a SoleMapper: every add maps through MapSingle and every
// unmap goes through UnmapSingle) whose next UnmapSingle panics once armed.
type unmapPanicMapper struct {
	dma.Mapper
	armed atomic.Bool
}

func (m *unmapPanicMapper) UnmapSingle(addr dma.Addr, size int, dir dma.Direction) error {
	if m.armed.Swap(false) {
		panic(unmapPanic)
	}
	return m.Mapper.UnmapSingle(addr, size, dir)
}

// sendArmed arms m, so that its next unmap panics, and sends one SDMA packet on a new flow of d:
// the add maps (MapSingle), the packet's completion unmaps, and panics.
func sendArmed(d *Device, m *unmapPanicMapper, c Completion) (*Flow, error) {
	m.armed.Store(true)
	f := d.NewFlow(0, 0)
	if p, err := f.Send(context.Background(), [][]byte{make([]byte, 1000)}, c); p != PathSDMA || err != nil {
		return nil, fmt.Errorf("Send: %v, %w", p, err)
	}
	return f, nil
}

// TestMapperUnmapPanicOnCallersGoroutine pins what a Mapper whose unmap panics in a completion
// pass does there when the pass runs on a caller's goroutine (hunt-close's "found, not fixed" b;
// documented on dma.Mapper and sdma.Config.Mapper): the panic is not recovered. It goes on to the
// caller of Drain, which ran the pass on a Manual device; the packet's Completion is never told,
// and the flow stays busy with it. The engine's lock stays held: every later pass of the engine,
// and the device's Close, would wait for ever, so the test stops here (a Manual device and
// ManualPIO have no goroutine to leave behind).
func TestMapperUnmapPanicOnCallersGoroutine(t *testing.T) {
	defer leakcheck.VerifyNone(t, goleak.IgnoreCurrent())
	iommu, err := dma.NewIOMMU(dma.IOMMUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m := &unmapPanicMapper{Mapper: iommu}
	sd, err := sdma.NewDevice(sdma.Config{Manual: true, Mapper: m})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{SDMA: sd, DisablePIO: true, ManualPIO: true})
	if err != nil {
		t.Fatal(err)
	}
	c := &rvRec{}
	f, err := sendArmed(d, m, c)
	if err != nil {
		t.Fatal(err)
	}
	var p any
	func() {
		defer func() { p = recover() }()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = f.Drain(ctx)
	}()
	if p != unmapPanic {
		t.Errorf("Drain over the pass whose unmap panicked: recovered %v, want the mapper's panic", p)
	}
	if n := c.n.Load(); n != 0 {
		t.Errorf("the packet whose unmap panicked was told Done %d times, want 0 (the pass ended in the panic)", n)
	}
	if _, s := f.Busy(); s != 1 {
		t.Errorf("the flow has %d SDMA packets in flight, want 1 (never completed)", s)
	}
}

// TestMapperUnmapPanicOnEngineGoroutine pins the other half (see the test above): in the
// completion pass run by the engine's own goroutine (CompleteInterrupt, the default), the
// Mapper's panic ends the program, in a child process here (internal/census).
func TestMapperUnmapPanicOnEngineGoroutine(t *testing.T) {
	r := census.Isolated(t, "unmap panic on the engine's goroutine", func() error {
		iommu, err := dma.NewIOMMU(dma.IOMMUConfig{})
		if err != nil {
			return err
		}
		m := &unmapPanicMapper{Mapper: iommu}
		sd, err := sdma.NewDevice(sdma.Config{Mapper: m})
		if err != nil {
			return err
		}
		d, err := New(Config{SDMA: sd, DisablePIO: true})
		if err != nil {
			return err
		}
		f, err := sendArmed(d, m, nil)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return f.Drain(ctx) // the engine's goroutine completes the packet, and panics
	})
	if !r.Crashed || !strings.Contains(r.Output, unmapPanic) {
		t.Errorf("an unmap panic in the engine goroutine's completion pass: %v, want the program ended by the mapper's panic", r)
	}
}
