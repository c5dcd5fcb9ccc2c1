package sdma

// Sink receives each whole packet the hardware model gathered (the wire, for a software engine).
//
// Deliver is called on the engine's hardware-model goroutine (or the caller's, with Process), one
// packet at a time per engine, in ring order. segs alias mapped memory (the txreq's buffers, the
// pad, an AHG header built by the engine) and are valid only during the call: a sink that keeps
// bytes must copy them. A returned error is recorded against the engine (it does not halt it);
// a panic in Deliver is recovered and recorded the same way.
type Sink interface {
	Deliver(engine int, segs [][]byte) error
}
