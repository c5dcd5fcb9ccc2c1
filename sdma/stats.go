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
	Interrupts uint64 // interrupts raised (INT_REQ, count, idle; ProgressSchedule's forced progress)
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
// over. The ones every packet adds to are not here but beside what the same writer touches per
// packet: the hardware side's packets, descs, bytes and interrupts on hwMu's line (hwCounters,
// Engine.hwStats), the completion side's passes and completed on the completion group's line
// (passCounters, Engine.passStats). Here: the hardware side's faults, sinkErrors, flushes,
// halts and recoveries (hwMu); the completion side's aborted and wakeups (headMu).
// callbackPanics (slow path only: an atomic add) has no one writer: a panic in a pass counts it
// under the head lock, a callback's runtime.Goexit under whichever lock its call held
// (callerExited), and the callbacks that a Goexit kept from running count theirs with no lock
// held (lateWakeup, lateDrained), at the same time as another goroutine's pass. Producers (slow
// paths only): ringFull (any producer: an atomic add), forcedIntrs (any caller of
// ProgressSchedule that forces the progress interrupt, with no lock held: an atomic add; Stats
// adds it to the hardware side's interrupts) and sleeps (under waitMu). The groups sit
// on separate cache lines, and apart from the rest of the Engine (padding on both sides): a
// hardware-side add on a line that a producer reads per send (the engine's test-hook pointer
// shared one) costs a cross-core transfer each way.
type counters struct {
	faults, sinkErrors, recoveries, flushes relaxed.Counter
	halts                                   [NumHaltCauses]relaxed.Counter
	_                                       [lineSize]byte
	aborted, wakeups                        relaxed.Counter
	callbackPanics                          atomic.Uint64
	_                                       [lineSize]byte
	ringFull, forcedIntrs                   atomic.Uint64
	sleeps                                  relaxed.Counter
	_                                       [lineSize]byte // nothing after the engine shares the producers' line
}

// hwCounters are the hardware side's per-packet counters (Engine.hwStats), added to by hwMu's
// holder.
type hwCounters struct{ packets, descs, bytes, interrupts relaxed.Counter }

// passCounters are the completion side's per-pass counters (Engine.passStats), added to by the
// head lock's holder.
type passCounters struct{ passes, completed relaxed.Counter }

// snapshot reads the engine's counters (Stats).
func (e *Engine) snapshot() EngineStats {
	c, h, p := &e.stats, &e.hwStats, &e.passStats
	s := EngineStats{
		Packets:    h.packets.Load(),
		Descs:      h.descs.Load(),
		Bytes:      h.bytes.Load(),
		RingFull:   c.ringFull.Load(),
		Sleeps:     c.sleeps.Load(),
		Wakeups:    c.wakeups.Load(),
		Interrupts: h.interrupts.Load() + c.forcedIntrs.Load(),
		Passes:     p.passes.Load(),
		Completed:  p.completed.Load(),
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
