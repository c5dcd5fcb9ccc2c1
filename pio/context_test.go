package pio

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counter counts release callbacks per packet id.
type counter struct {
	mu    sync.Mutex
	seen  map[uint64]int
	codes map[uint64]ReleaseCode
}

func newCounter() *counter {
	return &counter{seen: map[uint64]int{}, codes: map[uint64]ReleaseCode{}}
}

type relOf struct {
	c  *counter
	id uint64
}

func (r *relOf) Released(code ReleaseCode) {
	r.c.mu.Lock()
	r.c.seen[r.id]++
	r.c.codes[r.id] = code
	r.c.mu.Unlock()
}

func (c *counter) check(t *testing.T, n uint64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range n {
		if c.seen[id] != 1 {
			t.Fatalf("packet %d released %d times", id, c.seen[id])
		}
	}
	if uint64(len(c.seen)) != n {
		t.Fatalf("%d packets released, want %d", len(c.seen), n)
	}
}

func pkt(id uint64, n int) []byte {
	b := make([]byte, max(n, 8))
	binary.LittleEndian.PutUint64(b, id)
	return b[:max(n, 8)]
}

// Credits come back with the kernel's codes: threshold, PBC, forced (reported as SC_DISABLE).
func TestReleaseCodes(t *testing.T) {
	sink := &captureSink{}
	sc, err := New(Config{Credits: 8, Threshold: 4, Sink: sink, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	c := newCounter()
	send := func(id uint64, flags PBC) {
		b, err := sc.BufferAlloc(2+14, &relOf{c, id}) // one block
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Copy(CreatePBC(flags, 0, 0, 16), pkt(id, 56)); err != nil {
			t.Fatal(err)
		}
	}
	send(0, 0)
	send(1, 0)
	sc.Process() // 2 unreturned < threshold 4: no return
	if len(c.seen) != 0 {
		t.Fatalf("released before the threshold: %v", c.seen)
	}
	send(2, PBCCreditReturn)
	sc.Process() // the PBC asks
	if c.seen[2] != 1 || c.codes[0] != PRCPBC {
		t.Fatalf("PBC return: %v %v", c.seen, c.codes)
	}
	for id := uint64(3); id < 7; id++ {
		send(id, 0)
	}
	sc.Process()
	if c.codes[6] != PRCThreshold {
		t.Fatalf("threshold return: %v", c.codes)
	}
	send(7, 0)
	sc.Process()
	sc.ReturnCredits()
	sc.Process()
	if c.codes[7] != PRCSCDisable { // fill_code maps the force bit to PRC_SC_DISABLE
		t.Fatalf("forced return: %v", c.codes[7])
	}
	c.check(t, 8)
	if sc.Avail() != 8 {
		t.Fatalf("avail %d after all returned", sc.Avail())
	}
}

// A halt releases every packet in the context with an error exactly once, delivers none of the
// ones the chip had not sent, and the context recovers.
func TestHaltReleasesExactlyOnce(t *testing.T) {
	sink := &captureSink{}
	sc, err := New(Config{Credits: 32, Threshold: 32, Sink: sink, Manual: true, Faults: FaultPlan{HaltAt: 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	c := newCounter()
	for id := range uint64(10) {
		b, err := sc.BufferAlloc(16, &relOf{c, id})
		if err != nil {
			t.Fatal(err)
		}
		b.Copy(CreatePBC(0, 0, 0, 16), pkt(id, 56))
	}
	sc.Process() // sends 3, halts on the 4th, restarts
	c.check(t, 10)
	for id, code := range c.codes {
		if code != PRCSCDisable {
			t.Errorf("packet %d: code %v, want sc-disable", id, code)
		}
	}
	if got := len(sink.take()); got != 3 {
		t.Errorf("sink got %d packets, want the 3 before the halt", got)
	}
	h := sc.LastHalt()
	if h == nil || h.Cause != CauseInjected || h.Packet != 3 || !errors.Is(h, ErrHalted) {
		t.Fatalf("halt %v", h)
	}
	if !sc.Enabled() || sc.Halted() || sc.Avail() != 32 || sc.Stats().Restarts != 1 {
		t.Fatalf("not recovered: enabled %v halted %v avail %d", sc.Enabled(), sc.Halted(), sc.Avail())
	}
	// It sends again.
	b, err := sc.BufferAlloc(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Copy(CreatePBC(0, 0, 0, 16), pkt(99, 56))
	sc.Process()
	if got := sink.take(); len(got) != 1 || binary.LittleEndian.Uint64(got[0]) != 99 {
		t.Fatalf("after recovery: %v", got)
	}
}

// A PBC whose length does not match the blocks halts the context (the chip's PBC check).
func TestBadPBCHalts(t *testing.T) {
	sc := newManual(t, 8, &captureSink{})
	c := newCounter()
	b, _ := sc.BufferAlloc(40, &relOf{c, 0}) // 3 blocks
	b.Copy(CreatePBC(0, 0, 0, 16), pkt(0, 152))
	sc.Process()
	if h := sc.LastHalt(); h == nil || h.Cause != CausePBCLength {
		t.Fatalf("halt %v", h)
	}
	c.check(t, 1)
	if c.codes[0] != PRCSCDisable {
		t.Fatalf("code %v", c.codes[0])
	}
}

// Close releases what is pending exactly once; later calls get ErrClosed.
func TestCloseReleasesExactlyOnce(t *testing.T) {
	sc, err := New(Config{Credits: 16, Threshold: 16, Sink: &captureSink{}})
	if err != nil {
		t.Fatal(err)
	}
	c := newCounter()
	for id := range uint64(8) {
		b, err := sc.BufferAlloc(16, &relOf{c, id})
		if err != nil {
			t.Fatal(err)
		}
		b.Copy(CreatePBC(0, 0, 0, 16), pkt(id, 56))
	}
	sc.Close()
	sc.Close()
	c.check(t, 8)
	if _, err := sc.BufferAlloc(16, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if err := sc.Enable(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Enable after Close: %v", err)
	}
}

// Producers that find no credits park on the wait list; a release pass wakes at most
// WaitBatchSize of them, in order, and asks for another return for the rest.
func TestWaitBatch(t *testing.T) {
	sc := newManual(t, 4, &captureSink{})
	for range 4 {
		b, _ := sc.BufferAlloc(16, nil)
		b.Copy(CreatePBC(0, 0, 0, 16), nil)
	}
	seq := sc.ReleaseSeq()
	if _, err := sc.BufferAlloc(16, nil); err != ErrNoCredits {
		t.Fatalf("full context: %v", err)
	}
	var order []int
	ws := make([]*Waiter, 12)
	for i := range ws {
		ws[i] = &Waiter{}
		ws[i].Init(func(*Waiter) { order = append(order, i) })
		if !sc.QueueWait(ws[i], seq) {
			t.Fatal("QueueWait refused with no release since")
		}
	}
	if sc.QueueWait(&Waiter{}, seq-1) {
		t.Fatal("QueueWait parked after a release pass")
	}
	sc.Process() // consumes, returns credits (waiters present), one pass: 5 woken, force re-armed
	if len(order) != WaitBatchSize {
		t.Fatalf("first pass woke %d", len(order))
	}
	sc.Process() // the re-armed forced return: the next 5
	sc.Process()
	if len(order) != 12 {
		t.Fatalf("woke %d of 12", len(order))
	}
	for i, w := range order {
		if w != i {
			t.Fatalf("wake order %v", order)
		}
	}
	if sc.Waiting() != 0 {
		t.Fatal("waiters left")
	}
}

func TestSendWaitContext(t *testing.T) {
	sc, err := New(Config{Credits: 2, Threshold: 2, Sink: &captureSink{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	// Hold both blocks unfinished: nothing can come back.
	b1, _ := sc.BufferAlloc(16, nil)
	b2, _ := sc.BufferAlloc(16, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := sc.SendWait(ctx, 0, 0, [][]byte{pkt(1, 8)}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SendWait: %v", err)
	}
	if sc.Waiting() != 0 {
		t.Fatal("cancelled waiter left queued")
	}
	b1.Copy(CreatePBC(0, 0, 0, 16), nil)
	b2.Copy(CreatePBC(0, 0, 0, 16), nil)
	if err := sc.SendWait(context.Background(), 0, 0, [][]byte{pkt(1, 8)}, nil); err != nil {
		t.Fatal(err)
	}
}

// Many producers on a small context with halts injected: every packet is released exactly once,
// every one delivered was released OK or after the halt, and no credit is lost or doubled.
func TestConcurrentProducersStress(t *testing.T) {
	for _, manual := range []bool{false, true} {
		sink := &captureSink{}
		sc, err := New(Config{Credits: 24, Threshold: 6, Sink: sink, Manual: manual, Faults: FaultPlan{HaltEvery: 97}})
		if err != nil {
			t.Fatal(err)
		}
		const producers = 4
		per := 3000
		if testing.Short() {
			per = 500
		}
		c := newCounter()
		var notRunning atomic.Int64
		var wg sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					id := uint64(p*per + i)
					n := 8 + int(id%7)*20
					err := sc.SendWait(context.Background(), 0, 0, [][]byte{pkt(id, n)}, &relOf{c, id})
					if errors.Is(err, ErrNotRunning) {
						notRunning.Add(1)
						c.mu.Lock()
						c.seen[id]++ // not accepted: counts as its one outcome
						c.mu.Unlock()
					} else if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		// Every credit comes back once the chip has sent everything: none lost, none doubled.
		deadline := time.Now().Add(10 * time.Second)
		for sc.Avail() != 24 && time.Now().Before(deadline) {
			sc.ReturnCredits()
			sc.Process()
			time.Sleep(time.Millisecond)
		}
		if a := sc.Avail(); a != 24 {
			t.Errorf("avail %d after the chip sent everything, want all 24", a)
		}
		sc.Close()
		c.check(t, producers*uint64(per))
		st := sc.Stats()
		if st.Halts == 0 {
			t.Error("no halt injected")
		}
		if st.Releases+st.Flushed+uint64(notRunning.Load()) != producers*uint64(per) {
			t.Errorf("releases %d + flushed %d + refused %d != %d", st.Releases, st.Flushed, notRunning.Load(), producers*per)
		}
		seen := map[uint64]bool{}
		for _, p := range sink.take() {
			id := binary.LittleEndian.Uint64(p)
			if seen[id] {
				t.Fatalf("packet %d delivered twice", id)
			}
			seen[id] = true
		}
	}
}

// BufferAlloc, Copy and the chip's pass allocate nothing.
func TestSendAllocsNothing(t *testing.T) {
	sc := newManual(t, 64, &captureSink{})
	sc.sink = discard{}
	data := make([]byte, 120)
	rel := ReleaseFunc(func(ReleaseCode) {})
	allocs := testing.AllocsPerRun(1000, func() {
		b, err := sc.BufferAlloc(32, rel)
		if err != nil {
			t.Fatal(err)
		}
		b.Copy(CreatePBC(0, 0, 0, 32), data)
		sc.Process()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per packet", allocs)
	}
}

type discard struct{}

func (discard) Deliver(int, [][]byte) error { return nil }

// The sleep window: credits that come back between a failed allocation and the parking are not
// missed. QueueWait refuses to park when a release pass returned credits since the snapshot.
func TestWaitSleepWindow(t *testing.T) {
	sc := newManual(t, 2, &captureSink{})
	for range 2 {
		b, _ := sc.BufferAlloc(16, nil)
		b.Copy(CreatePBC(0, 0, 0, 16), nil)
	}
	seq := sc.ReleaseSeq()
	if _, err := sc.BufferAlloc(16, nil); err != ErrNoCredits {
		t.Fatalf("full: %v", err)
	}
	// The window: the chip sends and returns the credits before the producer parks.
	sc.Process()
	w := &Waiter{}
	woken := 0
	w.Init(func(*Waiter) { woken++ })
	if sc.QueueWait(w, seq) {
		t.Fatal("parked although credits came back after the snapshot: a lost wake-up")
	}
	b, err := sc.BufferAlloc(16, nil)
	if err != nil {
		t.Fatalf("retry after the refused park: %v", err)
	}
	b.Copy(CreatePBC(0, 0, 0, 16), nil)
	// Without progress it parks, and the next pass that returns credits wakes it.
	seq = sc.ReleaseSeq()
	if !sc.QueueWait(w, seq) {
		t.Fatal("refused to park with no release since the snapshot")
	}
	sc.CancelWait(w)
	if woken != 0 || sc.Waiting() != 0 {
		t.Fatal("cancelled waiter woken or left queued")
	}
}

// Close while producers send: every packet accepted is released exactly once (by the chip or by
// Close's flush), every refused one was refused with ErrClosed or ErrNotRunning, nothing blocks.
func TestStressCloseWhileSending(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for range rounds {
		sc, err := New(Config{Credits: 8, Threshold: 4, Sink: &captureSink{}})
		if err != nil {
			t.Fatal(err)
		}
		c := newCounter()
		var accepted, refused atomic.Uint64
		var wg sync.WaitGroup
		const producers = 3
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					id := uint64(p)<<32 | uint64(i)
					err := sc.SendWait(context.Background(), 0, 0, [][]byte{pkt(id, 40)}, &relOf{c, id})
					if errors.Is(err, ErrClosed) || errors.Is(err, ErrNotRunning) {
						refused.Add(1)
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					accepted.Add(1)
				}
			}()
		}
		time.Sleep(time.Millisecond)
		sc.Close()
		wg.Wait()
		c.mu.Lock()
		n := uint64(0)
		for id, k := range c.seen {
			if k != 1 {
				t.Fatalf("packet %#x released %d times", id, k)
			}
			n++
		}
		c.mu.Unlock()
		if n != accepted.Load() {
			t.Fatalf("%d released, %d accepted", n, accepted.Load())
		}
		if refused.Load() != producers {
			t.Fatalf("%d producers stopped by the close, want %d", refused.Load(), producers)
		}
	}
}

// Stop refuses allocations while the chip goes on sending what was written; Enable alone does not
// undo it (the hardware is still enabled, as in the kernel), Disable then Enable does.
func TestStopDisableEnable(t *testing.T) {
	sink := &captureSink{}
	sc := newManual(t, 8, sink)
	b, _ := sc.BufferAlloc(16, nil)
	sc.Stop()
	if _, err := sc.BufferAlloc(16, nil); err != ErrNotRunning {
		t.Fatalf("after Stop: %v", err)
	}
	b.Copy(CreatePBC(0, 0, 0, 16), pkt(1, 56))
	sc.Process()
	if len(sink.take()) != 1 {
		t.Fatal("the chip stopped sending what was written")
	}
	if err := sc.Enable(); err != nil || sc.Enabled() {
		t.Fatalf("Enable after Stop alone: %v, enabled %v", err, sc.Enabled())
	}
	if err := sc.Restart(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Restart of a context that is not halted: %v", err)
	}
	sc.Disable()
	if err := sc.InjectHalt(); err != ErrNotRunning {
		t.Fatalf("InjectHalt on a disabled context: %v", err)
	}
	if err := sc.Enable(); err != nil || !sc.Enabled() || sc.Index() != 0 || sc.Type() != Kernel {
		t.Fatalf("Disable, Enable: %v %v", err, sc.Enabled())
	}
	b, err := sc.BufferAlloc(16, nil)
	if err != nil {
		t.Fatalf("after re-enable: %v", err)
	}
	if sc.InFlight() != 1 {
		t.Fatalf("in flight %d", sc.InFlight())
	}
	b.Copy(CreatePBC(0, 0, 0, 16), nil) // Close waits for unfinished buffers
}

// A threshold change forces a credit return (sc_set_cr_threshold); bad values change nothing.
func TestSetThreshold(t *testing.T) {
	sc := newManual(t, 8, &captureSink{})
	if err := sc.SetThreshold(8); err != nil || sc.Threshold() != 8 {
		t.Fatalf("SetThreshold(8): %v %d", err, sc.Threshold())
	}
	sc.Process() // the return the change forced
	c := newCounter()
	b, _ := sc.BufferAlloc(16, &relOf{c, 0})
	b.Copy(CreatePBC(0, 0, 0, 16), nil)
	sc.Process() // 1 < 8: no return
	if len(c.seen) != 0 {
		t.Fatal("returned below the threshold")
	}
	if err := sc.SetThreshold(2); err != nil {
		t.Fatal(err)
	}
	sc.Process() // the forced return
	c.check(t, 1)
	for _, bad := range []int{0, 9} {
		if err := sc.SetThreshold(bad); !errors.Is(err, ErrInvalid) || sc.Threshold() != 2 {
			t.Errorf("SetThreshold(%d): %v, threshold %d", bad, err, sc.Threshold())
		}
	}
	if err := sc.SetFaults(FaultPlan{HaltEvery: 1}); err != nil {
		t.Fatal(err)
	}
	b, _ = sc.BufferAlloc(16, nil)
	b.Copy(CreatePBC(0, 0, 0, 16), nil)
	sc.Process()
	if h := sc.LastHalt(); h == nil || h.Error() == "" || h.Cause.String() != "injected" {
		t.Fatalf("SetFaults: halt %v", h)
	}
}

func TestNewBadConfig(t *testing.T) {
	for _, cfg := range []Config{{Type: 9}, {Credits: MaxBlocks + 1}, {Credits: 8, Threshold: 9}, {Credits: -1}} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalid) || err.Error() == "" {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}
