//go:build !(amd64 || arm64) || !gc || purego

package goid

// G is not available on this build (HaveG): it returns 0, and Self falls back on ID.
func G() uintptr { return 0 }

// HaveG reports whether G works on this build (amd64 or arm64, gc, not purego).
const HaveG = false
