package ring_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/internal/census"
	"github.com/gosdma/gosdma/ring"
)

// The bad-input census of package ring (the zero Ring's producer calls and Reset's refusal have
// their own tests: zeroring_test.go, rv3_reset_test.go): every exported entry point given sizes
// out of range, offsets outside its reservation, the zero Ring and Reservation, and the head
// seqcount's write section out of order, each call under census.Timeout so that a hang fails its
// row.

// TestCensusSeqCountSections: EndWrite with no write section open, and BeginWrite inside one, are
// refused with a panic matching ErrOrder, and the count stays as it was. EndWrite used to make the
// count odd with no writer to close it: BeginWait (read_seqcount_begin) then waited for ever, and
// every HeadSeq snapshot read a pass in progress. BeginWrite twice made it even inside the
// section, so a reader's Retry missed the section it was reading through.
func TestCensusSeqCountSections(t *testing.T) {
	r, err := ring.New(64)
	if err != nil {
		t.Fatal(err)
	}
	wantPanic := func(what string, f func()) {
		t.Helper()
		res := census.Call(func() error { f(); return nil })
		if !res.Panicked || !errors.Is(res.PanicError(), ring.ErrOrder) {
			t.Errorf("%s: %v, want a panic matching ErrOrder", what, res)
		}
	}
	c := r.Seq().Count()
	wantPanic("EndWrite with no section open", r.EndWrite)
	if r.Seq().Count() != c {
		t.Errorf("the refused EndWrite moved the count %d -> %d", c, r.Seq().Count())
	}
	if res := census.Call(func() error { r.Seq().BeginWait(); return nil }); res.Hung || res.Panicked {
		t.Errorf("BeginWait after the refused EndWrite: %v", res)
	}
	r.BeginWrite()
	c = r.Seq().Count()
	wantPanic("BeginWrite inside a section", r.BeginWrite)
	if r.Seq().Count() != c || c&1 != 1 {
		t.Errorf("the refused BeginWrite moved the count %d -> %d", c, r.Seq().Count())
	}
	r.EndWrite()
	var s ring.SeqCount
	wantPanic("EndWrite of a zero SeqCount", s.EndWrite)
	s.BeginWrite()
	s.EndWrite()
	if s.Count() != 2 {
		t.Errorf("a SeqCount's section: count %d, want 2", s.Count())
	}
}

// TestCensusRing: sizes, offsets, epochs and the zero values, each with the error or the
// documented panic its doc gives.
func TestCensusRing(t *testing.T) {
	ds := make([]desc.Desc, 1)
	newR := func() *ring.Ring {
		r, err := ring.New(64)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	panics := func(want error, text string) func(census.Result) bool {
		return func(r census.Result) bool {
			return r.Panicked && errors.Is(r.PanicError(), want) && strings.Contains(r.String(), text)
		}
	}
	var zr ring.Ring
	cases := []census.Case{
		{"New(-1)", func() error { _, err := ring.New(-1); return err }, census.Is(ring.ErrSize)},
		{"New(100)", func() error { _, err := ring.New(100); return err }, census.Is(ring.ErrSize)},
		{"New(MaxInt)", func() error { _, err := ring.New(math.MaxInt); return err }, census.Is(ring.ErrSize)},
		{"Reserve(0)", func() error { _, err := newR().Reserve(0); return err }, census.Is(ring.ErrSize)},
		{"Reserve(MinInt)", func() error { _, err := newR().Reserve(math.MinInt); return err }, census.Is(ring.ErrSize)},
		{"Reserve(MaxInt)", func() error { _, err := newR().Reserve(math.MaxInt); return err }, census.Is(ring.ErrTooBig)},
		{"ReserveIn of an epoch ahead", func() error { _, err := newR().ReserveIn(1, math.MaxUint64); return err }, census.Is(ring.ErrReset)},
		{"ReserveIn on the zero Ring", func() error { _, err := zr.ReserveIn(1, 0); return err }, census.Is(ring.ErrSize)},
		{"Enqueue(nil)", func() error { _, err := newR().Enqueue(nil, 0); return err }, census.Is(ring.ErrSize)},
		{"EnqueueSP(nil)", func() error { _, err := newR().EnqueueSP(nil, 0); return err }, census.Is(ring.ErrSize)},
		{"Enqueue with skip MinInt (clamped)", func() error { _, err := newR().Enqueue(make([]desc.Desc, 3), math.MinInt); return err }, census.OK},
		{"Write at offset -1", func() error {
			v, _ := newR().Reserve(2)
			v.Write(-1, ds, 0)
			return nil
		}, panics(ring.ErrNotReserved, "outside the reservation")},
		{"Write at offset MaxInt", func() error {
			v, _ := newR().Reserve(2)
			v.Write(math.MaxInt, ds, 0)
			return nil
		}, panics(ring.ErrNotReserved, "outside the reservation")},
		{"Publish of the zero Reservation", func() error { var v ring.Reservation; v.Publish(); return nil }, panics(ring.ErrNotReserved, "empty")},
		{"Publish twice", func() error {
			v, _ := newR().Reserve(1)
			v.Publish()
			v.Publish()
			return nil
		}, panics(ring.ErrNotReserved, "published already")},
		{"TryPublishRelease of the zero Reservation", func() error {
			var v ring.Reservation
			if v.TryPublishRelease() {
				return errors.New("published")
			}
			return nil
		}, census.OK},
		{"SetHWHead past the tail", func() error { newR().SetHWHead(5); return nil }, panics(ring.ErrOrder, "outside")},
		{"Dequeue(nil)", func() error {
			r := newR()
			_, _ = r.Enqueue(ds, 0)
			if n := r.Dequeue(nil); n != 0 {
				return errors.New("dequeued into nil")
			}
			return nil
		}, census.OK},
		{"Slot of the zero Ring", func() error { zr.Slot(0); return nil }, func(r census.Result) bool {
			return r.Panicked && strings.Contains(r.String(), "index out of range")
		}},
	}
	census.Run(t, cases)
}
