package sdmatest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gosdma/gosdma/sdma"
)

// CloseRace is one round of a close race, for the tests of a layer built on sdma (usdma, verbs):
// workers send through the layer while a chaos goroutine stops and starts the device's engines
// (and, with Halts, halts them), and the device closes at a random moment; the workers go on for
// a while against the closed device, then every goroutine is stopped and waited for. What the
// layer promises across the Close (every send it accepted ends exactly once, no refused one
// does) is the caller's to check once Run returned.
type CloseRace struct {
	// Dev is the device that closes; Manual says it is a Manual one, which Drive must drive.
	Dev    *sdma.Device
	Manual bool
	// Workers goroutines each run Work(i, stop), i from 0: worker i sends until stop reports true.
	Workers int
	Work    func(i int, stop *atomic.Bool)
	// Drive, if not nil, is called in a loop on a goroutine of its own until the workers have
	// returned: the Process and Poll calls of a Manual device (and of the layer's own manual
	// parts).
	Drive func()
	// Seed seeds the chaos goroutine. Each of its steps picks an engine and stops and restarts
	// it or, with Halts, one time in two injects a halt (sdma.CauseHalt) instead; then it
	// pauses for a random time below Pause.
	Seed  uint64
	Halts bool
	Pause time.Duration
	// Close comes after a random wait below Before; the workers go on for After past it.
	Before, After time.Duration
}

// Run runs the round, drawing the moment of the Close from rng, and returns when every goroutine
// it started has returned. It returns Close's error. A nil Dev or rng, or Workers with a nil
// Work, is refused with an error matching sdma.ErrInvalid before anything starts (they would
// panic on a goroutine of Run's, crashing the test binary).
func (c *CloseRace) Run(rng *rand.Rand) error {
	switch {
	case c.Dev == nil:
		return errNil("CloseRace.Run", "Dev")
	case rng == nil:
		return errNil("CloseRace.Run", "rng")
	case c.Workers > 0 && c.Work == nil:
		return fmt.Errorf("sdmatest.CloseRace.Run: %d Workers with a nil Work: %w", c.Workers, sdma.ErrInvalid)
	}
	var stop, dstop atomic.Bool // workers and chaos; Drive, once the workers returned
	var wg, dwg sync.WaitGroup
	if c.Drive != nil {
		dwg.Add(1)
		go func() {
			defer dwg.Done()
			for !dstop.Load() {
				c.Drive()
			}
		}()
	}
	for i := range c.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Work(i, &stop)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(c.Seed, 99))
		for !stop.Load() {
			e := c.Dev.Engine(r.IntN(c.Dev.NumEngines()))
			if c.Halts && r.IntN(2) == 1 {
				_ = InjectHalt(e, sdma.CauseHalt)
			} else if err := e.Stop(); err == nil {
				_ = e.Start()
			}
			time.Sleep(randBelow(r, c.Pause))
		}
	}()
	time.Sleep(randBelow(rng, c.Before))
	err := c.Dev.Close()
	time.Sleep(c.After)
	stop.Store(true)
	wg.Wait()
	dstop.Store(true)
	dwg.Wait()
	return err
}

// randBelow returns a random duration in [0, d), 0 if d is not positive.
func randBelow(r *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(r.Int64N(int64(d)))
}

// TB is the part of testing.TB that CloseRaces uses.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
}

// CloseRaces runs rounds rounds of a close race, stopping early once t has failed. It logs the
// run's seed, then gives round, for each round, a CloseRace on a new device (two engines, a
// ring of 64, Manual one round in three) with Dev, Manual and Seed set: round fills in the
// rest, runs it with rng, and checks what the layer promised.
func CloseRaces(t TB, rounds int, round func(n int, race *CloseRace, rng *rand.Rand)) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for n := 0; n < rounds && !t.Failed(); n++ {
		race := &CloseRace{Seed: rng.Uint64(), Manual: rng.IntN(3) == 0}
		dev, err := sdma.NewDevice(sdma.Config{Engines: 2, RingSize: 64, Manual: race.Manual})
		if err != nil {
			t.Fatalf("round %d: NewDevice: %v", n, err)
		}
		race.Dev = dev
		round(n, race, rng)
	}
}
