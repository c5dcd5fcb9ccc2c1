// Package ringimpl lets this module's tests and benchmarks force the ring's Write implementation
// ("asm", "asm-movq" or "go": ring.Implementations lists them). The switch is process-wide, so
// package ring keeps it out of its exported API, where a library user could flip it by accident;
// being internal, this package is reachable only from inside the module (the bench package runs
// impl=asm and impl=go side by side with it). Package ring fills Set in at init.
package ringimpl

// Set makes every Ring use the named Write implementation until restore is called, which
// reinstates the previous one. Do not call it while another goroutine may be calling Write or
// Enqueue. An unknown name gives an error matching errors.ErrUnsupported and changes nothing.
var Set func(name string) (restore func(), err error)
