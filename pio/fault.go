package pio

// FaultPlan makes the chip model halt a context on purpose (the send context errors the kernel
// reacts to with sc_stop and sc_restart). The zero value injects nothing.
type FaultPlan struct {
	// HaltAt halts the context on the HaltAt-th packet the chip consumes (counted over the
	// context's life, 1 is the first); 0: never.
	HaltAt uint64
	// HaltEvery halts on every HaltEvery-th packet; 0: never.
	HaltEvery uint64
}

func (p FaultPlan) check() error { return nil }

// haltNow reports whether packet n (1-based, over the context's life) halts the chip.
func (p FaultPlan) haltNow(n uint64) bool {
	return n == p.HaltAt || (p.HaltEvery != 0 && n%p.HaltEvery == 0)
}
