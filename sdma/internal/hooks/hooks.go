// Package hooks is the one door from package sdmatest into package sdma's internals: fault
// injection and the state machine's events and history, which belong to tests, benchmarks and
// sdmaperf rather than to the everyday API. Package sdma fills the variables in at init; nothing
// but sdmatest reads them. Engines and devices travel as any (this package cannot name sdma's
// types without an import cycle); each hook asserts the type it was given.
package hooks

import "time"

// FaultPlan mirrors sdmatest.FaultPlan with the halt cause as an int.
type FaultPlan struct {
	HaltAt    int
	HaltCause int
	HaltRate  float64
	Seed      uint64
}

// Transition mirrors sdmatest.Transition with states and events as uint8.
type Transition struct {
	From, To uint8
	Event    uint8
	Cause    string
	At       time.Time
}

// Set by package sdma's init.
var (
	SetFaults  func(engine any, p FaultPlan) error
	InjectHalt func(engine any, cause int) error
	Event      func(engine any, ev uint8, cause string) error
	History    func(engine any) []Transition
	State      func(engine any) uint8
	// DeviceEvent raises one of the device-wide freeze steps: "notify", "notify-linkdown",
	// "freeze", "unfreeze".
	DeviceEvent func(device any, step string) error
)
