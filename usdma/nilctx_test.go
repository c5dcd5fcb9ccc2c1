package usdma

import (
	"context"
	"errors"
	"testing"

	"github.com/gosdma/gosdma/sdma"
)

// nilCtx is the bad input of TestNilContextRefused (a variable, so that vet's and staticcheck's
// nil-context checks do not flag a literal).
var nilCtx context.Context

// TestNilContextRefused: Submit, Wait and Close refuse a nil ctx with a *ReqError matching
// ErrInvalid and change nothing (Submit claims no slot, Close leaves the queue open). Before,
// each panicked with a nil pointer dereference, and only when it had to wait (a full ring or no
// txreq for Submit, a request in flight for Wait and Close): after the slot was claimed, for
// Submit, and after the queue was closed, for Close.
func TestNilContextRefused(t *testing.T) {
	dev := testDevice(t, sdma.Config{Manual: true})
	pq := testQueue(t, Config{Device: dev, Slots: 8})
	data := pattern(1000, 7)
	info, hdr := Message(2, 256, testTemplate, data)
	var re *ReqError
	if err := pq.Submit(nilCtx, info, &hdr, data); !errors.Is(err, ErrInvalid) || !errors.As(err, &re) {
		t.Fatalf("Submit(nil ctx) = %v, want a *ReqError matching ErrInvalid", err)
	}
	if c := pq.Comp(2); c.Status != Free {
		t.Fatalf("slot 2 %v after the refused Submit", c)
	}
	if err := pq.Submit(context.Background(), info, &hdr, data); err != nil {
		t.Fatal(err)
	}
	if err := pq.Wait(nilCtx, 2); !errors.Is(err, ErrInvalid) || !errors.As(err, &re) {
		t.Fatalf("Wait(nil ctx) with the request in flight = %v, want ErrInvalid", err)
	}
	if err := pq.Close(nilCtx); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Close(nil ctx) = %v, want ErrInvalid", err)
	}
	run := func(slot int) {
		for pq.Comp(slot).Status == Queued {
			if _, err := dev.Engine(0).Process(); err != nil {
				t.Fatal(err)
			}
			dev.Engine(0).Poll()
		}
		if err := pq.Wait(context.Background(), slot); err != nil {
			t.Fatal(err)
		}
	}
	run(2)
	info3, hdr3 := Message(3, 256, testTemplate, data)
	if err := pq.Submit(context.Background(), info3, &hdr3, data); err != nil {
		t.Fatalf("Submit after the refused Close: %v (the queue must still be open)", err)
	}
	if err := pq.Wait(nilCtx, 3); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Wait(nil ctx) = %v, want ErrInvalid", err)
	}
	run(3)
	if err := pq.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
