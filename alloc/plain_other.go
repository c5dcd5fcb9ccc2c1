//go:build !linux || !amd64 || !gc || purego || race

package alloc

// plainCapable is false here: every magazine pop and push CASes (magazine.go).
const plainCapable = false

// enter returns 1: the caller's plain branch is dead code.
func (m *magazines) enter() uint32 { return 1 }

// leave does nothing.
func (m *magazines) leave() {}

// storeCur is never reached (no plain section).
func (m *magazines) storeCur(w uint64) { m.cur.Store(w) }
