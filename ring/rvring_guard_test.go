//go:build linux

package ring

import (
	"fmt"
	"runtime/debug"
	"syscall"
	"testing"
	"unsafe"

	"github.com/gosdma/gosdma/desc"
)

// guarded is one read-write page between two PROT_NONE pages: a slice laid flush against either
// end faults on the first access past it (DPDK's test_ring checks its object tables with
// memcmp for strays; a guard page also catches stray reads).
type guarded struct {
	mem  []byte
	page []byte // the middle page
}

func newGuarded(t *testing.T) *guarded {
	t.Helper()
	ps := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 3*ps, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[:ps], syscall.PROT_NONE); err != nil {
		t.Skipf("mprotect: %v", err)
	}
	if err := syscall.Mprotect(mem[2*ps:], syscall.PROT_NONE); err != nil {
		t.Skipf("mprotect: %v", err)
	}
	return &guarded{mem: mem, page: mem[ps : 2*ps]}
}

// descs returns n descriptors flush against the page's start (atEnd false) or end, or, if
// misaligned, 8 bytes from it: 8-byte aligned, not 16 (a desc.Desc needs only 8), as DPDK's
// test_ring runs its object tables at unaligned addresses.
func (g *guarded) descs(n int, atEnd, misaligned bool) []desc.Desc {
	gap := 0
	if misaligned {
		gap = 8
	}
	off := gap
	if atEnd {
		off = len(g.page) - n*desc.Size - gap
	}
	return unsafe.Slice((*desc.Desc)(unsafe.Pointer(&g.page[off])), n)
}

// TestRVRingGuardPages: every writer (Enqueue, EnqueueSP, Reserve+Write at an offset,
// ReserveWrite inline and out of line) reads its source, and Dequeue writes its destination,
// within the slice it was given: each slice lies flush against a PROT_NONE page, before or after
// it (or 8 bytes from it, 8-byte aligned only: the assembly's unaligned loads and stores), for
// every batch length from 1 to the capacity, with the batch crossing the ring's wrap and AHG edit
// descriptors (skip) of 0, 1 and past the batch, every implementation. A read or write of a
// descriptor outside faults, which the test reports as a panic; a misaligned access that the
// instruction refuses (an aligned SSE or AVX form) faults too.
func TestRVRingGuardPages(t *testing.T) {
	g := newGuarded(t)
	const size = 128
	if size*desc.Size > len(g.page) {
		t.Skip("page too small")
	}
	forEachImpl(t, func(t *testing.T) {
		debug.SetPanicOnFault(true)
		defer debug.SetPanicOnFault(false)
		for _, mis := range []bool{false, true} {
			for _, atEnd := range []bool{false, true} {
				for n := 1; n < size; n++ {
					for _, skip := range []int{0, 1, n + 3} {
						for api := range 5 {
							name := fmt.Sprintf("misaligned=%v/atEnd=%v/n=%d/skip=%d/api=%d", mis, atEnd, n, skip, api)
							if p := guardedRound(g, size, n, skip, api, atEnd, mis); p != "" {
								t.Fatalf("%s: %s", name, p)
							}
						}
					}
				}
			}
		}
	})
}

// guardedRound sends n descriptors from a guarded source by api, starting a few slots before
// the ring's wrap, and dequeues them into a guarded destination, and says what went wrong.
func guardedRound(g *guarded, size, n, skip, api int, atEnd, mis bool) (failure string) {
	defer func() {
		if p := recover(); p != nil {
			failure = fmt.Sprint("panic: ", p)
		}
	}()
	r, err := newAt(size, uint64(4*size-n/2-1))
	if err != nil {
		return err.Error()
	}
	src := g.descs(n, atEnd, mis)
	for k := range src {
		src[k] = desc.Desc{Qw0: uint64(k), Qw1: uint64(k) << 8}
	}
	start := r.Tail()
	switch api {
	case 0:
		_, err = r.Enqueue(src, skip)
	case 1:
		_, err = r.EnqueueSP(src, skip)
	case 2: // the source in two Writes at offsets, the second from the slice's far end
		var v Reservation
		if v, err = r.Reserve(n); err == nil {
			h := n / 2
			if h > 0 {
				v.Write(0, src[:h], skip)
			}
			v.Write(h, src[h:], skip)
			v.Publish()
		}
	case 3:
		var v Reservation
		if v, err = r.ReserveWrite(src, skip); err == nil {
			v.PublishRelease()
		}
	case 4: // ReserveWrite's out-of-line path: the cached head says no room at first
		r.headCache.Store(r.Reserved() - uint64(size))
		var v Reservation
		if v, err = r.ReserveWrite(src, skip); err == nil {
			v.Publish()
		}
	}
	if err != nil {
		return err.Error()
	}
	dst := g.descs(n, !atEnd, mis)
	if got := r.Dequeue(dst); got != n {
		return fmt.Sprintf("Dequeue: %d of %d", got, n)
	}
	for k, d := range dst {
		if d.Qw0 != uint64(k) || d.Qw1&^desc.GenerationSMask != uint64(k)<<8 {
			return fmt.Sprintf("dst[%d] = %+v (start %#x)", k, d, start)
		}
	}
	return ""
}
