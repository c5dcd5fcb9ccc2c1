package verbs

import (
	"context"
	"errors"
	"testing"

	"github.com/gosdma/gosdma/internal/census"
	"github.com/gosdma/gosdma/pio"
	"github.com/gosdma/gosdma/sdma"
)

// The second bad-input census of package verbs (badinput_test.go has the first: configurations,
// Context's index, empty sends): every exported entry point called on a closed Device, a zero
// Device or Flow, with a nil context, or out of order, each call under census.Timeout so that a
// hang fails its row. A row's check says what the call must do.

// TestCensusFlowReleaseNotPublic: a Flow is not a pio.Releaser. Its PIO release callback
// (verbs_pio_complete) was the exported method Flow.Released, so any caller could release a PIO
// packet the flow never sent: the count of PIO packets in flight went to -1, and Drain, and every
// later Send that goes by SDMA (it waits for the flow's PIO packets to drain first), waited for
// ever. The callback is now a type of its own that only the flow's PIO sends hand to pio.
func TestCensusFlowReleaseNotPublic(t *testing.T) {
	d := badTestDevice(t, Config{})
	f := d.NewFlow(0, 0)
	if r, ok := any(f).(pio.Releaser); ok {
		r.Released(pio.PRCOK) // a caller's stray call, which the exported method invited
	}
	if p, _ := f.Busy(); p != 0 {
		t.Errorf("an idle flow has %d PIO packets in flight", p)
	}
	res := census.Call(func() error { return f.Drain(context.Background()) })
	if res.Hung || res.Panicked || res.Err != nil {
		t.Errorf("Drain of an idle flow: %v", res)
	}
	res = census.Call(func() error {
		_, err := f.Send(context.Background(), [][]byte{make([]byte, 1000)}, nil)
		return err
	})
	if res.Hung || res.Panicked || res.Err != nil {
		t.Errorf("an SDMA Send of an idle flow: %v", res)
	}
}

func TestCensusVerbs(t *testing.T) {
	bg := context.Background()
	seg := [][]byte{make([]byte, 64)}
	isErr := func(want error) func(census.Result) bool {
		return func(r census.Result) bool { return !r.Hung && !r.Panicked && errors.Is(r.Err, want) }
	}
	cases := []census.Case{
		{"New of a zero sdma.Device", func() error {
			var sd sdma.Device
			d, err := New(Config{SDMA: &sd, ManualPIO: true})
			if d != nil {
				d.Close()
			}
			return err
		}, isErr(ErrInvalid)},
		{"Close twice", func() error { d := badTestDevice(t, Config{}); d.Close(); return d.Close() }, census.OK},
		{"Send on a flow made after Close", func() error {
			d := badTestDevice(t, Config{})
			d.Close()
			_, err := d.NewFlow(0, 0).Send(bg, seg, nil)
			return err
		}, isErr(ErrClosed)},
		{"Send on VL 255 (past MaxVLs: context 0, engine 0)", func() error {
			_, err := badTestDevice(t, Config{}).NewFlow(0, 255).Send(bg, seg, nil)
			return err
		}, census.OK},
		{"Drain of an idle flow after Close", func() error {
			d := badTestDevice(t, Config{})
			f := d.NewFlow(0, 0)
			d.Close()
			return f.Drain(bg)
		}, census.OK},
		{"Sent of a path that is none", func() error {
			if n := badTestDevice(t, Config{}).NewFlow(0, 0).Sent(99); n != 0 {
				return errors.New("nonzero")
			}
			return nil
		}, census.OK},
		{"Path 99 String", func() error {
			if Path(99).String() == "" {
				return errors.New("empty name")
			}
			return nil
		}, census.OK},
	}
	census.Run(t, cases)
}
