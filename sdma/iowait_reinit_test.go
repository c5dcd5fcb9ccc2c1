package sdma

import (
	"context"
	"testing"
)

// TestIOWaitInitAfterDrain: Init of an IOWait right after its Drain returned (what Init's panic
// message advises: "Drain it first") does not race with the completion that drained it. The
// pass's sdmaDec woke Drain before it read w.drained and called it: an Init on the drainer's
// goroutine wrote the callbacks while the pass read them (the race detector reports it).
func TestIOWaitInitAfterDrain(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	drained := 0
	var w IOWait
	w.Init(nil, nil, func(*IOWait) { drained++ })
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, engTestPattern(8, 1), nil)
	if err := e.Send(&w, &tx, false); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		err := w.Drain(context.Background())
		if err == nil {
			w.Init(nil, nil, nil)
		}
		done <- err
	}()
	if _, err := e.Process(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if drained != 1 { // the pass ran on this goroutine (Manual)
		t.Fatalf("the drained callback read before the drop ran %d times, want 1", drained)
	}
}

// TestIOWaitInitAfterUnqueue: Init of an IOWait after Unqueue reported it parked nowhere (what
// Init's panic message advises: "Unqueue it ... first") does not race with the wake pass that
// took it off the list: the pass read w.wakeup after it let the wait lock go, while an Init on
// the owner's goroutine wrote it (the race detector reports it).
func TestIOWaitInitAfterUnqueue(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	woken := make(chan struct{}, 1)
	var w IOWait
	w.Init(nil, func(*IOWait, int) { woken <- struct{}{} }, nil)
	if ok, err := e.QueueWait(&w, 1, true); !ok || err != nil {
		t.Fatalf("QueueWait: %v, %v", ok, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e.Waiting(&w) { // until the wake pass took w off the list
		}
		if w.Unqueue() {
			t.Error("Unqueue found w parked after the wake pass")
		}
		w.Init(nil, func(*IOWait, int) {}, nil)
	}()
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, engTestPattern(8, 1), nil)
	if err := e.Send(nil, &tx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Process(); err != nil {
		t.Fatal(err)
	}
	<-done
	select { // the wakeup read while w was parked ran, once
	case <-woken:
	default:
		t.Fatal("the old wakeup did not run")
	}
	select {
	case <-woken:
		t.Fatal("the old wakeup ran twice")
	default:
	}
}
