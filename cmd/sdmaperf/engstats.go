package main

import "github.com/gosdma/gosdma/sdma"

// engTotals are the engine counters sdmaperf reports, summed over a device's engines.
type engTotals struct {
	ringFull, halts, sinkErrors uint64
}

func (a engTotals) sub(b engTotals) engTotals {
	return engTotals{a.ringFull - b.ringFull, a.halts - b.halts, a.sinkErrors - b.sinkErrors}
}

// engineTotals sums the counters of every engine of dev.
func engineTotals(dev *sdma.Device) engTotals {
	var t engTotals
	for i := range dev.NumEngines() {
		s := dev.Engine(i).Stats()
		t.ringFull += s.RingFull
		t.halts += s.Faults // each is a halt on a descriptor the chip rejected
		t.sinkErrors += s.SinkErrors
	}
	return t
}
