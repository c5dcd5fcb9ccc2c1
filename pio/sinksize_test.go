package pio_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/pio"
)

// sizedSink takes engine numbers 0..lanes-1 and says so (Engines, as udpsink.Sink); it refuses
// a packet of any other number, as udpsink.Sink does. lanes < 0 says nothing (a wrapper over a
// sink without the method).
type sizedSink struct{ lanes int }

func (s sizedSink) Engines() int { return s.lanes }

func (s sizedSink) Deliver(ctxt int, _ [][]byte) error {
	if s.lanes >= 0 && (ctxt < 0 || ctxt >= s.lanes) {
		return fmt.Errorf("engine %d, sink built for %d", ctxt, s.lanes)
	}
	return nil
}

// panickySizedSink's Engines panics (a sink's bug).
type panickySizedSink struct{}

func (panickySizedSink) Engines() int                { panic("engines: boom") }
func (panickySizedSink) Deliver(int, [][]byte) error { return nil }

// TestNewRefusesSinkWithoutTheContextsLane: a sink that says how many engine numbers it takes
// (an Engines method, as udpsink.Sink has) and has none for Config.Index, the number the context
// delivers as, is refused by New (ErrInvalid, naming both). New took it, and every packet of the
// context was lost in silence: SendWait returned nil, the packet's credits came back, and only
// Stats.SinkErrors told. A sink with a number for the index, one without the method and one whose
// Engines is negative (it does not say) are taken as before; a panic in Engines refuses.
func TestNewRefusesSinkWithoutTheContextsLane(t *testing.T) {
	for _, tc := range []struct {
		index int
		sink  pio.Sink
		ok    bool
	}{
		{1, sizedSink{1}, false},
		{5, sizedSink{3}, false},
		{0, sizedSink{0}, false},
		{-1, sizedSink{4}, false},
		{-1, nopSink{}, true},
		{0, sizedSink{1}, true},
		{2, sizedSink{3}, true},
		{7, sizedSink{-1}, true},
		{7, nopSink{}, true},
		{0, panickySizedSink{}, false},
	} {
		name := fmt.Sprintf("Index %d, sink %#v", tc.index, tc.sink)
		sc, err := pio.New(pio.Config{Type: pio.Kernel, Index: tc.index, Sink: tc.sink, Manual: true})
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: New: %v", name, err)
		case tc.ok:
			if err := sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 16)}, nil); err != nil {
				t.Errorf("%s: SendWait: %v", name, err)
			}
			sc.Process()
			if n := sc.Stats().SinkErrors; n != 0 {
				t.Errorf("%s: %d sink errors, want 0", name, n)
			}
		case err == nil:
			var lost uint64
			if serr := sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 16)}, nil); serr == nil {
				sc.Process()
				lost = sc.Stats().SinkErrors
			}
			t.Errorf("%s: New took a sink with no engine number for the context (a packet sent: %d sink errors)", name, lost)
		case !errors.Is(err, pio.ErrInvalid):
			t.Errorf("%s: New: %v, want ErrInvalid", name, err)
		default:
			want := []string{"engines: boom"}
			if s, ok := tc.sink.(sizedSink); ok {
				want = []string{fmt.Sprintf("takes %d engines ", s.lanes), fmt.Sprintf("Index %d", tc.index)}
				if s.lanes == 1 {
					want[0] = "takes 1 engine " // not "1 engines"
				}
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: New: %q, want it to say %q", name, err, w)
				}
			}
		}
		if sc != nil {
			sc.Close()
		}
	}
}

// nopSink takes every packet and says nothing of engine numbers.
type nopSink struct{}

func (nopSink) Deliver(int, [][]byte) error { return nil }
