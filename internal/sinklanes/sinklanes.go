// Package sinklanes is the one definition of a sink that says how many engine numbers it takes
// (udpsink.Sink's Engines). sdma.NewDevice, pio.New and verbs.New read it, through Of, to refuse
// a sink that has no number for an engine or context they deliver as: such a sink refuses every
// packet of it after the send succeeded, a loss that only the sink-error count would tell. The
// sink wrappers (sdmatest.FaultSink and FaultBatchSink, verbs' PIO contexts' sink) pass it on,
// through Forward. It is read once, at construction: no packet pays for it.
package sinklanes

import (
	"fmt"
	"strconv"
)

// Sized is a sink that says how many engine numbers it takes: 0..Engines()-1 (udpsink.Sink:
// Config.Engines, 0 for the zero Sink). A negative answer (Unsized) says nothing, as a sink
// without the method: a wrapper whose wrapped sink has no Engines answers so.
type Sized interface{ Engines() int }

// Unsized is the Engines of a sink that does not say how many engine numbers it takes (it takes
// any, as far as its user can tell): a wrapper's answer when the sink it wraps has no Engines.
const Unsized = -1

// Of returns the number of engine numbers s takes and true, or false if it does not say (s has
// no Engines method, or its answer is negative). A panic in Engines (the sink's bug) is returned
// as err, quoting it.
func Of(s any) (n int, ok bool, err error) {
	z, ok := s.(Sized)
	if !ok {
		return 0, false, nil
	}
	defer func() {
		if p := recover(); p != nil {
			n, ok, err = 0, false, fmt.Errorf("a panic in Engines: %v", p)
		}
	}()
	if n = z.Engines(); n < 0 {
		return 0, false, nil
	}
	return n, true, nil
}

// Forward is the Engines of a wrapper that hands every packet to inner under the engine number it
// got: inner's own Engines if it has one (a panic there goes to the wrapper's caller), Unsized if
// it has none or inner is nil.
func Forward(inner any) int {
	if z, ok := inner.(Sized); ok {
		return z.Engines()
	}
	return Unsized
}

// EngineCount is n engines as a refusal names them: "1 engine", "0 engines", "3 engines".
func EngineCount(n int) string {
	if n == 1 {
		return "1 engine"
	}
	return strconv.Itoa(n) + " engines"
}
