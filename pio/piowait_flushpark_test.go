package pio

import (
	"errors"
	"testing"
)

// TestPIOWaitParkedDuringFlushIsWoken: a waiter that parks while a flush wakes its batches, with
// waiters queued before the flush still on the list, asks for no credit return (QueueWait asks
// only for the first waiter, pio_wait's hfi1_sc_wantpiobuf_intr; sc_disable instead splices the
// list off first, so there such a waiter finds it empty and asks). It is woken all the same: it
// can park only after an allocation found no credits, in a context enabled again after the
// flush's Disable (a disabled one refuses with ErrNotRunning; a seq taken before the Disable has
// moved), and that allocation, seeing waiters queued, asked for a credit return (leaveWakeups);
// besides, the packets holding the credits are consumed while waiters are queued, which makes the
// chip write the free counter back. Either write-back's pass wakes the waiter (the test fails
// with both taken out, passes with either). Here the consumed blocks stay below the threshold and
// the packets ask for no return, and nothing is sent after the waiter parks.
func TestPIOWaitParkedDuringFlushIsWoken(t *testing.T) {
	const credits = 8
	sc, err := New(Config{Type: Kernel, Credits: credits, Threshold: credits, Sink: &captureSink{}, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	const nw = 2*WaitBatchSize + 1
	woke := make([]int, nw+1) // woke[nw]: the late waiter, parked during the flush
	ws := make([]*Waiter, nw+1)
	for i := range ws {
		ws[i] = new(Waiter)
		ws[i].Init(func(*Waiter) { woke[i]++ })
	}
	late := ws[nw]
	parked := false
	ws[0].Init(func(*Waiter) {
		woke[0]++
		// A Restart's Enable, or another goroutine's, while the flush still has batches to wake.
		if err := sc.Enable(); err != nil {
			t.Errorf("Enable during the flush: %v", err)
			return
		}
		// Five one-block packets, then one of four blocks: three are free, so it finds no credits
		// while the chip's consumed blocks (five) stay below the threshold.
		for range 5 {
			b, err := sc.BufferAlloc(2, nil)
			if err != nil {
				t.Errorf("BufferAlloc: %v", err)
				return
			}
			if err := b.Copy(CreatePBC(0, 0, 0, 2), nil); err != nil {
				t.Errorf("Copy: %v", err)
				return
			}
		}
		seq := sc.ReleaseSeq()
		if _, err := sc.BufferAlloc(4*blockDWs, nil); !errors.Is(err, ErrNoCredits) {
			t.Errorf("BufferAlloc of 4 blocks with 3 free: %v, want ErrNoCredits", err)
			return
		}
		if sc.Waiting() == 0 {
			t.Errorf("no waiter queued before the flush left on the list when the late one parks")
		}
		parked = sc.QueueWait(late, seq)
	})
	for _, w := range ws[:nw] {
		if !sc.QueueWait(w, sc.ReleaseSeq()) {
			t.Fatal("QueueWait refused")
		}
	}
	sc.Disable()
	if !parked {
		t.Fatal("the late waiter did not park during the flush")
	}
	for i, n := range woke[:nw] {
		if n != 1 {
			t.Errorf("waiter %d queued before the flush woken %d times, want 1", i, n)
		}
	}
	if woke[nw] != 0 || sc.Waiting() != 1 {
		t.Fatalf("after the flush: late waiter woken %d times, Waiting %d; want 0 and 1", woke[nw], sc.Waiting())
	}
	// Nothing is sent from here on: the chip consumes what was written before the park.
	for range 3 {
		sc.Process()
	}
	if woke[nw] != 1 || sc.Waiting() != 0 {
		t.Errorf("late waiter, parked during the flush behind waiters queued before it: woken %d times, Waiting %d; want 1 and 0 (a lost wake-up)", woke[nw], sc.Waiting())
	}
}
