package sdma

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
)

// TestDeregisterInFlightCloseConcurrent: senders send packets from a buffer that another
// goroutine registers and deregisters over and over (Deregister with packets in flight), with
// halts and Close at a random moment. The hardware never reads deregistered memory (no
// CauseMemRead halt), every accepted txreq completes exactly once, nothing stays mapped.
func TestDeregisterInFlightCloseConcurrent(t *testing.T) {
	engTestNoLeak(t)
	rounds := 100
	if testing.Short() {
		rounds = 25
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := 0; round < rounds && !t.Failed(); round++ {
		deregRound(t, rng.Uint64())
	}
}

func deregRound(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	iommu := engTestIOMMU(t)
	cfg := Config{Mapper: iommu, Engines: 2, RingSize: 64, DescIntr: 1 + rng.IntN(16), Wait: WaitStrategy(rng.IntN(3))}
	cfg.Manual = rng.IntN(3) == 0
	halts := rng.IntN(2) == 0
	dev, err := NewDevice(cfg)
	require.NoError(t, err)
	buf := make([]byte, 3*dma.PageSize)
	for i := range buf {
		buf[i] = byte(i)
	}
	r := &tortRig{t: t, dev: dev, buf: buf}
	var stop, dstop atomic.Bool
	var wg, dwg sync.WaitGroup
	if cfg.Manual {
		for i := 0; i < cfg.Engines; i++ {
			dwg.Add(1)
			go func(e *Engine) {
				defer dwg.Done()
				for !dstop.Load() {
					if n, _ := e.Process(); n == 0 {
						runtime.Gosched()
					}
				}
			}(dev.Engine(i))
		}
	}
	// The registrar: register, let sends use it, deregister (waiting for the packets).
	var regs, deregs atomic.Int64
	dwg.Add(1)
	go func() {
		defer dwg.Done()
		for !dstop.Load() {
			reg, err := dev.Register(buf)
			if err != nil {
				r.fail("Register: %v", err)
				return
			}
			regs.Add(1)
			runtime.Gosched()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err = dev.Deregister(ctx, reg)
			cancel()
			if err != nil {
				r.fail("Deregister: %v", err)
				return
			}
			deregs.Add(1)
		}
	}()
	if halts {
		dwg.Add(1)
		go func() {
			defer dwg.Done()
			for !dstop.Load() {
				err := dev.Engine(0).injectHalt(CauseHalt)
				if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotRunning) {
					r.fail("InjectHalt: %v", err)
				}
				time.Sleep(20 * time.Microsecond)
			}
		}()
	}
	for s := 0; s < 4; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(s)))
			e := dev.Engine(s % cfg.Engines)
			for !stop.Load() {
				rec := r.build(rng)
				if rec == nil {
					return
				}
				for {
					err := e.Send(nil, &rec.tx, false)
					if errors.Is(err, ErrBusy) && !stop.Load() {
						runtime.Gosched()
						continue
					}
					r.result(rec, err)
					break
				}
			}
		}(s)
	}
	time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
	if err := dev.Close(); err != nil {
		r.fail("Close: %v", err)
	}
	r.closed.Store(true)
	stop.Store(true)
	wg.Wait()
	dstop.Store(true)
	dwg.Wait()
	if msg := r.errs.Load(); msg != nil {
		t.Fatalf("seed %d: %v", seed, msg)
	}
	for i := 0; i < cfg.Engines; i++ {
		st := dev.Engine(i).Stats()
		if n := st.Halts[CauseMemRead] + st.Halts[CauseLengthMismatch]; n != 0 {
			t.Fatalf("seed %d: engine %d: %d halts reading memory: %v", seed, i, n, dev.Engine(i).HaltCause())
		}
	}
	for i, rec := range r.recs {
		want := int32(0)
		if rec.accepted.Load() {
			want = 1
		}
		if got := rec.done.Load(); got != want {
			t.Fatalf("seed %d: txreq %d accepted %v: %d completions", seed, i, want == 1, got)
		}
	}
	if n := r.late.Load(); n != 0 {
		t.Fatalf("seed %d: %d completions after Close", seed, n)
	}
	if n := iommu.LiveCount(); n != 0 {
		t.Fatalf("seed %d: %d mappings left: %v", seed, n, iommu.Live())
	}
	t.Logf("seed %d manual %v halts %v: %d txreqs, %d from registered memory, %d deregistrations", seed, cfg.Manual, halts, len(r.recs), r.regUses.Load(), deregs.Load())
}
