package alloc

// Hooks for the external tests (package alloc_test) into the per-P magazines' plain mode
// (magazine.go), and Churn, shared by the internal and external chaos tests.

import "sync"

// stackOf returns the free list of a Slab or a List.
func stackOf[T any](a Allocator[T]) *stack[T] {
	switch x := a.(type) {
	case *Slab[T]:
		return &x.s
	case *List[T]:
		return &x.s
	}
	panic("alloc: no free list")
}

// SetPlainAfter sets how many CAS pops and pushes a P makes before it sets plain mode again.
// Call it before the allocator is used.
func SetPlainAfter[T any](a Allocator[T], n uint32) { stackOf(a).plainAfter = n }

// Biased reports whether a's Ps may use plain mode.
func Biased[T any](a Allocator[T]) bool { return stackOf(a).biased }

// Revokes returns how many times drainers revoked a P's plain mode.
func Revokes[T any](a Allocator[T]) uint64 { return stackOf(a).revokes.Load() }

// PlainPs returns how many of a's Ps have their cur in plain mode now.
func PlainPs[T any](a Allocator[T]) int {
	s, n := stackOf(a), 0
	for k := range s.mags {
		if s.mags[k].cur.Load()&magPlain != 0 {
			n++
		}
	}
	return n
}

// PlainCapable is plainCapable: plain mode is built in (linux/amd64, not -race or purego).
const PlainCapable = plainCapable

// Churn calls f(0), f(1), ... on a goroutine of its own until stop is called; stop returns once
// that goroutine has. The chaos tests move GOMAXPROCS, run the collector or drain the magazines
// with it beside their workers.
func Churn(f func(k int)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 0; ; k++ {
			select {
			case <-done:
				return
			default:
			}
			f(k)
		}
	}()
	return func() { close(done); wg.Wait() }
}
