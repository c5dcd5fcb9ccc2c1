package sdmatest_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestFaultSinkValidate: FailRate and StallRate are probabilities. A rate above 1 failed (or
// stalled) every delivery, a negative one none, NaN none, all silently; a negative Stall did not
// stall. Validate refuses them with an *sdma.ConfigError naming the field, and NewDevice, which
// calls it, refuses the device; 0, 1 and a rate between them are accepted. The same for
// FaultBatchSink, naming its own fields.
func TestFaultSinkValidate(t *testing.T) {
	rates := []struct {
		name string
		v    float64
		ok   bool
	}{
		{"zero", 0, true},
		{"half", 0.5, true},
		{"one", 1, true},
		{"negative", -0.1, false},
		{"NaN", math.NaN(), false},
		{"1.5", 1.5, false},
		{"+Inf", math.Inf(1), false},
	}
	type sinkV interface {
		sdma.Sink
		Validate() error
	}
	mk := map[string]func(fail, stall float64, d time.Duration) sinkV{
		"FaultSink": func(fail, stall float64, d time.Duration) sinkV {
			return &sdmatest.FaultSink{FailRate: fail, StallRate: stall, Stall: d}
		},
		"FaultBatchSink": func(fail, stall float64, d time.Duration) sinkV {
			return &sdmatest.FaultBatchSink{FaultSink: sdmatest.FaultSink{FailRate: fail, StallRate: stall, Stall: d}, Batch: &countBatch{}}
		},
	}
	for kind, build := range mk {
		for _, field := range []string{"FailRate", "StallRate", "Stall"} {
			for _, r := range rates {
				var s sinkV
				want := r.ok
				switch field {
				case "FailRate":
					s = build(r.v, 0, 0)
				case "StallRate":
					s = build(0, r.v, 0)
				case "Stall":
					if r.name == "NaN" || r.name == "+Inf" {
						continue
					}
					d := time.Duration(r.v * float64(time.Millisecond))
					s = build(0, 0, d)
					want = d >= 0
				}
				name := kind + "." + field + "=" + r.name
				check := func(what string, err error) {
					t.Helper()
					if want {
						if err != nil {
							t.Errorf("%s: %s: %v, want nil", name, what, err)
						}
						return
					}
					var ce *sdma.ConfigError
					if !errors.As(err, &ce) || ce.Field != "sdmatest."+kind+"."+field {
						t.Errorf("%s: %s: %v, want a *sdma.ConfigError for sdmatest.%s.%s", name, what, err, kind, field)
						return
					}
					if !errors.Is(err, sdma.ErrConfig) || !errors.Is(err, sdma.ErrInvalid) {
						t.Errorf("%s: %s: %v does not match ErrConfig and ErrInvalid", name, what, err)
					}
					if msg := err.Error(); !strings.HasPrefix(msg, "sdma: sdmatest."+kind+"."+field+" = ") {
						t.Errorf("%s: %s: message %q does not name the sink's field", name, what, msg)
					}
				}
				check("Validate", s.Validate())
				dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64, Sink: s})
				check("NewDevice", err)
				if err == nil {
					if want {
						_ = dev.Close()
					} else {
						t.Errorf("%s: NewDevice accepted the sink", name)
						_ = dev.Close()
					}
				}
			}
		}
	}
}

// badSink is a Sink whose Validate refuses (err) or panics (err nil).
type badSink struct{ err error }

func (badSink) Deliver(int, [][]byte) error { return nil }
func (s badSink) Validate() error {
	if s.err == nil {
		panic("Validate: on purpose")
	}
	return s.err
}

