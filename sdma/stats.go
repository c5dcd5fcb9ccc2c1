package sdma

import (
	"sync/atomic"

	"github.com/gosdma/gosdma/internal/relaxed"
)

// EngineStats is a snapshot of one engine's counters (Engine.Stats).
type EngineStats struct {
	Packets    uint64 // packets the hardware model delivered to the sink
	Descs      uint64 // descriptors it consumed for them
	Bytes      uint64 // bytes it delivered (AHG headers included)
	RingFull   uint64 // sends that found no room and did not retry (hfi1: descq_full_count)
	Sleeps     uint64 // waiters parked on the wait list
	Wakeups    uint64 // waiters woken by the completion side
	Interrupts uint64 // interrupts raised (INT_REQ, count, idle)
	Passes     uint64 // completion passes (each bumps the head seqcount)
	Completed  uint64 // txreqs completed with StatusOK
	Aborted    uint64 // txreqs completed with StatusAborted
	Faults     uint64 // halts of the engine, all causes (the sum of Halts)
	SinkErrors uint64 // deliveries that failed or panicked
	Flushes    uint64 // BatchSink flushes (each sends the packets the sink held; 0 without one)
	Recoveries uint64 // returns to s99_running after a halt (s40_hw_clean_up_wait → s99)
	// CallbackPanics counts completion-side callbacks (completion, drained, wakeup) that
	// panicked; each was recovered (Engine.CallbackError has the last).
	CallbackPanics uint64

	// Halts counts the halts by cause (the chip's halt error bits), indexed by HaltCause.
	Halts [NumHaltCauses]uint64
}

// counters are the engine's live counters, read by Stats with atomic loads. The hardware side's
// and the completion side's have one writer at a time (the holder of hwMu, of headMu), so they
// are relaxed.Counters: an add without a locked instruction, one per packet saved several times
// over. Hardware side (hwMu): packets, descs, bytes, interrupts, faults, sinkErrors, flushes,
// halts, recoveries. Completion side (headMu): passes, completed, aborted, wakeups.
// callbackPanics (slow path only: an atomic add) has no one writer: a panic in a pass counts it
// under the head lock, a callback's runtime.Goexit under whichever lock its call held
// (callerExited), and the callbacks that a Goexit kept from running count theirs with no lock
// held (lateWakeup, lateDrained), at the same time as another goroutine's pass. Producers (slow
// paths only): ringFull (any producer: an atomic add) and sleeps (under waitMu). The groups sit on separate cache lines, and apart from the rest of the Engine
// (padding on both sides): a hardware-side add per packet on a line that a producer reads per
// send (the engine's test-hook pointer shared one) costs a cross-core transfer each way.
type counters struct {
	packets, descs, bytes, interrupts, faults, sinkErrors relaxed.Counter
	recoveries, flushes                                   relaxed.Counter
	halts                                                 [NumHaltCauses]relaxed.Counter
	_                                                     [lineSize]byte
	passes, completed, aborted, wakeups                   relaxed.Counter
	callbackPanics                                        atomic.Uint64
	_                                                     [lineSize]byte
	ringFull                                              atomic.Uint64
	sleeps                                                relaxed.Counter
	_                                                     [lineSize]byte // nothing after the engine shares the producers' line
}

func (c *counters) snapshot() EngineStats {
	s := EngineStats{
		Packets:    c.packets.Load(),
		Descs:      c.descs.Load(),
		Bytes:      c.bytes.Load(),
		RingFull:   c.ringFull.Load(),
		Sleeps:     c.sleeps.Load(),
		Wakeups:    c.wakeups.Load(),
		Interrupts: c.interrupts.Load(),
		Passes:     c.passes.Load(),
		Completed:  c.completed.Load(),
		Aborted:    c.aborted.Load(),
		Faults:     c.faults.Load(),
		SinkErrors: c.sinkErrors.Load(),
		Flushes:    c.flushes.Load(),
		Recoveries: c.recoveries.Load(),

		CallbackPanics: c.callbackPanics.Load(),
	}
	for i := range c.halts {
		s.Halts[i] = c.halts[i].Load()
	}
	return s
}
