package udpsink

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gosdma/gosdma/internal/census"
)

// TestCensusZeroSinkAndReceiver: a Sink not made by New and a Receiver not made by Listen are
// refused by every call that would use the socket, with ErrInvalid saying so, and their
// addresses are nil. Close of either, Run, RunWithin and Addr of the zero Receiver, and the
// zero Sink's LocalAddr and RemoteAddr dereferenced the nil socket (an undocumented panic);
// the zero Sink's Deliver and Queue said "engine 0, sink built for 0", as if the engine number
// were at fault.
func TestCensusZeroSinkAndReceiver(t *testing.T) {
	bg := context.Background()
	refused := func(want string) func(census.Result) bool {
		return func(r census.Result) bool {
			return !r.Hung && !r.Panicked && errors.Is(r.Err, ErrInvalid) && strings.Contains(r.Err.Error(), want)
		}
	}
	cases := []census.Case{
		{"zero Sink Deliver", func() error { var s Sink; return s.Deliver(0, [][]byte{{1, 2, 3, 4}}) }, refused("not made by New")},
		{"zero Sink Queue", func() error { var s Sink; return s.Queue(0, [][]byte{{1, 2, 3, 4}}) }, refused("not made by New")},
		{"zero Sink Close", func() error { var s Sink; return s.Close() }, refused("not made by New")},
		{"zero Sink Flush of nothing", func() error { var s Sink; s.Flush(0, nil); return nil }, census.OK},
		{"zero Sink addresses are nil", func() error {
			var s Sink
			if s.LocalAddr() != nil || s.RemoteAddr() != nil {
				return errors.New("an address")
			}
			return nil
		}, census.OK},
		{"zero Receiver Run", func() error { var r Receiver; _, err := r.Run(bg); return err }, refused("not made by Listen")},
		{"zero Receiver RunWithin", func() error { var r Receiver; _, err := r.RunWithin(bg, time.Second); return err }, refused("not made by Listen")},
		{"zero Receiver Close", func() error { var r Receiver; return r.Close() }, refused("not made by Listen")},
		{"zero Receiver Addr is nil, Received 0", func() error {
			var r Receiver
			if r.Addr() != nil || r.Received() != 0 {
				return errors.New("an address or a count")
			}
			return nil
		}, census.OK},
	}
	census.Run(t, cases)
}
