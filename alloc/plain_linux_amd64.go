//go:build gc && !purego && !race

package alloc

import "unsafe"

// plainCapable: the per-P magazines may use plain mode (magazine.go) where membarrier.Available
// also says so at run time. linux/amd64 only (a TSO machine with membarrier(2)), outside -race
// (whose detector does not see the plain accesses) and purego, as internal/membarrier.
const plainCapable = true

// The owner's side of plain mode (magazine.go). Its stores are internal/relaxed's store-release
// (a plain MOV; its package documentation argues that the compiler keeps it after the earlier
// loads and stores and before the later stores), written out here as relaxed's amd64 seam
// does, so that each is one instruction with no inline marks of two call levels around it.

// enter opens the owner's section on m (see plain mode in magazine.go) and returns stop's
// value, which the caller tests with cur's magPlain: busy = 1, then stop's load (an atomic load,
// which the compiler keeps after the store; the machine may not, which is the barrier's job).
func (m *magazines) enter() uint32 {
	*(*uint32)(unsafe.Pointer(&m.busy)) = 1
	return m.stop.Load()
}

// leave closes the section that enter opened: busy = 0, after the section's store to cur.
func (m *magazines) leave() { *(*uint32)(unsafe.Pointer(&m.busy)) = 0 }

// storeCur is a plain section's store of cur's new word.
func (m *magazines) storeCur(w uint64) { *(*uint64)(unsafe.Pointer(&m.cur)) = w }