// TestSinkValidateAtNewDevice: NewDevice validates any Sink with a Validate method (sdma.Config.Sink):
// an error that is not a *sdma.ConfigError, or a panic, refuses the device with a *ConfigError
// for Sink quoting it; a FaultSink validates the sink it wraps, a FaultBatchSink its BatchSink.
func TestSinkValidateAtNewDevice(t *testing.T) {
	bad := errors.New("no route to the switch")
	for name, s := range map[string]sdma.Sink{
		"plain error":   badSink{err: bad},
		"panic":         badSink{},
		"wrapped":       &sdmatest.FaultSink{FailRate: 0.5, Sink: badSink{err: bad}},
		"wrapped batch": &sdmatest.FaultBatchSink{Batch: validatingBatch{countBatch: &countBatch{}, err: bad}},
	} {
		_, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64, Sink: s})
		var ce *sdma.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Sink" || !errors.Is(err, sdma.ErrConfig) {
			t.Errorf("%s: NewDevice: %v, want a *sdma.ConfigError for Sink", name, err)
			continue
		}
		want := bad.Error()
		if name == "panic" {
			want = "Validate panicked: Validate: on purpose"
		}
		if !strings.Contains(ce.Reason, want) {
			t.Errorf("%s: reason %q does not quote %q", name, ce.Reason, want)
		}
	}
	// A wrapped sink's *ConfigError comes through as it is.
	inner := &sdmatest.FaultSink{FailRate: 2}
	_, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64, Sink: &sdmatest.FaultSink{Sink: inner}})
	var ce *sdma.ConfigError
	if !errors.As(err, &ce) || ce.Field != "sdmatest.FaultSink.FailRate" {
		t.Errorf("wrapped FaultSink: %v, want the inner sink's *sdma.ConfigError", err)
	}
}

// validatingBatch is a countBatch with a Validate that refuses.
type validatingBatch struct {
	*countBatch
	err error
}

func (v validatingBatch) Validate() error { return v.err }

// TestFaultBatchSinkNilBatch: a FaultBatchSink with no BatchSink to wrap is refused by Validate,
// and so by NewDevice, with a *sdma.ConfigError naming sdmatest.FaultBatchSink.Batch. NewDevice
// used to refuse it only for its BatchLimit panicking on the nil interface, an error for Sink
// quoting the whole struct and a nil pointer dereference.
func TestFaultBatchSinkNilBatch(t *testing.T) {
	s := &sdmatest.FaultBatchSink{FaultSink: sdmatest.FaultSink{FailRate: 0.5}}
	for what, err := range map[string]error{
		"Validate":  s.Validate(),
		"NewDevice": func() error { _, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64, Sink: s}); return err }(),
	} {
		var ce *sdma.ConfigError
		if !errors.As(err, &ce) || ce.Field != "sdmatest.FaultBatchSink.Batch" || !errors.Is(err, sdma.ErrInvalid) {
			t.Errorf("%s: %v, want a *sdma.ConfigError for sdmatest.FaultBatchSink.Batch", what, err)
		}
	}
}

// TestFaultSinkTypedNilInner: a wrapped sink that is a nil pointer (or nil func) in a non-nil
// interface is refused by Validate, and so by NewDevice, with a *sdma.ConfigError naming the
// field, as NewDevice refuses one given as Config.Sink. It was accepted, and every delivery then
// panicked in the wrapped sink (recovered and counted as a sink error) while every txreq
// completed OK, its packet gone nowhere.
func TestFaultSinkTypedNilInner(t *testing.T) {
	for field, s := range map[string]interface {
		sdma.Sink
		Validate() error
	}{
		"sdmatest.FaultSink.Sink":        &sdmatest.FaultSink{Sink: (*sdmatest.CaptureSink)(nil)},
		"sdmatest.FaultSink.Sink (func)": &sdmatest.FaultSink{Sink: sdma.SinkFunc(nil)},
		"sdmatest.FaultBatchSink.Batch":  &sdmatest.FaultBatchSink{Batch: (*countBatch)(nil)},
	} {
		want, _, _ := strings.Cut(field, " ")
		dev, devErr := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64, Sink: s})
		if devErr == nil {
			_ = dev.Close()
		}
		for what, err := range map[string]error{"Validate": s.Validate(), "NewDevice": devErr} {
			var ce *sdma.ConfigError
			if !errors.As(err, &ce) || ce.Field != want || !errors.Is(err, sdma.ErrInvalid) {
				t.Errorf("%s: %s: %v, want a *sdma.ConfigError for %s", field, what, err, want)
			}
		}
	}
}
