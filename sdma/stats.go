package sdma

import "sync/atomic"

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
	Faults     uint64 // halts on a descriptor the chip rejects
	SinkErrors uint64 // deliveries that failed or panicked
}

// counters are the engine's live counters. Each is an atomic add by the side named, and an
// atomic load by Stats. Hardware side (hwMu): packets, descs, bytes, interrupts, faults,
// sinkErrors. Completion side (headMu): passes, completed, aborted, wakeups. Producers (slow
// paths only): ringFull, sleeps. The groups sit on separate cache lines.
type counters struct {
	packets, descs, bytes, interrupts, faults, sinkErrors atomic.Uint64
	_                                                     [lineSize]byte
	passes, completed, aborted, wakeups                   atomic.Uint64
	_                                                     [lineSize]byte
	ringFull, sleeps                                      atomic.Uint64
}

func (c *counters) snapshot() EngineStats {
	return EngineStats{
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
	}
}
