package sdmatest

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gosdma/gosdma/sdma"
)

// Chaos is a seeded fault schedule on the engines of one device: the one the fault-schedule
// soaks of sdma, usdma and verbs run beside their senders. Each step draws an engine and one of
// seven moves: an injected halt of a random cause (0); a Stop and a Start up to 100 µs apart (1);
// the test's own move on its memory, Memory (2, and 3 with MemoryTwice); a freeze cycle
// (FreezeNotify, Freeze, Unfreeze) one time in four, else an idle halt (E70GoIdle), and then a
// Start of every engine (4); a pause of up to 300 µs (the rest, and 2 without a Memory). The
// moves' errors (a closed device, a refused event) are ignored: the schedule runs on through
// the device's Close.
type Chaos struct {
	// Rand draws the schedule; Run's goroutine is its only user.
	Rand *rand.Rand
	// Cause, when not nil, maps the cause drawn for an injected halt to the one injected: a test
	// that checks the hardware never reads unmapped memory keeps CauseMemRead to its own plans.
	Cause func(sdma.HaltCause) sdma.HaltCause
	// Memory, when not nil, is move 2: deregistering and registering packet memory, say, or
	// invalidating a pin cache, with packets from it in flight. It runs on Run's goroutine and is
	// given Rand.
	Memory func(r *rand.Rand)
	// MemoryTwice makes move 3 Memory's too (else a pause).
	MemoryTwice bool
}

// Run starts the schedule on a goroutine counted in wg (Add before it starts, Done when it
// returns) that steps until stop is set: set stop, then wg.Wait, before the final checks. A nil
// dev or Rand is refused with an error matching sdma.ErrInvalid, and nothing starts.
func (c Chaos) Run(dev *sdma.Device, stop *atomic.Bool, wg *sync.WaitGroup) error {
	if dev == nil {
		return errNil("Chaos.Run", "device")
	}
	if c.Rand == nil {
		return errNil("Chaos.Run", "Rand")
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			c.step(dev)
		}
	}()
	return nil
}

func (c Chaos) step(dev *sdma.Device) {
	r := c.Rand
	e := dev.Engine(r.IntN(dev.NumEngines()))
	move := r.IntN(7)
	if move == 3 && c.MemoryTwice {
		move = 2
	}
	switch {
	case move == 0:
		cause := sdma.HaltCause(1 + r.IntN(int(sdma.NumHaltCauses)-1))
		if c.Cause != nil {
			cause = c.Cause(cause)
		}
		_ = InjectHalt(e, cause)
	case move == 1:
		_ = e.Stop()
		time.Sleep(time.Duration(r.IntN(100)) * time.Microsecond)
		_ = e.Start()
	case move == 2 && c.Memory != nil:
		c.Memory(r)
	case move == 4:
		if r.IntN(4) == 0 { // a freeze cycle, or an idle halt, then the engines run again
			linkDown := r.IntN(2) == 0
			_ = FreezeNotify(dev, linkDown)
			time.Sleep(time.Duration(r.IntN(100)) * time.Microsecond)
			_ = Freeze(dev)
			_ = Unfreeze(dev)
		} else {
			_ = RaiseEvent(e, E70GoIdle, "chaos")
		}
		for i := range dev.NumEngines() {
			_ = dev.Engine(i).Start()
		}
	default:
		time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
	}
}
