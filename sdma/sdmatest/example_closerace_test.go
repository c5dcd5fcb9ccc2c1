package sdmatest_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// raceSends sets race up to send through the engines directly (a layer's test sends through
// the layer instead), counting per worker the sends the engine accepted and the completions;
// the returned check compares them once the round has run.
func raceSends(race *sdmatest.CloseRace) (check func() error) {
	const workers = 2
	dev := race.Dev
	var accepted [workers]int       // worker i's own count
	var ended [workers]atomic.Int64 // written by completion callbacks
	race.Workers, race.Halts, race.Pause = workers, true, 100*time.Microsecond
	race.Before, race.After = 2*time.Millisecond, 200*time.Microsecond
	if race.Manual {
		race.Drive = func() {
			for i := range dev.NumEngines() {
				_, _ = dev.Engine(i).Process()
				dev.Engine(i).Poll()
			}
		}
	}
	race.Work = func(i int, stop *atomic.Bool) {
		buf := make([]byte, 64)
		done := sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) { ended[i].Add(1) })
		for n := 0; !stop.Load(); n++ {
			tx := new(sdma.TxReq)
			if tx.Init(0, len(buf), done) != nil || tx.AddKVAddr(dev, buf) != nil {
				continue // refused (the device is closing, say): nothing was sent
			}
			err := dev.Engine(n%dev.NumEngines()).Send(nil, tx, true)
			if err == nil || errors.Is(err, sdma.ErrNotRunning) { // in flight, or flushed: it ends
				accepted[i]++
			}
		}
	}
	return func() error {
		for i := range accepted {
			if got := ended[i].Load(); got != int64(accepted[i]) {
				return fmt.Errorf("worker %d: %d sends accepted, %d ended", i, accepted[i], got)
			}
		}
		return nil
	}
}

// One round by hand: every send the engine accepted ends exactly once across a Close that
// races with the sends, stops, starts and halts, and Run returns with every goroutine gone.
func ExampleCloseRace() {
	dev, err := sdma.NewDevice(sdma.Config{Engines: 2, RingSize: 64})
	if err != nil {
		panic(err)
	}
	race := &sdmatest.CloseRace{Dev: dev, Seed: 1}
	check := raceSends(race)
	fmt.Println("Close:", race.Run(rand.New(rand.NewPCG(1, 2))))
	fmt.Println("check:", check())
	// Output:
	// Close: <nil>
	// check: <nil>
}

// exampleT stands in for the *testing.T a test passes to CloseRaces.
type exampleT struct{ failed bool }

func (*exampleT) Helper()             {}
func (*exampleT) Logf(string, ...any) {} // the run's seed: print it in a test
func (t *exampleT) Fatalf(format string, args ...any) {
	t.failed = true
	fmt.Printf(format+"\n", args...)
}
func (t *exampleT) Failed() bool { return t.failed }

// CloseRaces runs many rounds, each on a new two-engine device (Manual one round in three,
// which the round must drive): a layer's close test is this loop, with t its *testing.T.
func ExampleCloseRaces() {
	t := &exampleT{}
	rounds := 0
	sdmatest.CloseRaces(t, 6, func(n int, race *sdmatest.CloseRace, rng *rand.Rand) {
		check := raceSends(race)
		if err := race.Run(rng); err != nil {
			t.Fatalf("round %d: Close: %v", n, err)
			return
		}
		if err := check(); err != nil {
			t.Fatalf("round %d (seed %d, manual %v): %v", n, race.Seed, race.Manual, err)
			return
		}
		rounds++
	})
	fmt.Println(rounds, "rounds passed, failed:", t.Failed())
	// Output:
	// 6 rounds passed, failed: false
}
