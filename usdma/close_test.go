package usdma

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// Submitters on their own slots (big messages on a small ring: the queue goes DEFERRED) while the
// SDMA engines stop, start and halt and the SDMA device closes at a random moment: every request
// Submit accepted ends exactly once, Wait returns for each, and the queue closes.
func TestSubmitAcrossSDMACloseConcurrent(t *testing.T) {
	rounds := 30
	if testing.Short() {
		rounds = 8
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := 0; round < rounds && !t.Failed(); round++ {
		s := rng.Uint64()
		manual := rng.IntN(3) == 0
		dev, err := sdma.NewDevice(sdma.Config{Engines: 2, RingSize: 64, Manual: manual})
		if err != nil {
			t.Fatal(err)
		}
		const slots = 4
		pq, err := New(Config{Device: dev, Slots: slots, Timeout: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ends := newEndCounter(pq)
		var stop, dstop atomic.Bool
		var wg, dwg sync.WaitGroup
		var submits [slots]int
		if manual {
			dwg.Add(1)
			go func() {
				defer dwg.Done()
				for !dstop.Load() {
					for i := 0; i < dev.NumEngines(); i++ {
						dev.Engine(i).Process()
					}
				}
			}()
		}
		for slot := 0; slot < slots; slot++ {
			wg.Add(1)
			go func(slot int) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(s, uint64(slot)))
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				for !stop.Load() {
					data := pattern(1+r.IntN(40000), byte(slot))
					info, hdr := Message(slot, 4096, testTemplate, data)
					err := pq.Submit(ctx, info, &hdr, data)
					if errors.Is(err, ErrSlotInUse) || errors.Is(err, ErrInvalid) && !errors.Is(err, sdma.ErrInvalid) {
						t.Errorf("slot %d: Submit: %v", slot, err)
						return
					}
					submits[slot]++
					if werr := pq.Wait(ctx, slot); errors.Is(werr, context.DeadlineExceeded) {
						t.Errorf("slot %d: Wait: %v (Submit: %v)", slot, werr, err)
						return
					}
				}
			}(slot)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(s, 99))
			for !stop.Load() {
				e := dev.Engine(r.IntN(2))
				if r.IntN(2) == 0 {
					if err := e.Stop(); err == nil {
						_ = e.Start()
					}
				} else {
					_ = sdmatestInjectHalt(e)
				}
				time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond)
			}
		}()
		time.Sleep(time.Duration(rng.IntN(5000)) * time.Microsecond)
		if err := dev.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Microsecond)
		stop.Store(true)
		wg.Wait()
		dstop.Store(true)
		dwg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := pq.Close(ctx); err != nil {
			t.Fatalf("seed %d: pq.Close: %v", s, err)
		}
		cancel()
		ends.mu.Lock()
		for slot := 0; slot < slots; slot++ {
			if ends.ends[slot] != submits[slot] {
				t.Fatalf("seed %d round %d manual %v: slot %d: %d submits, %d ends (%v)", s, round, manual, slot, submits[slot], ends.ends[slot], ends.state[slot])
			}
		}
		ends.mu.Unlock()
	}
}

func sdmatestInjectHalt(e *sdma.Engine) error { return sdmatest.InjectHalt(e, sdma.CauseHalt) }
