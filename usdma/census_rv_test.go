package usdma

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/internal/census"
	"github.com/gosdma/gosdma/sdma"
)

// The second bad-input census of package usdma (badinput_test.go and the review tests have the
// first: ReqInfo's ranges, typed nil allocators, nil contexts): configurations, calls after Close
// and on a closed device, slots out of range, each call under census.Timeout so that a hang fails
// its row.

// TestCensusUsdmaNew: New refuses a zero sdma.Device (not made by sdma.NewDevice) with an error
// naming it. It took it, and every Submit was then refused for its header's VL ("invalid
// SC(0)/VL(0): VL must be below 0 and equal the SC"), which said nothing of the device. A refused
// Config's error names New and the field, not "request slot -1: config: ...", a request that
// never was.
func TestCensusUsdmaNew(t *testing.T) {
	var zero sdma.Device
	dev, err := sdma.NewDevice(sdma.Config{RingSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"zero Device", Config{Device: &zero}, "usdma: New: Config.Device is the zero sdma.Device, not made by sdma.NewDevice"},
		{"nil Device", Config{}, "usdma: New: Config.Device is nil"},
		{"Slots -1", Config{Device: dev, Slots: -1}, "usdma: New: Config.Slots -1 out of 1..65536"},
		{"Timeout -1", Config{Device: dev, Timeout: -1}, "usdma: New: Config.Timeout -1ns is negative"},
	} {
		pq, err := New(c.cfg)
		var re *ReqError
		if pq != nil || !errors.Is(err, ErrInvalid) || !errors.As(err, &re) || err.Error() != c.want {
			t.Errorf("New with %s: a queue %v, %v; want none and %q (ErrInvalid)", c.name, pq != nil, err, c.want)
		}
	}
}

// TestCensusUsdma: calls after Close, on a closed device, on slots out of range, with the answer
// each doc gives.
func TestCensusUsdma(t *testing.T) {
	bg := context.Background()
	msg := pattern(256, 1)
	newDev := func() *sdma.Device {
		d, err := sdma.NewDevice(sdma.Config{RingSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	newPQ := func() *PktQ { return testQueue(t, Config{Device: newDev(), Slots: 4}) }
	submit := func(pq *PktQ, slot int) error {
		info, hdr := Message(slot, 64, testTemplate, msg)
		return pq.Submit(bg, info, &hdr, msg)
	}
	is := func(want error, text string) func(census.Result) bool {
		return func(r census.Result) bool {
			return !r.Hung && !r.Panicked && errors.Is(r.Err, want) && strings.Contains(r.Err.Error(), text)
		}
	}
	cases := []census.Case{
		{"Submit after Close", func() error { pq := newPQ(); _ = pq.Close(bg); return submit(pq, 0) }, is(ErrClosed, "closed")},
		{"Submit on a closed device", func() error {
			d := newDev()
			pq := testQueue(t, Config{Device: d, Slots: 4})
			_ = d.Close()
			return submit(pq, 0)
		}, is(ErrClosed, "device is closed")},
		{"Submit on slot 4 of 4", func() error { return submit(newPQ(), 4) }, is(ErrInvalid, "completion index 4 out of 0..3")},
		{"Wait slot -1", func() error { return newPQ().Wait(bg, -1) }, is(ErrInvalid, "slot out of 0..3")},
		{"Wait on a slot never used", func() error { return newPQ().Wait(bg, 0) }, is(ErrSlotFree, "no request was ever submitted")},
		{"Close twice", func() error { pq := newPQ(); _ = pq.Close(bg); return pq.Close(bg) }, census.OK},
		{"Comp of slot -1 reads Free", func() error {
			if e := newPQ().Comp(-1); e.Status != Free {
				return errors.New("not Free")
			}
			return nil
		}, census.OK},
		{"Invalidate of nothing pinned", func() error {
			if n := newPQ().Invalidate(msg); n != 0 {
				return errors.New("dropped something")
			}
			return nil
		}, census.OK},
	}
	census.Run(t, cases)
}

// TestCensusTemplateHeaderLength: Template.Header refuses a first packet length whose header
// lengths do not fit their fields, with ErrInvalid naming it. It built one: Header(-100) had
// PBC.LengthDWs 4087, Header(16320) PBC.LengthDWs 0 and Header(1<<20) 16 (the 12-bit field
// wrapped), and the largest int 16 (its padding overflowed).
func TestCensusTemplateHeaderLength(t *testing.T) {
	for _, c := range []struct {
		n      int
		pbc    int // PBC.LengthDWs of a length that fits
		lrhLen int // LRH.PktLen
	}{
		{0, 16, 15},
		{1, 17, 16},
		{4096, 1040, 1039},
		{MaxFirstLen, 4095, 4094},
		{-1, -1, -1},
		{-100, -1, -1},
		{MaxFirstLen + 1, -1, -1},
		{MaxFirstLen + 4, -1, -1},
		{1 << 20, -1, -1},
		{int(^uint(0) >> 1), -1, -1},
	} {
		h, err := testTemplate.Header(c.n)
		if c.pbc < 0 {
			want := "usdma: Template.Header: first packet length " + itoa(c.n) + " out of 0.." + itoa(MaxFirstLen)
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), want) || h != (Header{}) {
				t.Errorf("Header(%d): PBC.LengthDWs %d, %v; want a zero header and %q (ErrInvalid)", c.n, h.PBCLenDWs(), err, want)
			}
			continue
		}
		if err != nil || h.PBCLenDWs() != c.pbc || h.PktLen() != c.lrhLen {
			t.Errorf("Header(%d): PBC.LengthDWs %d, LRH.PktLen %d, %v; want %d, %d, no error", c.n, h.PBCLenDWs(), h.PktLen(), err, c.pbc, c.lrhLen)
		}
	}
}
