package ring_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/ring"
)

// TestZeroRingRefused: the zero Ring is not a ring (New makes one). A producer's call on it is
// refused with ErrSize and an error that says so, changing nothing. It used to say "batch of 1
// descriptors, capacity -1" and match ErrTooBig, as if the batch were at fault.
func TestZeroRingRefused(t *testing.T) {
	var r ring.Ring
	ds := make([]desc.Desc, 1)
	for _, c := range []struct {
		op   string
		call func() error
	}{
		{"Reserve", func() error { _, err := r.Reserve(1); return err }},
		{"Enqueue", func() error { _, err := r.Enqueue(ds, 0); return err }},
		{"EnqueueSP", func() error { _, err := r.EnqueueSP(ds, 0); return err }},
		{"ReserveWrite", func() error { _, err := r.ReserveWrite(ds, 0); return err }},
	} {
		err := c.call()
		if !errors.Is(err, ring.ErrSize) || errors.Is(err, ring.ErrTooBig) {
			t.Errorf("%s on the zero Ring: %v, want ErrSize", c.op, err)
		}
		if err == nil || !strings.Contains(err.Error(), "ring: "+c.op+": the zero Ring: make rings with New") {
			t.Errorf("%s on the zero Ring: %v", c.op, err)
		}
		if r.Reserved() != 0 || r.Tail() != 0 || !r.Empty() {
			t.Errorf("%s on the zero Ring changed it: reserved %d tail %d", c.op, r.Reserved(), r.Tail())
		}
	}
}

// TestZeroRingCounts: the zero Ring holds nothing: Used is reserved - swHead = 0 (it was
// Size()-1-FreeCnt() = -1), FreeCnt 0, Empty, before and after Close, Reset and Open.
func TestZeroRingCounts(t *testing.T) {
	var r ring.Ring
	check := func(when string) {
		t.Helper()
		if r.Used() != 0 || r.FreeCnt() != 0 || !r.Empty() || r.Reserved() != r.SwHead() {
			t.Errorf("%s: Used %d FreeCnt %d Empty %v Reserved %d SwHead %d, want 0 0 true and equal", when, r.Used(), r.FreeCnt(), r.Empty(), r.Reserved(), r.SwHead())
		}
	}
	check("new")
	r.Close()
	check("closed")
	r.Reset(5)
	check("reset")
	r.Open()
	check("open")
	if n := r.Dequeue(make([]desc.Desc, 4)); n != 0 {
		t.Errorf("Dequeue on the zero Ring: %d", n)
	}
}
