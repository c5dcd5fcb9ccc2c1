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
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := 0; round < rounds && !t.Failed(); round++ {
		s := rng.Uint64()
		manual := rng.IntN(3) == 0
		sd, err := sdma.NewDevice(sdma.Config{Engines: 2, RingSize: 64, Manual: manual})
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(Config{SDMA: sd, ManualPIO: manual})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var recs []*onceDone
		var stop, dstop atomic.Bool
		var wg, dwg sync.WaitGroup
		if manual {
			dwg.Add(1)
			go func() {
				defer dwg.Done()
				for !dstop.Load() {
					d.Process()
					for i := 0; i < sd.NumEngines(); i++ {
						sd.Engine(i).Process()
						sd.Engine(i).Poll()
					}
				}
			}()
		}
		for fl := 0; fl < 4; fl++ {
			wg.Add(1)
			go func(fl int) {
				defer wg.Done()
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
			}(fl)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(s, 99))
			for !stop.Load() {
				e := sd.Engine(r.IntN(2))
				if err := e.Stop(); err == nil {
					_ = e.Start()
				}
				time.Sleep(time.Duration(r.IntN(100)) * time.Microsecond)
			}
		}()
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		if err := sd.Close(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Microsecond) // flows go on: SDMA refuses, PIO sends
		stop.Store(true)
		wg.Wait()
		dstop.Store(true)
		dwg.Wait()
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
				t.Fatalf("seed %d round %d manual %v: packet %d (path %v, accepted %v): %d Done calls", s, round, manual, i, c.path, want == 1, got)
			}
		}
		mu.Unlock()
	}
}
