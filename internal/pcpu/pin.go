//go:build !purego

package pcpu

import _ "unsafe" // go:linkname

// Enabled reports whether Pin pins (false under the purego tag).
const Enabled = true

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// Pin pins the calling goroutine to its P and returns the P's index (0 ≤ id < GOMAXPROCS).
// Every Pin must be followed by one Unpin on the same goroutine, soon, with nothing that blocks
// in between.
//
//go:nosplit
func Pin() int { return procPin() }

// Unpin ends the Pin.
//
//go:nosplit
func Unpin() { procUnpin() }

// Hint returns the index of the P the caller runs on now, without keeping it there.
func Hint() int {
	id := procPin()
	procUnpin()
	return id
}
