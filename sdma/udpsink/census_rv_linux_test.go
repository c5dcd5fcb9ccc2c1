//go:build linux

package udpsink

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/internal/census"
)

// The second bad-input census of package udpsink (badinput_linux_test.go has the first: configs,
// engine numbers, sizes, calls after Close, short Flush errs): frames, addresses, a Receiver's
// calls after Close and a Sink's second Close, each call under census.Timeout so that a hang
// fails its row.
func TestCensusUdpsink(t *testing.T) {
	bg := context.Background()
	pair := func() (*Receiver, *Sink) {
		r, err := Listen(ReceiverConfig{Idle: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{Addr: r.Addr().String(), Batch: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(); _ = r.Close() })
		return r, s
	}
	cases := []census.Case{
		{"ParseHeader(nil)", func() error { _, err := ParseHeader(nil); return err }, census.Is(ErrBadFrame)},
		{"ParseHeader of a frame of 0xff bytes", func() error {
			b := make([]byte, HeaderLen+8)
			for i := range b {
				b[i] = 0xff
			}
			_, err := ParseHeader(b)
			return err
		}, census.Is(ErrBadFrame)},
		{"PutHeader into a short buffer panics, as its doc says", func() error { PutHeader(make([]byte, 3), Header{}); return nil },
			func(r census.Result) bool { return r.Panicked }},
		{"ResolveLoopback of a remote address", func() error { _, err := ResolveLoopback("8.8.8.8:53"); return err },
			func(r census.Result) bool { return !r.Hung && !r.Panicked && r.Err != nil }},
		{"Listen with a negative Idle", func() error { _, err := Listen(ReceiverConfig{Idle: -1}); return err }, census.Is(ErrInvalid)},
		{"Run after Close", func() error {
			r, err := Listen(ReceiverConfig{})
			if err != nil {
				return err
			}
			_ = r.Close()
			_, err = r.Run(bg)
			return err
		}, census.Is(ErrClosed)},
		{"Sink Close twice", func() error { _, s := pair(); _ = s.Close(); return s.Close() }, census.Is(ErrClosed)},
		{"Flush after a Close that sent the batch", func() error {
			_, s := pair()
			if err := s.Queue(0, [][]byte{{1, 2, 3, 4}}); err != nil {
				return err
			}
			_ = s.Close()
			errs := make([]error, 1)
			s.Flush(0, errs)
			return errs[0]
		}, census.OK},
	}
	census.Run(t, cases)
}

// TestCensusReceiverRunConcurrent: a Run or RunWithin called while another Run of the same
// Receiver runs returns ErrInvalid ("already running") at once and reads nothing; the first Run
// goes on, and once it returned a Run runs again. The second one ran: two Runs read the socket
// and tallied into the same buffers and run history at once (with a cancelled ctx the second
// returned context.Canceled, with a live one it read until the idle timeout, and both returned
// nil).
func TestCensusReceiverRunConcurrent(t *testing.T) {
	r, c := listenIdleHour(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		rep Report
		err error
	}
	first := make(chan result, 1)
	go func() {
		rep, err := r.Run(ctx)
		first <- result{rep, err}
	}()
	if _, err := c.Write([]byte("bad")); err != nil { // a bad frame: it begins no run
		t.Fatal(err)
	}
	awaitReceived(t, r, 1) // the first Run read it: it is running
	cancelled, cancelNow := context.WithCancel(t.Context())
	cancelNow()
	running := func(r census.Result) bool {
		return !r.Hung && !r.Panicked && errors.Is(r.Err, ErrInvalid) && strings.Contains(r.Err.Error(), "already running")
	}
	census.Run(t, []census.Case{
		{"Run during a Run", func() error { _, err := r.Run(t.Context()); return err }, running},
		{"Run with a cancelled ctx during a Run", func() error { _, err := r.Run(cancelled); return err }, running},
		{"RunWithin during a Run", func() error { _, err := r.RunWithin(t.Context(), time.Hour); return err }, running},
	})
	if _, err := c.Write([]byte("bad")); err != nil {
		t.Fatal(err)
	}
	awaitReceived(t, r, 2)
	cancel()
	res := <-first
	if !errors.Is(res.err, context.Canceled) || res.rep.BadFrames != 2 {
		t.Errorf("the first Run: %+v, %v; want 2 bad frames and context.Canceled", res.rep, res.err)
	}
	if _, err := r.Run(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("a Run after it: %v, want context.Canceled", err)
	}
}

// TestReceiverRunAfterCancelledRunKeepsItsDeadline: a Run whose ctx ended waits, before it
// returns, for the wake that ctx's end began (it sets a past read deadline). It returned at
// once (AfterFunc's stop does not wait for a func that began), so a wake that ran late set the
// deadline of the next Run, whose read then ended as at the idle timeout (Report.IdleTimeout, nil
// error) with its ctx live and an idle timeout an hour long. The wake is held in a hook until
// the first Run returned (before) or waits for it (after).
func TestReceiverRunAfterCancelledRunKeepsItsDeadline(t *testing.T) {
	r, c := listenIdleHour(t)
	var wakes atomic.Int32
	entered, release, waiting := make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
	testHooks.wake = func() {
		if wakes.Add(1) == 1 { // the first Run's wake only
			close(entered)
			<-release
		}
	}
	testHooks.waitWake = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { testHooks.wake, testHooks.waitWake = nil, nil })
	type result struct {
		rep Report
		err error
	}
	ctx, cancel := context.WithCancel(t.Context())
	first, second := make(chan result, 1), make(chan result, 1)
	go func() {
		rep, err := r.Run(ctx)
		first <- result{rep, err}
	}()
	send := func(want uint64) {
		if _, err := c.Write([]byte("bad")); err != nil { // a bad frame: it begins no run
			t.Fatal(err)
		}
		awaitReceived(t, r, want)
	}
	send(1) // the first Run reads: it is running
	cancel()
	<-entered // its wake began, and is held
	// A second frame ends the first Run's read, if it reads: it then sees ctx's end. It may have
	// seen it already, between reads (cancel came after frame 1 was counted but before the next
	// ctx check), and then reads no more: frame 2 goes to the second Run. Waiting here for it to
	// be read hung the test (CI, 10 minutes) in that order, so nothing waits for it; the two
	// Runs together tally every frame.
	if _, err := c.Write([]byte("bad")); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	runSecond := func() {
		go func() {
			rep, err := r.Run(ctx2)
			second <- result{rep, err}
		}()
		send(3) // the second Run pushed its deadline and read: it pushes none for idle/8
	}
	var res result
	select {
	case res = <-first: // returned with its wake held (before the fix)
		runSecond()
		close(release)
	case <-waiting: // it waits for its wake
		close(release)
		res = <-first
		runSecond()
	}
	firstBad := res.rep.BadFrames
	if !errors.Is(res.err, context.Canceled) || firstBad < 1 || firstBad > 2 {
		t.Errorf("the first Run: %+v, %v; want 1 or 2 bad frames and context.Canceled", res.rep, res.err)
	}
	// The second Run reads on until its ctx ends: no idle timeout (an hour) was reached.
	if _, err := c.Write([]byte("bad")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // a Run that stopped reading fails the test
	for r.Received() < 4 {
		select {
		case res = <-second: // ended by the first Run's late wake
			t.Fatalf("the second Run ended before its ctx: %+v, %v", res.rep, res.err)
		default:
			if time.Now().After(deadline) {
				t.Fatalf("the Runs read %d of the 4 frames in a minute: the second Run stopped reading", r.Received())
			}
			time.Sleep(time.Millisecond)
		}
	}
	cancel2()
	res = <-second
	if !errors.Is(res.err, context.Canceled) || res.rep.IdleTimeout || firstBad+res.rep.BadFrames != 4 {
		t.Errorf("the second Run: %+v, %v; want the bad frames the first left (%d) and context.Canceled", res.rep, res.err, 4-firstBad)
	}
}
