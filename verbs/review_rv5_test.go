package verbs

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestNilContextRefused: Send and Drain refuse a nil ctx with ErrInvalid before anything is
// sent or waited for, whether or not the flow has packets in flight (sdma, dma and usdma do the
// same since fab8750). They used it only when they had to wait: Drain with a PIO packet in
// flight, or Send of a large packet behind one (the PIO drain), panicked on ctx.Done of a nil
// interface; idle, they went on as if given one.
func TestNilContextRefused(t *testing.T) {
	d := badTestDevice(t, Config{})
	f := d.NewFlow(1, 0)
	var nilCtx context.Context
	try := func(state, name string, call func() error) {
		t.Helper()
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("%s, %s: panic %v", name, state, p)
			}
		}()
		if err := call(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nil context") {
			t.Errorf("%s, %s: %v, want ErrInvalid naming the nil context", name, state, err)
		}
	}
	small, large := [][]byte{make([]byte, 16)}, [][]byte{make([]byte, 1024)}
	for _, state := range []string{"idle", "a PIO packet in flight"} {
		if state != "idle" {
			if p, err := f.Send(context.Background(), small, nil); err != nil || p != PathPIO {
				t.Fatalf("the PIO packet: %v %v", p, err)
			}
		}
		pioBusy, sdmaBusy := f.Busy()
		try(state, "Send small", func() error { _, err := f.Send(nilCtx, small, nil); return err })
		try(state, "Send large", func() error { _, err := f.Send(nilCtx, large, nil); return err })
		try(state, "Drain", func() error { return f.Drain(nilCtx) })
		if p, s := f.Busy(); p != pioBusy || s != sdmaBusy || f.Sent(PathSDMA) != 0 {
			t.Errorf("%s: the refused calls changed the flow: busy %d,%d -> %d,%d, SDMA sent %d", state, pioBusy, sdmaBusy, p, s, f.Sent(PathSDMA))
		}
	}
	if err := f.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
}
