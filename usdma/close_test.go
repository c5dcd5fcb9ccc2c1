package usdma

import (
	"context"
	"errors"
	"math/rand/v2"
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
	sdmatest.CloseRaces(t, rounds, func(round int, race *sdmatest.CloseRace, rng *rand.Rand) {
		dev, s := race.Dev, race.Seed
		const slots = 4
		pq, err := New(Config{Device: dev, Slots: slots, Timeout: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ends := newEndCounter(pq)
		var submits [slots]int
		race.Workers, race.Halts, race.Pause = slots, true, 200*time.Microsecond
		race.Before, race.After = 5*time.Millisecond, 100*time.Microsecond
		if race.Manual {
			race.Drive = func() {
				for i := 0; i < dev.NumEngines(); i++ {
					dev.Engine(i).Process()
				}
			}
		}
		race.Work = func(slot int, stop *atomic.Bool) {
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
		}
		if err := race.Run(rng); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := pq.Close(ctx); err != nil {
			t.Fatalf("seed %d: pq.Close: %v", s, err)
		}
		cancel()
		ends.mu.Lock()
		for slot := 0; slot < slots; slot++ {
			if ends.ends[slot] != submits[slot] {
				t.Fatalf("seed %d round %d manual %v: slot %d: %d submits, %d ends (%v)", s, round, race.Manual, slot, submits[slot], ends.ends[slot], ends.state[slot])
			}
		}
		ends.mu.Unlock()
	})
}
