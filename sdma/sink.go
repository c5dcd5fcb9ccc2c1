package sdma

// Sink receives each whole packet the hardware model gathered (the wire, for a software engine).
//
// Deliver is called on the engine's hardware-model goroutine (or the caller's, with Process), one
// packet at a time per engine, in ring order. segs alias mapped memory (the txreq's buffers, the
// pad, an AHG header built by the engine) and are valid only during the call: a sink that keeps
// bytes must copy them. A returned error is recorded against the engine (it does not halt it);
// a panic in Deliver is recovered and recorded the same way. Deliver must not call Process,
// Poll, Device.Close, Shutdown or Event (nor Stop, Start, FreezeNotify, …): on the engine's
// goroutine Close, Shutdown and Event refuse with ErrInvalid; under the caller's own Process they
// would wait for themselves.
//
// A Deliver (Queue, Flush) that calls runtime.Goexit (a test's t.FailNow, require) ends the
// goroutine that called it; unlike a panic it cannot be recovered, but it leaves no lock held:
// the engine halts, its HaltCause a *HaltError (CauseHalt) that names the Goexit, and Close
// returns. The packets the sink finished with complete StatusOK, the one it exited in and the
// rest StatusAborted, each once, when the ring is cleaned: by Close, or by a Stop. An engine
// whose own goroutine ended so stays halted until Close (sends are flushed, events other than
// Stop return its HaltError); one driven by Process, whose caller's goroutine ended, runs again
// after Stop and Start. The same holds for a completion, wakeup or drained callback that the
// engine's goroutine runs (the locks of the completion pass are released too, the iowait's count
// dropped, a batch's other wakeups still run). A callback's Goexit on a caller's goroutine (a
// Process, Poll, Stop, ProgressSchedule, SendWait that ran it) releases the pass's locks and is
// recorded (Engine.CallbackError, Goexit set); the engine goes on (in Close's clean, Close ends
// there: the next Close does the rest).
type Sink interface {
	Deliver(engine int, segs [][]byte) error
}

// BatchSink is a Sink that can hold packets and send many in one go (sendmmsg, say) without
// copying them. gosdma's stand-in for a chip that writes its head back only once the data has
// left: the hardware model writes the head back, raises interrupts and lets completion unmap
// only for packets the sink has finished with, so a held packet's segments stay mapped and
// unchanged until the Flush that sends it returns.
//
// An engine whose sink is a BatchSink with a BatchLimit of two packets or more calls Queue
// instead of Deliver for each packet that has others published behind it or ahead of it in the
// batch; a lone packet (no batch held, nothing published after it) goes to Deliver, sent at
// once, so that an idle engine's latency is a plain Sink's. Deliver keeps its meaning — finished
// on return — so a BatchSink is still a correct Sink anywhere a Sink is used; it is never called
// while the engine holds a batch. The engine calls Flush once the batch holds
// BatchLimit's packets or bytes, when the ring has nothing more to read (the end of each
// hardware pass, so no packet waits for a batch to fill), before an engine halts
// (the packets before the halt complete OK, as on the chip) and before a Close or a halt
// recovery can touch the ring (a batch never outlives the hardware pass that queued it).
//
// The three methods are called on the engine's hardware-model goroutine (or the caller's, with
// Process), one call at a time per engine, in ring order; different engines call concurrently.
type BatchSink interface {
	Sink
	// BatchLimit is the most packets an engine holds before it flushes, and the payload bytes
	// at which it flushes (a batch reaches at most that plus one packet); bytes <= 0 means no
	// byte bound. It is read once, by NewDevice (a panic there is a *ConfigError naming the
	// Sink). packets is capped at 1024 (the kernel's UIO_MAXIOV, sendmmsg's own cap) and a
	// value below 2 turns batching off: the engine then calls Deliver.
	BatchLimit() (packets, bytes int)
	// Queue takes one packet to send at the next Flush. The bytes of segs stay valid and
	// unchanged until that Flush returns; the slice segs itself is the engine's and is reused
	// once Queue returns, so the sink keeps a copy of its slice headers (never of the bytes).
	// An error (or a panic) means the packet was not queued: it failed now, and is recorded
	// against the engine (SinkError) as a failed Deliver is.
	Queue(engine int, segs [][]byte) error
	// Flush sends every packet Queue took on engine since the last Flush, in order, and reports
	// each one: errs has one entry per packet queued, nil on entry; Flush sets errs[i] to the
	// error of the i-th packet if it was not sent (each is recorded as a failed Deliver is; the
	// txreq still completes StatusOK, as a packet lost on the wire). When Flush returns the sink
	// must not read those bytes again: the engine then writes the head back past them, and
	// completion unmaps them. A panic fails every packet of the batch.
	Flush(engine int, errs []error)
}

// MaxBatch is the most packets an engine holds for a BatchSink (the kernel's UIO_MAXIOV, which
// is also the most messages one sendmmsg(2) takes).
const MaxBatch = 1024

// discardSink is the device's sink when Config.Sink is nil: it drops every packet. Sinks that
// count, capture or fail packets are in package sdmatest.
type discardSink struct{}

func (discardSink) Deliver(int, [][]byte) error { return nil }

// SinkFunc adapts a function to the Sink interface.
type SinkFunc func(engine int, segs [][]byte) error

// Deliver calls f.
func (f SinkFunc) Deliver(engine int, segs [][]byte) error { return f(engine, segs) }
