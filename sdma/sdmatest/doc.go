// Package sdmatest is the part of the sdma API that tests, benchmarks and tools such as sdmaperf
// need and senders do not: sinks that count, capture, fail or stall packets; fault plans and
// injected halts; the hfi1 state machine's events, its transition history, and the chip's
// freeze; and CloseRace, the device closing under traffic, for the tests of the layers above.
//
// Why a package of its own rather than a section of package sdma: go doc lists a package's types
// and methods alphabetically, so no "section" survives it (FaultPlan would sit between Engine and
// Flags, InjectHalt between Index and Poll); a separate package keeps `go doc sdma` to what a
// sender uses, and makes the use of a test double or a fault injector visible at the import. Like
// net/http/httptest it is a product package (sdmaperf injects faults with it), not test-only code.
// It reaches the engine's internals through an internal package, so package sdma exports nothing
// for it.
//
// Everything here is safe for concurrent use unless its documentation says otherwise. The
// functions that drive the state machine (InjectHalt, RaiseEvent, FreezeNotify, Freeze,
// Unfreeze) wait for a hardware pass in progress: they must not be called from a txreq's
// completion, an IOWait's wakeup or a Sink (on the engine's own goroutine they refuse with
// sdma.ErrInvalid; under the caller's own Process or Poll they would deadlock). SetFaults never
// waits, and may be called from those too: the plan applies from the next pass. A nil engine or
// device is refused with sdma.ErrInvalid; EngineState reports a nil engine as S00HwDown and
// History gives it none.
package sdmatest
