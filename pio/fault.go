package pio

import (
	"math"
	"strconv"

	"github.com/gosdma/gosdma/internal/splitmix"
)

// FaultPlan makes the chip model halt a context on purpose (the send context errors the kernel
// reacts to with sc_stop and sc_restart). The zero value injects nothing.
type FaultPlan struct {
	// HaltAt halts the context on the HaltAt-th packet the chip consumes (counted over the
	// context's life, 1 is the first); 0: never.
	HaltAt uint64
	// HaltEvery halts on every HaltEvery-th packet; 0: never.
	HaltEvery uint64
	// HaltRate halts on each packet with this probability, 0 to 1, drawn from a generator
	// seeded with Seed and the context's index (so that contexts sharing a plan halt at
	// different packets); 0: never. SetFaults starts the draws again from the seed.
	HaltRate float64
	// Seed seeds HaltRate's draws.
	Seed uint64
}

func (p FaultPlan) check() error {
	if math.IsNaN(p.HaltRate) || p.HaltRate < 0 || p.HaltRate > 1 {
		return errf("FaultPlan", ErrInvalid, "HaltRate "+strconv.FormatFloat(p.HaltRate, 'g', -1, 64)+" outside 0..1")
	}
	return nil
}

// faultState is a context's fault plan as the chip checks it (hwMu).
type faultState struct {
	plan      FaultPlan
	active    bool   // the plan can halt: the chip's only check without one
	threshold uint64 // a draw below it halts: HaltRate scaled to 2^63 (0: no draws)
	rng       uint64 // splitmix64 state
}

// newFaultState readies p for the context of index idx.
func newFaultState(p FaultPlan, idx int) faultState {
	f := faultState{plan: p, rng: p.Seed + uint64(idx), threshold: splitmix.Threshold(p.HaltRate)}
	f.active = p.HaltAt > 0 || p.HaltEvery > 0 || f.threshold > 0
	return f
}

// haltNow reports whether packet n (1-based, over the context's life) halts the chip; with a
// HaltRate it draws once per packet.
func (f *faultState) haltNow(n uint64) bool {
	if !f.active {
		return false
	}
	p := &f.plan
	if n == p.HaltAt || (p.HaltEvery != 0 && n%p.HaltEvery == 0) {
		return true
	}
	if f.threshold == 0 {
		return false
	}
	return splitmix.Next(&f.rng)>>1 < f.threshold
}
