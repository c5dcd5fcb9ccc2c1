//go:build race

package ring

// checkOrder makes StoreHWHead and StoreSwHead check the order of the head they store, as
// SetHWHead and SetSwHead always do: -race builds (the tests' concurrent runs) report an engine
// that moves a head out of order; other builds store without the check's loads.
const checkOrder = true
