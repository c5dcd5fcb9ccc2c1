//go:build linux

package udpsink

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// TestBadConfigsMatchSentinels: every refused Config and ReceiverConfig matches a sentinel of the
// package and names the field. A bad Batch and a negative Idle used to match none (plain
// fmt.Errorf), nor did a malformed address, and a negative WriteBuffer or ReadBuffer was taken and ignored.
// GSO with Batch 1 used to run unbatched without GSO, silently.
func TestBadConfigsMatchSentinels(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want error
		name string
	}{
		{Config{Addr: "127.0.0.1:9", Engines: -1}, ErrEngine, "engines"},
		{Config{Addr: "127.0.0.1:9", Engines: MaxEngines + 1}, ErrEngine, "engines"},
		{Config{Addr: "127.0.0.1:9", Batch: -1}, ErrInvalid, "batch"},
		{Config{Addr: "127.0.0.1:9", Batch: 1025}, ErrInvalid, "batch"},
		{Config{Addr: "127.0.0.1:9", Batch: 1, GSO: true}, ErrInvalid, "GSO with Batch 1"},
		{Config{Addr: "127.0.0.1:9", WriteBuffer: -1}, ErrInvalid, "WriteBuffer"},
		{Config{Addr: "127.0.0.1:9", WriteBuffer: math.MinInt}, ErrInvalid, "WriteBuffer"},
		{Config{Addr: "192.0.2.1:9"}, ErrNotLoopback, "loopback"},
		{Config{Addr: "nonsense"}, ErrInvalid, "nonsense"},
		{Config{Addr: "127.0.0.1:99999"}, ErrInvalid, "99999"},
	} {
		s, err := New(c.cfg)
		if s != nil || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("New(%+v): %v; want %v naming %s", c.cfg, err, c.want, c.name)
		}
	}
	for _, c := range []struct {
		cfg  ReceiverConfig
		want error
		name string
	}{
		{ReceiverConfig{Idle: -time.Second}, ErrInvalid, "idle"},
		{ReceiverConfig{ReadBuffer: -1}, ErrInvalid, "ReadBuffer"},
		{ReceiverConfig{Addr: "192.0.2.1:0"}, ErrNotLoopback, "loopback"},
	} {
		r, err := Listen(c.cfg)
		if r != nil || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("Listen(%+v): %v; want %v naming %s", c.cfg, err, c.want, c.name)
		}
	}
}

