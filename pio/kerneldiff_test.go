package pio

import (
	"errors"
	"testing"
)

// A packet that halts the chip while Disable lets the written packets go out (sc_disable's
// sc_wait_for_packet_egress) is a halt like any other: it is recorded (LastHalt, Stats.Halts)
// and the context reports Halted until it is enabled again. Disable used to drop the halt the
// drain met, so a bad PBC flushed at Close or Disable left no trace of why it was not sent.
func TestHaltDuringDisableRecorded(t *testing.T) {
	for _, c := range []struct {
		name  string
		plan  FaultPlan
		pbcDW uint32
		cause HaltCause
	}{
		{"injected", FaultPlan{HaltAt: 1}, 4, CauseInjected},
		{"pbc-length", FaultPlan{}, 40, CausePBCLength},
	} {
		t.Run(c.name, func(t *testing.T) {
			sink := &captureSink{}
			sc, err := New(Config{Type: Kernel, Credits: 8, Threshold: 1, Sink: sink, Manual: true, Faults: c.plan})
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			var codes []ReleaseCode
			b, err := sc.BufferAlloc(4, ReleaseFunc(func(code ReleaseCode) { codes = append(codes, code) }))
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Copy(CreatePBC(0, 0, 0, c.pbcDW), make([]byte, 8)); err != nil {
				t.Fatal(err)
			}
			sc.Disable()
			if len(codes) != 1 || codes[0] != PRCSCDisable {
				t.Fatalf("release codes %v, want one sc-disable", codes)
			}
			if n := len(sink.take()); n != 0 {
				t.Fatalf("halted packet delivered (%d packets)", n)
			}
			h := sc.LastHalt()
			if h == nil || h.Cause != c.cause || !errors.Is(h, ErrHalted) {
				t.Fatalf("LastHalt %v, want cause %v", h, c.cause)
			}
			if st := sc.Stats(); st.Halts != 1 {
				t.Fatalf("Stats.Halts %d, want 1", st.Halts)
			}
			if !sc.Halted() {
				t.Fatal("Halted false after a halt during Disable")
			}
			if err := sc.Enable(); err != nil {
				t.Fatal(err)
			}
			if sc.Halted() || !sc.Enabled() {
				t.Fatalf("after Enable: halted %v enabled %v", sc.Halted(), sc.Enabled())
			}
		})
	}
}
