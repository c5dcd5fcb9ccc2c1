package pio

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// The bad-input census of package pio: every exported entry point given a bad value returns an
// error matching the right sentinel (or panics with a documented message before it takes a lock),
// and the context stays usable.

// TestBadInputsContext: refused calls on a context, each followed by a good send that must still
// go through.
func TestBadInputsContext(t *testing.T) {
	for _, c := range []struct {
		name string
		call func(sc *SendContext) error
		want error
	}{
		{"BufferAlloc -1 dwords", func(sc *SendContext) error { _, err := sc.BufferAlloc(-1, nil); return err }, ErrMsgSize},
		{"BufferAlloc 1 dword", func(sc *SendContext) error { _, err := sc.BufferAlloc(1, nil); return err }, ErrMsgSize},
		{"BufferAlloc MaxInt dwords", func(sc *SendContext) error { _, err := sc.BufferAlloc(math.MaxInt, nil); return err }, ErrMsgSize},
		{"BufferAlloc MinInt dwords", func(sc *SendContext) error { _, err := sc.BufferAlloc(math.MinInt, nil); return err }, ErrMsgSize},
		{"BufferAllocWait -1 dwords", func(sc *SendContext) error {
			_, err := sc.BufferAllocWait(context.Background(), -1, nil)
			return err
		}, ErrMsgSize},
		{"SetThreshold 0", func(sc *SendContext) error { return sc.SetThreshold(0) }, ErrInvalid},
		{"SetThreshold -1", func(sc *SendContext) error { return sc.SetThreshold(-1) }, ErrInvalid},
		{"SetThreshold past credits", func(sc *SendContext) error { return sc.SetThreshold(sc.Credits() + 1) }, ErrInvalid},
		{"SendWait past the buffer", func(sc *SendContext) error {
			return sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 1<<20)}, nil)
		}, ErrMsgSize},
		{"Restart of a running context", func(sc *SendContext) error { return sc.Restart() }, ErrInvalid},
		{"CopyMid before CopyStart", func(sc *SendContext) error {
			b, err := sc.BufferAlloc(4, nil)
			if err != nil {
				return err
			}
			defer func() { _ = b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)) }()
			return b.CopyMid(make([]byte, 8))
		}, ErrState},
		{"Copy of part dwords", func(sc *SendContext) error {
			b, err := sc.BufferAlloc(4, nil)
			if err != nil {
				return err
			}
			defer func() { _ = b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)) }()
			return b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 7))
		}, ErrInvalid},
		{"Copy past the blocks", func(sc *SendContext) error {
			b, err := sc.BufferAlloc(4, nil)
			if err != nil {
				return err
			}
			defer func() { _ = b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)) }()
			return b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 1024))
		}, ErrMsgSize},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := &captureSink{}
			sc := newManual(t, 32, cs)
			before := sc.Stats()
			err := c.call(sc)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if err.Error() == "" || !strings.HasPrefix(err.Error(), "pio: ") {
				t.Errorf("unclear error %q", err)
			}
			sc.Process()
			if got := sc.Stats(); got.Halts != before.Halts {
				t.Errorf("the refused call halted the context: %+v -> %+v", before, got)
			}
			if err := sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 8)}, nil); err != nil {
				t.Fatalf("the context is not usable after the refused call: %v", err)
			}
		})
	}
}

// TestQueueWaitNilLeavesNoLockHeld: a nil Waiter is a programmer error that panics, as documented,
// before the wait lock is taken: the context's waits, releases and Close go on afterwards (it used
// to panic holding waitMu, and every later QueueWait, release pass and Close hung). CancelWait of a
// nil Waiter reports false (it was not queued).
func TestQueueWaitNilLeavesNoLockHeld(t *testing.T) {
	sc := newManual(t, 32, nil)
	func() {
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(fmt.Sprint(r), "nil Waiter") {
				t.Errorf("QueueWait(nil): recovered %v, want the documented panic", r)
			}
		}()
		sc.QueueWait(nil, sc.ReleaseSeq())
	}()
	if sc.CancelWait(nil) {
		t.Error("CancelWait(nil) reported a queued waiter")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var w Waiter
		w.Init(func(*Waiter) {})
		if !sc.QueueWait(&w, sc.ReleaseSeq()) {
			t.Error("QueueWait of a good waiter refused")
		}
		sc.CancelWait(&w)
		sc.Close()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang, not a timing assertion
		t.Fatal("the wait lock is still held after QueueWait(nil)")
	}
}

// TestNewBadMTU: an MTU outside 1..10240 is refused (it was taken, and a negative or huge one
// made a default threshold from an overflowed sum).
func TestNewBadMTU(t *testing.T) {
	for _, mtu := range []int{-1, 10241, math.MaxInt} {
		if _, err := New(Config{MTU: mtu, Manual: true}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "MTU") {
			t.Errorf("MTU %d: %v", mtu, err)
		}
	}
}

// TestNewSmallestContext: Credits 1 is documented valid with the default threshold (0), whose
// kernel formula gives 0 for one credit (50 % of 1); New used to refuse it, naming a threshold
// the caller had not set. The default is at least 1 now.
func TestNewSmallestContext(t *testing.T) {
	for _, typ := range []Type{Kernel, VL15, ACK, User} {
		sc, err := New(Config{Type: typ, Credits: 1, Manual: true})
		if err != nil {
			t.Fatalf("%v Credits 1: %v", typ, err)
		}
		if sc.Threshold() != 1 {
			t.Errorf("%v Credits 1: threshold %d, want 1", typ, sc.Threshold())
		}
		if err := sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 8)}, nil); err != nil {
			t.Errorf("%v Credits 1: %v", typ, err)
		}
		sc.Close()
	}
}

// TestContextSizesBadFields: a negative SizeConfig field, or more than 8 data VLs (hfi1's num_vls
// is 1..8), is refused with ErrInvalid naming the field. They used to be taken: SendContexts -1
// gave a kernel context count of -1, NumVLs -1 no kernel contexts, NumVLs 100 every one of the
// 160 contexts to the kernel and none to VL15 or ACK, all without an error.
func TestContextSizesBadFields(t *testing.T) {
	for _, c := range []struct {
		cfg   SizeConfig
		field string
	}{
		{SizeConfig{MemSize: -1}, "MemSize"},
		{SizeConfig{SendContexts: -1}, "SendContexts"},
		{SizeConfig{NumVLs: -1}, "NumVLs"},
		{SizeConfig{NumVLs: 9}, "NumVLs"},
		{SizeConfig{KrcvQueues: -1}, "KrcvQueues"},
		{SizeConfig{RcvContexts: -1}, "RcvContexts"},
		{SizeConfig{PIOThreshold: -1}, "PIOThreshold"},
	} {
		sz, err := ContextSizes(c.cfg)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: %v (%+v), want ErrInvalid naming %s", c.cfg, err, sz, c.field)
		}
		for _, ts := range sz {
			if ts.Count < 0 || ts.Blocks < 0 {
				t.Errorf("%+v: negative size %+v", c.cfg, sz)
			}
		}
	}
	if _, err := ContextSizes(SizeConfig{NumVLs: 8, SDMA: true}); err != nil {
		t.Errorf("8 VLs: %v", err)
	}
}
