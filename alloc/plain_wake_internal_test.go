package alloc

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
)

// TestPlainPutWakesWaiter: a Put in plain mode onto an empty cur must not miss a GetCtx waiter
// that missed its object. The Put's push is a plain store, and its load of waiters follows it:
// x86-TSO lets that load pass the store (store buffer), so the Dekker pair with the waiter
// (waiters.Add, then its last look at cur) needs a fence between them. Without one, the Put
// read waiters 0 while the waiter's drain read the empty cur, which it does not revoke, and the
// waiter slept with the object free in the P's magazine.
//
// A List of one object; one goroutine gets it and puts it back, another GetCtx's at the same
// moment, many times over. Once the Put has returned, the waiter must have the object or be
// about to: it must never stay queued (checked on the stable state, no timing).
func TestPlainPutWakesWaiter(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 || runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	l := plainList(t, 1, 1)

	iters := 200000 // before the fix, it failed within 80000 (of 7 runs)
	if testing.Short() {
		iters = 20000
	}
	var phase atomic.Int64 // 2k+1: iteration k starts; A and W spin on it
	aDone := make(chan struct{})
	aNext := make(chan struct{})
	go func() { // A: holds the object, puts it back when the iteration starts
		rng := rand.New(rand.NewPCG(1, 2))
		for k := 0; ; k++ {
			if _, ok := <-aNext; !ok {
				return
			}
			o, err := l.Get()
			for err != nil {
				runtime.Gosched()
				o, err = l.Get()
			}
			aDone <- struct{}{} // holding it
			for phase.Load() != int64(2*k+1) {
			}
			for range rng.IntN(4000) {
				phase.Load()
			}
			if err := l.Put(o); err != nil {
				panic(err)
			}
			aDone <- struct{}{}
		}
	}()
	defer close(aNext)
	lost := 0
	for k := 0; k < iters && lost == 0; k++ {
		aNext <- struct{}{}
		<-aDone
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan *int, 1)
		go func() { // W
			for phase.Load() != int64(2*k+1) {
			}
			p, err := l.GetCtx(ctx)
			if err != nil {
				res <- nil
				return
			}
			res <- p
		}()
		phase.Store(int64(2*k + 1))
		<-aDone // A's Put returned
		var p *int
	wait:
		for {
			select {
			case p = <-res:
				break wait
			default:
			}
			l.mu.Lock()
			q := len(l.queue)
			l.mu.Unlock()
			if q > 0 {
				t.Logf("iteration %d: the waiter is queued, the object free", k)
				lost++
				cancel()
				p = <-res
				break
			}
			runtime.Gosched()
		}
		cancel()
		if p != nil {
			if err := l.Put(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if lost > 0 {
		t.Fatal("a waiter slept with the object free after the Put returned")
	}
}
