package pio_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/internal/census"
	"github.com/gosdma/gosdma/pio"
)

// The second bad-input census of package pio (badinput_test.go, TestEveryMethodAfterClose and the
// review tests have the first: sizes, thresholds, copies out of order, every call after Close):
// the zero SendContext and Buf, and copies given nothing, each call under census.Timeout so that a
// hang fails its row.

// TestCensusZeroSendContext: a SendContext not made by New is refused by BufferAlloc,
// BufferAllocWait, SendWait and Enable with ErrInvalid saying so. BufferAlloc said "packet of 16
// dwords: want 2..0", as if the packet were at fault, and Enable reported success.
func TestCensusZeroSendContext(t *testing.T) {
	bg := context.Background()
	for name, f := range map[string]func(sc *pio.SendContext) error{
		"BufferAlloc":     func(sc *pio.SendContext) error { _, err := sc.BufferAlloc(16, nil); return err },
		"BufferAllocWait": func(sc *pio.SendContext) error { _, err := sc.BufferAllocWait(bg, 16, nil); return err },
		"SendWait":        func(sc *pio.SendContext) error { return sc.SendWait(bg, 0, 0, [][]byte{make([]byte, 56)}, nil) },
		"Enable":          func(sc *pio.SendContext) error { return sc.Enable() },
	} {
		r := census.Call(func() error { return f(new(pio.SendContext)) })
		if r.Hung || r.Panicked || !errors.Is(r.Err, pio.ErrInvalid) || !strings.Contains(r.Err.Error(), "not made by New") {
			t.Errorf("%s of a zero SendContext: %v, want ErrInvalid saying it was not made by New", name, r)
		}
	}
}

func TestCensusPio(t *testing.T) {
	newSC := func() *pio.SendContext {
		sc, err := pio.New(pio.Config{Manual: true, Credits: 32})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sc.Close() })
		return sc
	}
	cases := []census.Case{
		{"Copy of a zero Buf", func() error { var b pio.Buf; return b.Copy(0, make([]byte, 8)) }, census.Is(pio.ErrState)},
		{"CopyEnd of a zero Buf", func() error { var b pio.Buf; return b.CopyEnd() }, census.Is(pio.ErrState)},
		{"Copy twice", func() error {
			b, err := newSC().BufferAlloc(16, nil)
			if err != nil {
				return err
			}
			_ = b.Copy(pio.CreatePBC(0, 0, 0, 16), make([]byte, 56))
			return b.Copy(0, make([]byte, 56))
		}, census.Is(pio.ErrState)},
		{"WriteQWords into a short dst panics (dst must hold src's quadwords)", func() error {
			pio.WriteQWords(make([]byte, 8), make([]byte, 64))
			return nil
		}, func(r census.Result) bool { return r.Panicked }},
	}
	census.Run(t, cases)
}
