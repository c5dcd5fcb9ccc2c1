package main

import "github.com/gosdma/gosdma/sdma"

// engTotals are the engine counters sdmaperf reports, summed over a device's engines.
type engTotals struct {
	ringFull, halts, sinkErrors, recoveries uint64
	sleeps, wakeups                         uint64
	byCause                                 [sdma.NumHaltCauses]uint64
}

func (a engTotals) sub(b engTotals) engTotals {
	d := engTotals{a.ringFull - b.ringFull, a.halts - b.halts, a.sinkErrors - b.sinkErrors, a.recoveries - b.recoveries,
		a.sleeps - b.sleeps, a.wakeups - b.wakeups, a.byCause}
	for i := range d.byCause {
		d.byCause[i] -= b.byCause[i]
	}
	return d
}

// engineTotals sums the counters of every engine of dev.
func engineTotals(dev *sdma.Device) engTotals {
	var t engTotals
	for i := range dev.NumEngines() {
		s := dev.Engine(i).Stats()
		t.ringFull += s.RingFull
		t.halts += s.Faults // every halt, whatever its cause
		t.sinkErrors += s.SinkErrors
		t.recoveries += s.Recoveries
		t.sleeps += s.Sleeps
		t.wakeups += s.Wakeups
		for c, n := range s.Halts {
			t.byCause[c] += n
		}
	}
	return t
}

// haltsByCause names the non-zero halt counts of t.
func (t engTotals) haltsByCause() map[string]uint64 {
	var m map[string]uint64
	for c, n := range t.byCause {
		if n > 0 {
			if m == nil {
				m = make(map[string]uint64)
			}
			m[sdma.HaltCause(c).String()] = n
		}
	}
	return m
}
