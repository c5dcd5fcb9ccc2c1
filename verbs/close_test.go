package verbs

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

type onceDone struct {
	n        atomic.Int32
	accepted atomic.Bool
	path     Path
}

func (d *onceDone) Done(p Path, err error) { d.n.Add(1) }

// Flows send on both paths while the SDMA engines stop, start and halt, and the SDMA device
// closes at a random moment: every packet Send accepted (nil, or sdma.ErrNotRunning on the SDMA
// path) is told Done exactly once, no refused one is, and both devices close with nothing left.
func TestFlowsAcrossSDMACloseConcurrent(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	sdmatest.CloseRaces(t, rounds, func(round int, race *sdmatest.CloseRace, rng *rand.Rand) {
		sd, s := race.Dev, race.Seed
		d, err := New(Config{SDMA: sd, ManualPIO: race.Manual})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var recs []*onceDone
		race.Workers, race.Pause = 4, 100*time.Microsecond
		race.Before, race.After = 3*time.Millisecond, 200*time.Microsecond // flows go on: SDMA refuses, PIO sends
		if race.Manual {
			race.Drive = func() {
				d.Process()
				for i := 0; i < sd.NumEngines(); i++ {
					sd.Engine(i).Process()
					sd.Engine(i).Poll()
				}
			}
		}
		race.Work = func(fl int, stop *atomic.Bool) {
			r := rand.New(rand.NewPCG(s, uint64(fl)))
			f := d.NewFlow(uint32(fl), 0)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for seq := 0; !stop.Load(); seq++ {
				c := &onceDone{}
				n := 16 + r.IntN(600)
				p, err := f.Send(ctx, [][]byte{packet(uint64(fl), uint64(seq), n)}, c)
				c.path = p
				if err == nil || (p == PathSDMA && errors.Is(err, sdma.ErrNotRunning)) {
					c.accepted.Store(true)
				} else if !errors.Is(err, sdma.ErrClosed) && !errors.Is(err, sdma.ErrNotRunning) {
					t.Errorf("flow %d: Send: %v (path %v)", fl, err, p)
					return
				}
				mu.Lock()
				recs = append(recs, c)
				mu.Unlock()
			}
		}
		if err := race.Run(rng); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for i, c := range recs {
			want := int32(0)
			if c.accepted.Load() {
				want = 1
			}
			if got := c.n.Load(); got != want {
				t.Fatalf("seed %d round %d manual %v: packet %d (path %v, accepted %v): %d Done calls", s, round, race.Manual, i, c.path, want == 1, got)
			}
		}
		mu.Unlock()
	})
}
