package verbs

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/pio"
	"github.com/gosdma/gosdma/sdma"
)

// The bad-input census of package verbs: bad configurations and arguments get an error matching
// ErrInvalid (or the path's sentinel), never a panic, and change nothing.

func badTestDevice(t *testing.T, cfg Config) *Device {
	t.Helper()
	sd, err := sdma.NewDevice(sdma.Config{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sd.Close() })
	cfg.SDMA, cfg.ManualPIO = sd, true
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestBadConfigs(t *testing.T) {
	sd, err := sdma.NewDevice(sdma.Config{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	for _, c := range []struct {
		cfg  Config
		want error
	}{
		{Config{}, ErrInvalid},
		{Config{SDMA: sd, PIOThreshold: -1}, ErrInvalid},
		{Config{SDMA: sd, PIOThreshold: pio.ThresholdCeiling + 1}, ErrInvalid},
		{Config{SDMA: sd, PIOThreshold: math.MaxInt}, ErrInvalid},
		{Config{SDMA: sd, Contexts: -1}, ErrInvalid},
		{Config{SDMA: sd, Contexts: 161}, ErrInvalid},
		{Config{SDMA: sd, Credits: -1}, pio.ErrInvalid},
		{Config{SDMA: sd, Credits: math.MaxInt}, pio.ErrInvalid},
	} {
		c.cfg.ManualPIO = true
		d, err := New(c.cfg)
		if d != nil || !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, %v; want %v", c.cfg, d, err, c.want)
		}
	}
}

// TestContextOutOfRange: Context of an index outside 0..NumContexts-1 is nil, as
// sdma.Device.Engine is for an engine number out of range (it used to panic: index out of range).
func TestContextOutOfRange(t *testing.T) {
	d := badTestDevice(t, Config{Contexts: 2})
	for _, i := range []int{-1, 2, math.MaxInt, math.MinInt} {
		if sc := d.Context(i); sc != nil {
			t.Errorf("Context(%d) = %v, want nil", i, sc)
		}
	}
	if d.Context(1) == nil {
		t.Error("Context(1) of 2 is nil")
	}
}

func TestBadSends(t *testing.T) {
	d := badTestDevice(t, Config{})
	f := d.NewFlow(1, 0)
	for name, c := range map[string]struct {
		segs [][]byte
		want error
	}{
		"nil segs":            {nil, ErrInvalid},
		"empty segment":       {[][]byte{{}}, ErrInvalid},
		"empty segments":      {make([][]byte, 100), ErrInvalid},
		"past an SDMA packet": {[][]byte{make([]byte, 16384)}, sdma.ErrMsgSize},
	} {
		path, err := f.Send(context.Background(), c.segs, nil)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v (path %v), want %v", name, err, path, c.want)
		}
		if p, s := f.Busy(); p != 0 || s != 0 {
			t.Errorf("%s: the refused send left %d PIO, %d SDMA packets busy", name, p, s)
		}
	}
	if _, err := f.Send(context.Background(), [][]byte{make([]byte, 8)}, nil); err != nil {
		t.Fatalf("the flow is not usable after the refused sends: %v", err)
	}
}

// TestCreditsBelowThreshold: a context too small for a packet of PIOThreshold bytes (PBC
// included) is refused by New. It used to be taken, and every packet between what the context
// holds and the threshold, which Send routes to PIO, failed with pio.ErrMsgSize where SDMA would
// have carried it.
func TestCreditsBelowThreshold(t *testing.T) {
	sd, err := sdma.NewDevice(sdma.Config{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	for _, c := range []Config{{Credits: 2}, {Credits: 4, PIOThreshold: 249}, {Credits: 64, PIOThreshold: 4096}} {
		c.SDMA, c.ManualPIO = sd, true
		if d, err := New(c); d != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Credits") {
			t.Errorf("%+v: %v", c, err)
			if d != nil {
				d.Close()
			}
		}
	}
	for _, c := range []Config{{Credits: 4, PIOThreshold: 248}, {Credits: 2, DisablePIO: true}, {Credits: 65, PIOThreshold: 4096}} {
		c.SDMA, c.ManualPIO = sd, true
		d, err := New(c)
		if err != nil {
			t.Errorf("%+v: %v", c, err)
			continue
		}
		f := d.NewFlow(0, 0)
		if n := d.PIOThreshold(); n > 0 {
			if p, err := f.Send(context.Background(), [][]byte{make([]byte, n)}, nil); err != nil || p != PathPIO {
				t.Errorf("%+v: a packet of the threshold: %v by %v", c, err, p)
			}
		}
		d.Close()
	}
}
