//go:build amd64 && gc && !purego

package prefetch

import "unsafe"

// Enabled says that the prefetches issue an instruction (false: no-ops).
const Enabled = true

//go:noescape
func write(p unsafe.Pointer)

//go:noescape
func writeLines(p unsafe.Pointer, n int)

//go:noescape
func read(p unsafe.Pointer)
