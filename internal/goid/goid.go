// Package goid reads the calling goroutine's id, for the rare checks that must know which
// goroutine runs them (sdma's own-goroutine checks where the build has no getg, pio's chip
// goroutine's Goexit).
package goid

import "runtime"

// ID returns the calling goroutine's id, read from the header runtime.Stack writes
// ("goroutine 42 [running]:"). It costs microseconds: never per packet. Goroutine ids are never
// reused, and never 0 (0: the header could not be read).
func ID() uint64 {
	var buf [32]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	if len(b) < len(prefix) {
		return 0
	}
	var id uint64
	for _, c := range b[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
