package main

import (
	"sync"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/pio"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// The fault plans and the SDMA device that the packet run (sizeRun) and the -path pio|auto run
// share: -faults halt=RATE from the start, haltat=N from the measured run on.

// sdmaPlan is the SDMA engines' fault plan from the start, the warm-up included: -faults
// halt=RATE, a halt per packet with that probability, drawn from -faults seed (and the engine's
// index).
func (f FaultSpec) sdmaPlan() sdmatest.FaultPlan {
	return sdmatest.FaultPlan{HaltRate: f.HaltRate, Seed: uint64(f.Seed)}
}

// armedPlan is the SDMA engines' plan from the measured run on (set after the warm-up, so that
// haltat counts the descriptors of the measured run): sdmaPlan and -faults haltat=N, with its
// cause.
func (f FaultSpec) armedPlan() sdmatest.FaultPlan {
	p := f.sdmaPlan()
	p.HaltAt, p.HaltCause = f.HaltAt, f.haltCause()
	return p
}

// pioPlan is the PIO contexts' fault plan from the start, as sdmaPlan is the engines': halt=RATE
// drawn from seed (and the context's index).
func (f FaultSpec) pioPlan() pio.FaultPlan {
	return pio.FaultPlan{HaltRate: f.HaltRate, Seed: uint64(f.Seed)}
}

// setSDMAFaults gives every engine of dev the plan p (it replaces the plan each had).
func setSDMAFaults(dev *sdma.Device, p sdmatest.FaultPlan) error {
	for i := range dev.NumEngines() {
		if err := sdmatest.SetFaults(dev.Engine(i), p); err != nil {
			return err
		}
	}
	return nil
}

// newSDMADevice builds the SDMA device of a run: -engines, -ring, -wait and -completion, with
// mapper and sink, and the engines' fault plan from the start (sdmaPlan, with -faults halt).
func newSDMADevice(cfg Config, mapper dma.Mapper, sink sdma.Sink) (*sdma.Device, error) {
	wait, mode := engineOptions(cfg)
	dev, err := sdma.NewDevice(sdma.Config{
		Mapper: mapper, Engines: cfg.Engines, RingSize: cfg.Ring, Wait: wait, Completion: mode, Sink: sink,
	})
	if err != nil {
		return nil, err
	}
	if cfg.Faults.HaltRate > 0 {
		if err := setSDMAFaults(dev, cfg.Faults.sdmaPlan()); err != nil {
			dev.Close()
			return nil, err
		}
	}
	return dev, nil
}

// atOnce runs f(0) .. f(n-1), each on its own goroutine, and waits for them all: the producers
// of a run, together.
func atOnce(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}
