package pio

import (
	"context"
	"errors"
	"testing"
)

// TestEveryMethodAfterClose calls each exported method of a closed context, on a manual chip and
// on the chip goroutine, and checks the answer Close's doc lists for it: ErrClosed from the calls
// that would allocate or enable (BufferAlloc, BufferAllocWait, SendWait, Enable, InjectHalt),
// ErrInvalid from Restart (sc_restart's -EINVAL: a closing context is never restarted), nil from
// Close again, SetThreshold and SetFaults (ErrInvalid for a bad threshold, as before), no packet
// from Process, and the accessors as they were. Close's doc said "later calls get ErrClosed",
// which Restart, SetThreshold and SetFaults do not: the behaviour was right (kernel, Restart's
// doc, TestRestartClosedSaysClosed), the doc is fixed.
func TestEveryMethodAfterClose(t *testing.T) {
	for _, manual := range []bool{true, false} {
		name := "chip"
		if manual {
			name = "manual"
		}
		t.Run(name, func(t *testing.T) {
			sc, err := New(Config{Type: Kernel, Credits: 8, Threshold: 1, Manual: manual})
			if err != nil {
				t.Fatal(err)
			}
			if err := sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 16)}, nil); err != nil {
				t.Fatal(err)
			}
			if err := sc.Close(); err != nil {
				t.Fatal(err)
			}
			before := sc.Stats()
			seq := sc.ReleaseSeq()
			errs := []struct {
				name string
				call func() error
				want error // nil: no error
			}{
				{"BufferAlloc", func() error { _, err := sc.BufferAlloc(4, nil); return err }, ErrClosed},
				{"BufferAllocWait", func() error { _, err := sc.BufferAllocWait(context.Background(), 4, nil); return err }, ErrClosed},
				{"SendWait", func() error {
					return sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 16)}, nil)
				}, ErrClosed},
				{"Enable", sc.Enable, ErrClosed},
				{"InjectHalt", sc.InjectHalt, ErrClosed},
				{"Restart", sc.Restart, ErrInvalid},
				{"Close", sc.Close, nil},
				{"SetThreshold", func() error { return sc.SetThreshold(2) }, nil},
				{"SetThreshold(0)", func() error { return sc.SetThreshold(0) }, ErrInvalid},
				{"SetFaults", func() error { return sc.SetFaults(FaultPlan{HaltEvery: 1}) }, nil},
				{"Stop", func() error { sc.Stop(); return nil }, nil},
				{"Disable", func() error { sc.Disable(); return nil }, nil},
				{"ReturnCredits", func() error { sc.ReturnCredits(); return nil }, nil},
				{"ReleaseUpdate", func() error { sc.ReleaseUpdate(); return nil }, nil},
			}
			for _, c := range errs {
				err := c.call()
				switch {
				case c.want == nil && err != nil:
					t.Errorf("%s after Close: %v, want nil", c.name, err)
				case c.want != nil && !errors.Is(err, c.want):
					t.Errorf("%s after Close: %v, want %v", c.name, err, c.want)
				}
				if c.want == ErrInvalid && errors.Is(err, ErrClosed) || c.want == ErrClosed && errors.Is(err, ErrInvalid) {
					t.Errorf("%s after Close: %v matches both", c.name, err)
				}
			}
			if n := sc.Process(); n != 0 {
				t.Errorf("Process after Close consumed %d packets, want 0", n)
			}
			if sc.Enabled() || sc.Halted() || sc.InFlight() != 0 || sc.Index() != 0 || sc.Type() != Kernel ||
				sc.Credits() != 8 || sc.Threshold() != 2 || sc.LastHalt() != nil || sc.Waiting() != 0 {
				t.Errorf("accessors after Close: enabled %v halted %v inflight %d index %d type %v credits %d threshold %d lasthalt %v waiting %d",
					sc.Enabled(), sc.Halted(), sc.InFlight(), sc.Index(), sc.Type(), sc.Credits(), sc.Threshold(), sc.LastHalt(), sc.Waiting())
			}
			if a := sc.Avail(); a != 8 {
				t.Errorf("Avail after Close: %d, want 8 (the packet's credits came back)", a)
			}
			if s := sc.Stats(); s.Packets != before.Packets || s.Halts != before.Halts || s.Restarts != before.Restarts {
				t.Errorf("Stats after Close moved: %+v -> %+v", before, s)
			}
			// QueueWait never parks on a closed context (nothing would wake the waiter): false,
			// retry, and the retried allocation says ErrClosed; with a stale seq or a current one.
			w := newChanWaiter()
			if sc.QueueWait(w, seq-1) {
				t.Error("QueueWait with a stale seq after Close parked the waiter")
			}
			if sc.QueueWait(w, sc.ReleaseSeq()) || sc.CancelWait(w) || sc.Waiting() != 0 {
				t.Error("QueueWait with a current seq after Close parked the waiter, which nothing would wake")
			}
		})
	}
}
