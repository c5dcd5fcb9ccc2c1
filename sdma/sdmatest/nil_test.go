package sdmatest_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestNilEngineAndDevice: the fault and state helpers refuse a nil engine or device with
// sdma.ErrInvalid (they panicked with a nil dereference: a bad-input census row), and the
// read-only ones answer for it without panicking.
func TestNilEngineAndDevice(t *testing.T) {
	var e *sdma.Engine
	var dev *sdma.Device
	for name, f := range map[string]func() error{
		"SetFaults":    func() error { return sdmatest.SetFaults(e, sdmatest.FaultPlan{HaltAt: 1}) },
		"InjectHalt":   func() error { return sdmatest.InjectHalt(e, sdma.CauseHalt) },
		"RaiseEvent":   func() error { return sdmatest.RaiseEvent(e, sdmatest.E00GoHwDown, "nil") },
		"FreezeNotify": func() error { return sdmatest.FreezeNotify(dev, false) },
		"Freeze":       func() error { return sdmatest.Freeze(dev) },
		"Unfreeze":     func() error { return sdmatest.Unfreeze(dev) },
		"Chaos.Run": func() error {
			var stop atomic.Bool
			var wg sync.WaitGroup
			return sdmatest.Chaos{Rand: rand.New(rand.NewPCG(1, 2))}.Run(dev, &stop, &wg)
		},
	} {
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s(nil) panicked: %v", name, p)
				}
			}()
			return f()
		}()
		if !errors.Is(err, sdma.ErrInvalid) {
			t.Errorf("%s(nil): %v, want ErrInvalid", name, err)
		}
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("History/EngineState(nil) panicked: %v", p)
			}
		}()
		if h := sdmatest.History(e); len(h) != 0 {
			t.Errorf("History(nil) = %v", h)
		}
		if s := sdmatest.EngineState(e); s != sdmatest.S00HwDown {
			t.Errorf("EngineState(nil) = %v, want s00_hw_down", s)
		}
	}()
}

// TestBadPlanErrorNamesFaultPlan: a bad plan's error names the sdmatest.FaultPlan field the
// caller set; it named "Config.Faults.HaltRate", a Config field that does not exist.
func TestBadPlanErrorNamesFaultPlan(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for field, p := range map[string]sdmatest.FaultPlan{
		"HaltRate":  {HaltRate: 1.5},
		"HaltAt":    {HaltAt: -1},
		"HaltCause": {HaltCause: sdma.NumHaltCauses},
	} {
		err := sdmatest.SetFaults(dev.Engine(0), p)
		var ce *sdma.ConfigError
		if !errors.As(err, &ce) || ce.Field != "sdmatest.FaultPlan."+field {
			t.Errorf("%s: %v, want a *sdma.ConfigError for sdmatest.FaultPlan.%s", field, err, field)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "sdma: sdmatest.FaultPlan."+field+" = ") {
			t.Errorf("%s: message %q does not name the plan's field", field, msg)
		}
	}
}

// TestCloseRaceRefusesBadRace: a CloseRace without a device, without an rng, or with workers and
// no Work is refused by Run with ErrInvalid naming what is missing, before any goroutine starts.
// A nil Dev used to panic on the chaos goroutine, crashing the test binary.
func TestCloseRaceRefusesBadRace(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{RingSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	work := func(int, *atomic.Bool) {}
	for _, c := range []struct {
		race *sdmatest.CloseRace
		rng  *rand.Rand
		name string
	}{
		{&sdmatest.CloseRace{Workers: 1, Work: work}, rng, "nil Dev"},
		{&sdmatest.CloseRace{Dev: dev, Workers: 1, Work: work}, nil, "nil rng"},
		{&sdmatest.CloseRace{Dev: dev, Workers: 2}, rng, "2 Workers with a nil Work"},
	} {
		err := c.race.Run(c.rng)
		if !errors.Is(err, sdma.ErrInvalid) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("Run: %v; want ErrInvalid naming %s", err, c.name)
		}
	}
	if err := dev.Engine(0).Stop(); err != nil {
		t.Errorf("the device was touched by a refused Run: Stop: %v", err)
	}
}

// TestChaosRefusesNilRand: a Chaos without its Rand is refused (sdma.ErrInvalid) before its
// goroutine starts, which would panic at the first draw.
func TestChaosRefusesNilRand(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	if err := (sdmatest.Chaos{}).Run(dev, &stop, &wg); !errors.Is(err, sdma.ErrInvalid) {
		t.Errorf("Chaos{}.Run: %v, want ErrInvalid", err)
	}
	wg.Wait()
}
