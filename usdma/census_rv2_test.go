package usdma

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/internal/census"
	"github.com/gosdma/gosdma/sdma"
)

// The third bad-input census of package usdma (badinput_test.go and census_rv_test.go have the
// first two): the zero PktQ and QState values no constant names, each call under census.Timeout
// so that a hang fails its row.

// TestCensusZeroPktQ: a PktQ not made by New is refused by Close, Submit and Wait with ErrInvalid
// saying so; its getters answer as an empty queue's. Close of the zero PktQ waited for ever (a
// send on its nil close token, whatever ctx: only ctx's end could have stopped it, and a
// Background never ends); Submit and Wait said "completion index 0 out of 0..-1", as if the
// slot were at fault.
func TestCensusZeroPktQ(t *testing.T) {
	bg := context.Background()
	notMade := func(r census.Result) bool {
		return !r.Hung && !r.Panicked && errors.Is(r.Err, ErrInvalid) && strings.Contains(r.Err.Error(), "the zero PktQ, not made by New")
	}
	msg := make([]byte, 64)
	cases := []census.Case{
		{"Close", func() error { var q PktQ; return q.Close(bg) }, notMade},
		{"Submit", func() error {
			var q PktQ
			info, hdr := Message(0, 64, testTemplate, msg)
			return q.Submit(bg, info, &hdr, msg)
		}, notMade},
		{"Wait", func() error { var q PktQ; return q.Wait(bg, 0) }, notMade},
		{"getters", func() error {
			var q PktQ
			if q.Slots() != 0 || q.Comp(0).Status != Free || q.State() != Active || q.Invalidate(msg) != 0 {
				return errors.New("not an empty queue")
			}
			_ = q.Stats()
			return nil
		}, census.OK},
	}
	census.Run(t, cases)
}

// TestCensusQStateString: a QState that is neither Active nor Deferred is named by its number, as
// CompState's String does; it was "ACTIVE".
func TestCensusQStateString(t *testing.T) {
	for s, want := range map[QState]string{Active: "ACTIVE", Deferred: "DEFERRED", 2: "QState(2)", 99: "QState(99)"} {
		if got := s.String(); got != want {
			t.Errorf("QState(%d).String() = %q, want %q", uint32(s), got, want)
		}
	}
}

// TestCensusCtrlNotTruncated: Ctrl does not truncate an opcode or a vector count its fields
// cannot hold into another request (Message's rule for ReqInfo's other fields): opcode 17 is not
// Eager (1), nor 16 Expected (0), and 256 data vectors are not 0; Submit refuses each with
// ErrInvalid. Ctrl masked them: Ctrl(17, 1) was an Eager request, and Submit sent it.
func TestCensusCtrlNotTruncated(t *testing.T) {
	for _, c := range []struct {
		op       Opcode
		dataVecs int
		nvecs    int
		want     string
	}{
		{17, 1, 1, "unknown opcode 15"},
		{16, 1, 1, "unknown opcode 15"},
		{Eager, 256, 0, "io vector count 0"},
		{Eager, 255, 0, "io vector count 0"},
		{Eager, -1, 0, "io vector count 0"},
	} {
		ctrl := Ctrl(c.op, c.dataVecs)
		info := ReqInfo{Ctrl: ctrl}
		if info.Opcode() == Eager && c.op != Eager || info.Opcode() == Expected {
			t.Errorf("Ctrl(%d, %d): opcode %d, another request's", c.op, c.dataVecs, info.Opcode())
		}
		if c.op == Eager && info.IOVCnt() != 0 {
			t.Errorf("Ctrl(%d, %d): io vector count %d, want 0 (refused)", c.op, c.dataVecs, info.IOVCnt())
		}
		d, err := sdma.NewDevice(sdma.Config{RingSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		pq := testQueue(t, Config{Device: d, Slots: 4})
		msg := make([]byte, 64)
		info, hdr := Message(0, 64, testTemplate, msg)
		info.Ctrl = ctrl
		vecs := [][]byte{msg}[:c.nvecs]
		if err := pq.Submit(context.Background(), info, &hdr, vecs...); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Submit with Ctrl(%d, %d): %v, want ErrInvalid saying %q", c.op, c.dataVecs, err, c.want)
		}
		_ = pq.Close(context.Background())
		_ = d.Close()
	}
}