// TestBadCallsSink: engine numbers out of range, packets past a datagram and calls after Close
// are refused with the package's sentinels and send nothing.
func TestBadCallsSink(t *testing.T) {
	s, err := New(Config{Addr: "127.0.0.1:9", Engines: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []int{-1, 2, math.MaxInt} {
		if err := s.Deliver(e, [][]byte{make([]byte, 8)}); !errors.Is(err, ErrEngine) {
			t.Errorf("Deliver(engine %d): %v", e, err)
		}
		if err := s.Queue(e, [][]byte{make([]byte, 8)}); !errors.Is(err, ErrEngine) {
			t.Errorf("Queue(engine %d): %v", e, err)
		}
		s.Flush(e, nil) // nothing queued there: nothing to do, no panic
	}
	if err := s.Deliver(0, [][]byte{make([]byte, MaxPayload+1)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Deliver past a datagram: %v", err)
	}
	if err := s.Queue(0, [][]byte{make([]byte, MaxPayload+1)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Queue past a datagram: %v", err)
	}
	if st := s.Stats(); st.Packets != 0 {
		t.Errorf("refused calls sent %d packets", st.Packets)
	}
	_ = s.Close()
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if err := s.Deliver(0, [][]byte{make([]byte, 8)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Deliver after Close: %v", err)
	}
	if err := s.Queue(0, [][]byte{make([]byte, 8)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Queue after Close: %v", err)
	}
	if _, err := ParseHeader(make([]byte, HeaderLen-1)); !errors.Is(err, ErrBadFrame) {
		t.Errorf("ParseHeader of a short frame: %v", err)
	}
	if _, err := ResolveLoopback(""); !errors.Is(err, ErrInvalid) {
		t.Errorf("ResolveLoopback(\"\"): %v", err)
	}
}

// TestReceiverCloseTwice: a second Close of a Receiver returns nil and changes nothing (it used
// to return the socket's "use of closed network connection").
func TestReceiverCloseTwice(t *testing.T) {
	r, err := Listen(ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
}

// TestNewRefusesPortZero: a sink's address must name the receiver's port. New took port 0, and
// each Deliver to it then reported the packet sent (the kernel takes a sendmsg to port 0 and
// drops the datagram) while nothing could receive it; only a batch's sendmmsg later failed, with
// ECONNREFUSED.
func TestNewRefusesPortZero(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", ":0", "[::1]:0", "localhost:0"} {
		s, err := New(Config{Addr: addr})
		if s != nil {
			s.Close()
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "port 0") {
			t.Errorf("New(Addr %q): %v; want ErrInvalid naming port 0", addr, err)
		}
	}
}

// TestTooManySegmentsIsErrTooLarge: a packet of more segments than one message's gather list
// takes (with the frame header, UIO_MAXIOV: 1024 entries) is refused by Deliver and Queue with
// an error matching ErrTooLarge, counted as failed; it matched no sentinel of the package. The
// most segments that fit (1023) are sent.
func TestTooManySegmentsIsErrTooLarge(t *testing.T) {
	p := newPlainPeer(t)
	s, err := New(Config{Addr: p.pc.LocalAddr().String(), Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	segs := make([][]byte, iovMax-1)
	for i := range segs {
		segs[i] = []byte{byte(i)}
	}
	over := append(segs[:len(segs):len(segs)], []byte{1})
	if err := s.Deliver(0, over); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1024 segments") {
		t.Errorf("Deliver of 1024 segments: %v; want ErrTooLarge naming them", err)
	}
	if err := s.Queue(0, over); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1024 segments") {
		t.Errorf("Queue of 1024 segments: %v; want ErrTooLarge naming them", err)
	}
	if err := s.Deliver(0, segs); err != nil {
		t.Errorf("Deliver of 1023 segments: %v", err)
	}
	if err := s.Queue(0, segs); err != nil {
		t.Errorf("Queue of 1023 segments: %v", err)
	}
	errs := make([]error, 1)
	s.Flush(0, errs)
	if errs[0] != nil {
		t.Errorf("Flush of 1023 segments: %v", errs[0])
	}
	checkFrames(t, p.read(2), 0, 0, [][]byte{bytes.Join(segs, nil), bytes.Join(segs, nil)})
	if st := s.Stats(); st.Packets != 2 || st.Errors != 2 {
		t.Errorf("stats %+v: want 2 sent, 2 failed", st)
	}
}

// TestFlushShortErrsPanicsClearly: a Flush whose errs has fewer entries than packets queued
// panics at once, naming both lengths, with the batch failed and dropped (the next Flush sends
// nothing, the next Queue starts a new batch numbered from the packets sent). It panicked with
// an index out of range, and only if a packet failed: with all sent it returned as if errs had
// been right, and with the last of three failing it had sent the first two.
func TestFlushShortErrsPanicsClearly(t *testing.T) {
	p := newPlainPeer(t)
	s, err := New(Config{Addr: p.pc.LocalAddr().String(), Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, n := range []int{0, 1, 2} {
		for range 3 {
			if err := s.Queue(0, [][]byte{{1, 2, 3}}); err != nil {
				t.Fatal(err)
			}
		}
		func() {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, fmt.Sprintf("%d error entries for 3 packets", n)) {
					t.Errorf("Flush with %d errs for 3 packets: panic %v", n, r)
				}
			}()
			s.Flush(0, make([]error, n))
		}()
	}
	if st := s.Stats(); st.Packets != 0 || st.Errors != 9 || st.Syscalls != 0 {
		t.Errorf("stats %+v: want nothing sent, 9 failed", st)
	}
	s.Flush(0, nil) // nothing held
	if err := s.Queue(0, [][]byte{{4}}); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 1)
	s.Flush(0, errs)
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	checkFrames(t, p.read(1), 0, 0, [][]byte{{4}})
	p.none()
}

// TestDeliverWhileBatchHeldRefused: a Deliver on an engine that holds queued packets is refused
// (ErrInvalid, counted as failed), and the batch's frames keep their numbers. It sent the packet
// with the number the first queued frame already carried, so the receiver saw a duplicate number
// and one missing at the end, with every packet sent once.
func TestDeliverWhileBatchHeldRefused(t *testing.T) {
	p := newPlainPeer(t)
	s, err := New(Config{Addr: p.pc.LocalAddr().String(), Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b, c := []byte("aaaa"), []byte("bbbb"), []byte("cccc")
	for _, q := range [][]byte{a, b} {
		if err := s.Queue(0, [][]byte{q}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Deliver(0, [][]byte{c}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "2 queued packets") {
		t.Errorf("Deliver with 2 queued: %v; want ErrInvalid naming them", err)
	}
	errs := make([]error, 2)
	s.Flush(0, errs)
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if err := s.Deliver(0, [][]byte{c}); err != nil { // nothing held now
		t.Fatal(err)
	}
	checkFrames(t, p.read(3), 0, 0, [][]byte{a, b, c})
	p.none()
	if st := s.Stats(); st.Packets != 3 || st.Errors != 1 {
		t.Errorf("stats %+v: want 3 sent, 1 failed", st)
	}
}
