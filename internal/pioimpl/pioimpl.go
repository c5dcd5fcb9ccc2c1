// Package pioimpl lets this module's tests and benchmarks force the PIO copy's quadword writer
// ("asm", "asm-nt", "asm-movnti" or "go": pio.Implementations lists them). The switch is
// process-wide, so package pio keeps it out of its exported API, where a library user could flip
// it by accident (as package ring does with internal/ringimpl); being internal, this package is
// reachable only from inside the module. Package pio fills Set in at init.
package pioimpl

// Set makes every PIO copy use the named implementation until restore is called, which
// reinstates the previous one. Do not call it while copies run. An unknown name gives an error
// matching errors.ErrUnsupported and changes nothing.
var Set func(name string) (restore func(), err error)
