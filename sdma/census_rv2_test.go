package sdma

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/internal/census"
)

// The third bad-input census of package sdma (badinput_test.go and census_rv_test.go have the
// first two): misuse of an IOWait's Init, each call under census.Timeout so that a hang fails
// its row, and priorities outside the kernel's u8.

// TestCensusIOWaitInitWhileQueued: Init of an IOWait parked on an engine's wait list is refused
// with a panic that says so, and the list stays as it was: every waiter parked is woken once by
// the next pass that frees room. Init used to clear the waiter's links and its engine while the
// list still held it: the wake pass that reached it then emptied the list at it, so the waiters
// queued behind it were never woken, and stayed marked parked on the engine (QueueWait refused
// them for good: "left where it is").
func TestCensusIOWaitInitWhileQueued(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var woken [3]atomic.Int32
	var ws [3]IOWait
	for i := range ws {
		ws[i].Init(nil, func(*IOWait, int) { woken[i].Add(1) }, nil)
		if ok, err := e.QueueWait(&ws[i], 1, true); !ok || err != nil {
			t.Fatalf("QueueWait %d: %v, %v", i, ok, err)
		}
	}
	r := census.Call(func() error { ws[1].Init(nil, func(*IOWait, int) { woken[1].Add(1) }, nil); return nil })
	if !r.Panicked || !strings.Contains(r.String(), "parked") {
		t.Errorf("Init of a parked iowait: %v, want a panic saying it is parked", r)
	}
	if !e.Waiting(&ws[1]) {
		t.Errorf("the refused Init took the waiter off the list")
	}
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, engTestPattern(8, 1), nil)
	if err := e.Send(nil, &tx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Process(); err != nil {
		t.Fatal(err)
	}
	for i := range ws {
		if n := woken[i].Load(); n != 1 || e.Waiting(&ws[i]) {
			t.Errorf("waiter %d: woken %d times, still parked %v; want woken once", i, n, e.Waiting(&ws[i]))
		}
	}
}

// TestCensusIOWaitInitWithTxreqsInFlight: Init of an IOWait with txreqs in flight is refused with
// a panic that says so, and its count stays: Drain waits for the txreq and the drained callback
// runs once, at its completion. Init used to zero the count: the completion then took it to -1,
// the drained callback never ran, and Drain returned at once while later txreqs were in flight.
func TestCensusIOWaitInitWithTxreqsInFlight(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var drained atomic.Int32
	var w IOWait
	w.Init(nil, func(*IOWait, int) {}, func(*IOWait) { drained.Add(1) })
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, engTestPattern(8, 1), nil)
	if err := e.Send(&w, &tx, false); err != nil {
		t.Fatal(err)
	}
	r := census.Call(func() error { w.Init(nil, func(*IOWait, int) {}, nil); return nil })
	if !r.Panicked || !strings.Contains(r.String(), "in flight") {
		t.Errorf("Init of an iowait with a txreq in flight: %v, want a panic saying so", r)
	}
	if w.Busy() != 1 {
		t.Errorf("after the refused Init: Busy %d, want 1", w.Busy())
	}
	if _, err := e.Process(); err != nil {
		t.Fatal(err)
	}
	if w.Busy() != 0 || drained.Load() != 1 {
		t.Errorf("after the completion: Busy %d, drained %d times; want 0, once", w.Busy(), drained.Load())
	}
	// Drain with a context already done: nil if nothing is in flight, else the context's error
	// (Drain waits for nothing then).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Drain(ctx); err != nil {
		t.Errorf("Drain with nothing in flight: %v", err)
	}
}

// TestCensusSetPriorityIsKernelU8: struct iowait's priority is a u8, so a priority outside 0..255
// is the kernel's value modulo 256: 256 is 0 (a waiter that sent packets goes to the tail of
// the wait list, behind one queued before it) and -1 is 255 (it goes to the head, and ranks
// first). SetPriority kept the int: 256 went to the head, as no kernel waiter does, and woke
// before the waiter queued ahead of it with the same key ((256<<4) & 0xff = 0).
func TestCensusSetPriorityIsKernelU8(t *testing.T) {
	for _, c := range []struct {
		prio int
		want []int
	}{
		{256, []int{0, 1}}, // 0: behind waiter 0, same key: list order
		{-1, []int{1, 0}},  // 255: at the head, key 240
		{1, []int{1, 0}},   // at the head, key 16
		{0, []int{0, 1}},   // at the tail, key 0
	} {
		dev, _ := engTestDevice(t, Config{Manual: true, Completion: CompletePoll, RingSize: 64})
		e := dev.Engine(0)
		var order []int
		mk := recordWakes(&order)
		a, b := mk(0), mk(1)
		b.SetPriority(c.prio)
		require.True(t, must(e.QueueWait(a, 2, true)))
		require.True(t, must(e.QueueWait(b, 2, true)))
		fillRing(t, dev, e, nil)
		_, err := e.Process()
		require.NoError(t, err)
		e.Poll()
		assert.Equal(t, c.want, order, "SetPriority(%d)", c.prio)
	}
}
