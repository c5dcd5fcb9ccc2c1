package sdma

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
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
	if cfg.Manual {
		r.drive()
	}
	// The registrar: register, let sends use it, deregister (waiting for the packets).
	var deregs atomic.Int64
	r.background(func() {
		for !r.dstop.Load() {
			reg, err := dev.Register(buf)
			if errors.Is(err, ErrClosed) {
				return // Close came: a closed device registers nothing
			}
			if err != nil {
				r.fail("Register: %v", err)
				return
			}
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
	})
	if halts {
		r.background(func() {
			for !r.dstop.Load() {
				err := dev.Engine(0).injectHalt(CauseHalt)
				if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotRunning) {
					r.fail("InjectHalt: %v", err)
				}
				time.Sleep(20 * time.Microsecond)
			}
		})
	}
	for s := 0; s < 4; s++ {
		rng := rand.New(rand.NewPCG(seed, uint64(s)))
		r.spinSender(dev.Engine(s%cfg.Engines), func() *tortRec { return r.build(rng) })
	}
	time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
	if err := dev.Close(); err != nil {
		r.fail("Close: %v", err)
	}
	r.end()
	desc := fmt.Sprintf("seed %d", seed)
	r.check(desc, iommu)
	for i := 0; i < cfg.Engines; i++ {
		st := dev.Engine(i).Stats()
		if n := st.Halts[CauseMemRead] + st.Halts[CauseLengthMismatch]; n != 0 {
			t.Fatalf("%s: engine %d: %d halts reading memory: %v", desc, i, n, dev.Engine(i).HaltCause())
		}
	}
	t.Logf("%s manual %v halts %v: %d txreqs, %d from registered memory, %d deregistrations", desc, cfg.Manual, halts, len(r.recs), r.regUses.Load(), deregs.Load())
}
