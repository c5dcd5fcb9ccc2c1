package pio

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// A copy shorter than its allocation (a PBC that matches the blocks allocated, data that fills
// fewer) leaves whole blocks unwritten: pio_copy and seg_pio_copy_end pad only the block they
// end in. The chip sends the blocks the PBC counts, so the model must not hand the sink the
// unwritten ones, which still hold an earlier packet's bytes: it halts (CausePBCLength, "the
// PBC's length does not match the blocks written"). It used to deliver them.
func TestShortCopyHalts(t *testing.T) {
	for _, seg := range []bool{false, true} {
		sink := &captureSink{}
		sc := newManual(t, 3, sink)
		old := make([]byte, 46*4)
		for i := range old {
			old[i] = 0xaa
		}
		b, err := sc.BufferAlloc(48, nil) // 3 blocks
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Copy(CreatePBC(0, 0, 0, 48), old); err != nil {
			t.Fatal(err)
		}
		sc.Process()
		sc.ReturnCredits()
		sc.Process()
		if n := len(sink.take()); n != 1 {
			t.Fatalf("first packet: %d delivered", n)
		}
		var rel []ReleaseCode
		b, err = sc.BufferAlloc(40, ReleaseFunc(func(c ReleaseCode) { rel = append(rel, c) })) // 3 blocks again, over the first
		if err != nil {
			t.Fatal(err)
		}
		if seg {
			err = b.CopySegs(CreatePBC(0, 0, 0, 40), [][]byte{make([]byte, 5), make([]byte, 3)})
		} else {
			err = b.Copy(CreatePBC(0, 0, 0, 40), make([]byte, 8))
		}
		if err != nil {
			t.Fatal(err)
		}
		sc.Process()
		for _, p := range sink.take() {
			t.Errorf("seg=%v: delivered %d bytes with unwritten blocks (bytes 64..72 %x)", seg, len(p), p[64:72])
		}
		h := sc.LastHalt()
		if h == nil || h.Cause != CausePBCLength || h.Packet != 1 {
			t.Fatalf("seg=%v: LastHalt %v, want pbc-length at packet 2", seg, h)
		}
		if len(rel) != 1 || rel[0] != PRCSCDisable {
			t.Fatalf("seg=%v: release codes %v, want one sc-disable", seg, rel)
		}
		if !sc.Enabled() {
			t.Fatalf("seg=%v: not restarted", seg)
		}
	}
}

// lockProbe is a Waiter whose wake-up records whether any of the context's locks was held when
// it ran: the Waiter doc promises wake-ups run "without locks held", so one may call back into
// the context (retry BufferAlloc, say) without deadlocking.
func lockProbe(sc *SendContext, held *[]string) *Waiter {
	w := &Waiter{}
	w.Init(func(*Waiter) {
		for _, m := range []struct {
			name string
			mu   interface {
				TryLock() bool
				Unlock()
			}
		}{{"alloc", &sc.allocMu}, {"hw", &sc.hwMu}, {"release", &sc.releaseMu}, {"wait", &sc.waitMu}} {
			if m.mu.TryLock() {
				m.mu.Unlock()
			} else {
				*held = append(*held, m.name)
			}
		}
	})
	return w
}

// The kernel's sc_buffer_alloc runs sc_release_update, and with it sc_piobufavail's wake-ups,
// under alloc_lock, and sc_disable flushes piowait under it too; the Waiter doc promises wake-ups
// without locks held. It used to wake with the allocation lock held (a wake-up that retried
// BufferAlloc on the context deadlocked). BufferAlloc's pass now leaves its wake-ups to the
// chip's next pass (hfi1_qp_wakeup only schedules work; see TestWakeupInBufferAllocHoldsNoBuffer):
// the wake-up of a waiter whose credits that pass returned runs in the next Process, with no
// lock held, and the pass asks for the credit return that runs it.
func TestWakeupsWithoutLocksHeld(t *testing.T) {
	t.Run("BufferAlloc's pass, woken by the next", func(t *testing.T) {
		sc := newManual(t, 2, nil)
		var held []string
		w := lockProbe(sc, &held)
		b, err := sc.BufferAlloc(32, nil) // both blocks
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Copy(CreatePBC(0, 0, 0, 32), make([]byte, 120)); err != nil {
			t.Fatal(err)
		}
		seq := sc.ReleaseSeq()
		if _, err := sc.BufferAlloc(2, nil); err != ErrNoCredits {
			t.Fatalf("want ErrNoCredits, got %v", err)
		}
		if !sc.QueueWait(w, seq) {
			t.Fatal("not queued")
		}
		sc.hwMu.Lock()
		sc.consume() // the chip sends it and writes the free counter back; no pass yet
		sc.hwMu.Unlock()
		b, err = sc.BufferAlloc(2, nil) // its own pass returns the credits, leaves w queued
		if err != nil {
			t.Fatal(err)
		}
		if sc.Waiting() != 1 || sc.Stats().Wakeups != 0 || !sc.force.Load() {
			t.Fatalf("after BufferAlloc's pass: waiting %d wakeups %d, credit return asked %v; want 1, 0, true",
				sc.Waiting(), sc.Stats().Wakeups, sc.force.Load())
		}
		if err := b.Copy(CreatePBC(0, 0, 0, 2), nil); err != nil {
			t.Fatal(err)
		}
		sc.Process() // the chip's pass (the forced return) wakes w
		if sc.Waiting() != 0 || sc.Stats().Wakeups != 1 {
			t.Fatalf("after Process: waiting %d wakeups %d", sc.Waiting(), sc.Stats().Wakeups)
		}
		if len(held) != 0 {
			t.Fatalf("wake-up ran with locks held: %v", held)
		}
	})
	t.Run("Disable", func(t *testing.T) {
		sc := newManual(t, 1, nil)
		var held []string
		w := lockProbe(sc, &held)
		b, err := sc.BufferAlloc(16, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Copy(CreatePBC(0, 0, 0, 16), make([]byte, 56)); err != nil {
			t.Fatal(err)
		}
		if !sc.QueueWait(w, sc.ReleaseSeq()) {
			t.Fatal("not queued")
		}
		sc.Disable()
		if sc.Waiting() != 0 || sc.Stats().Wakeups != 1 {
			t.Fatalf("waiting %d wakeups %d", sc.Waiting(), sc.Stats().Wakeups)
		}
		if len(held) != 0 {
			t.Fatalf("wake-up ran with locks held: %v", held)
		}
	})
}

// ReturnCredits only asks (sc_return_credits writes SendCtxtCreditForce and returns): the chip
// writes the free counter back and the pass runs later, on the chip goroutine, or with a manual
// chip at the next Process, as its doc says.
func TestReturnCreditsManualWaitsForProcess(t *testing.T) {
	sc, err := New(Config{Type: Kernel, Credits: 8, Threshold: 8, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var codes []ReleaseCode
	b, err := sc.BufferAlloc(16, ReleaseFunc(func(c ReleaseCode) { codes = append(codes, c) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Copy(CreatePBC(0, 0, 0, 16), make([]byte, 56)); err != nil {
		t.Fatal(err)
	}
	sc.Process() // sent, below the threshold: no write-back
	sc.ReturnCredits()
	if len(codes) != 0 || sc.Avail() != 7 {
		t.Fatalf("ReturnCredits alone: releases %v, avail %d", codes, sc.Avail())
	}
	sc.Process()
	if len(codes) != 1 || codes[0] != PRCSCDisable || sc.Avail() != 8 {
		t.Fatalf("after Process: releases %v, avail %d", codes, sc.Avail())
	}
}

// Pool 0 with fewer blocks than contexts: the kernel's init_sc_pools_and_sizes refuses only a
// pool of no blocks ("has %u contexts, but no blocks") and would hand out contexts of 0 credits
// here; ContextSizes refuses this too (a context of 0 credits sends nothing), and its error must
// say how many blocks there are, not that there are none.
func TestContextSizesPoolTooSmallSaysBlocks(t *testing.T) {
	// SDMA on: kernel 16×18 + VL15 102 + ACK 32 = 422 fixed blocks; 425 in all leaves 3 for
	// 10 user contexts.
	_, err := ContextSizes(SizeConfig{MemSize: 426 * BlockSize, SDMA: true, RcvContexts: 11})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("want ErrInvalid, got %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "3 blocks") || strings.Contains(msg, "no blocks") {
		t.Fatalf("error %q does not say the pool's 3 blocks", msg)
	}
}

// HaltError.Packet numbers the halted packet as FaultPlan does, over the context's life: with
// HaltEvery 3 the halts are at packets 3, 6 and 9. It used to count from the last restart, so
// every halt after the first said "at packet 3" too.
func TestHaltPacketOverLife(t *testing.T) {
	sc, err := New(Config{Type: Kernel, Credits: 8, Threshold: 1, Manual: true, Faults: FaultPlan{HaltEvery: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if at := haltsOver(t, sc, 9); len(at) != 3 || at[0] != 3 || at[1] != 6 || at[2] != 9 {
		t.Fatalf("halted packets %v, want [3 6 9]", at)
	}
	if err := sc.InjectHalt(); err != nil {
		t.Fatal(err)
	}
	if h := sc.LastHalt(); h.Packet != 9 {
		t.Fatalf("InjectHalt after 9 packets: Packet %d, want 9", h.Packet)
	}
}

// haltedPackets sends n packets one at a time through a manual context of index idx with plan
// and returns the packets (1-based, over the life) that halted it.
func haltedPackets(t *testing.T, idx, n int, plan FaultPlan) []uint64 {
	t.Helper()
	sc, err := New(Config{Type: Kernel, Index: idx, Credits: 8, Threshold: 1, Manual: true, Faults: plan})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	return haltsOver(t, sc, n)
}

// haltsOver sends n packets of 4 dwords one at a time through the manual context sc, each
// followed by a Process, and returns the packets (1-based, over the context's life, as
// LastHalt().Packet+1 says) whose Process halted it.
func haltsOver(t *testing.T, sc *SendContext, n int) []uint64 {
	t.Helper()
	var at []uint64
	for range n {
		b, err := sc.BufferAlloc(4, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
		before := sc.Stats().Halts
		sc.Process()
		if sc.Stats().Halts != before {
			at = append(at, sc.LastHalt().Packet+1)
		}
	}
	return at
}

// FaultPlan.HaltRate halts each packet with that probability, drawn from Seed and the
// context's index: the same plan halts at the same packets, another seed or context elsewhere;
// 1 halts every packet; a rate outside 0..1 is ErrInvalid. The plan had HaltAt and HaltEvery
// only, so a caller wanting a rate (sdmaperf -path pio -faults halt=0.3) halted every
// 1/rate-th packet, truncated (every 3rd: 0.33).
func TestHaltRate(t *testing.T) {
	plan := FaultPlan{HaltRate: 0.3, Seed: 7}
	a := haltedPackets(t, 0, 1000, plan)
	if len(a) < 240 || len(a) > 360 {
		t.Fatalf("HaltRate 0.3: %d halts in 1000 packets", len(a))
	}
	every := true
	for i := range a {
		every = every && a[i]%3 == 0
	}
	if every {
		t.Fatalf("HaltRate 0.3 halted every 3rd packet: %v", a)
	}
	if b := haltedPackets(t, 0, 1000, plan); !slices.Equal(a, b) {
		t.Fatal("the same plan halted at other packets")
	}
	if b := haltedPackets(t, 1, 1000, plan); slices.Equal(a, b) {
		t.Fatal("context 1 halted at context 0's packets")
	}
	if b := haltedPackets(t, 0, 1000, FaultPlan{HaltRate: 0.3, Seed: 8}); slices.Equal(a, b) {
		t.Fatal("seed 8 halted at seed 7's packets")
	}
	if n := len(haltedPackets(t, 0, 50, FaultPlan{HaltRate: 1})); n != 50 {
		t.Fatalf("HaltRate 1: %d halts in 50 packets", n)
	}
	for _, r := range []float64{-0.1, 1.5, math.NaN()} {
		if _, err := New(Config{Manual: true, Faults: FaultPlan{HaltRate: r}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("New with HaltRate %v: %v, want ErrInvalid", r, err)
		}
	}
	sc, err := New(Config{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if err := sc.SetFaults(FaultPlan{HaltRate: 2}); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetFaults with HaltRate 2: %v, want ErrInvalid", err)
	}
}

// Restart of a closed context is refused (sc_restart bounces off SCF_IN_FREE with -EINVAL:
// ErrInvalid) with an error that says it is closed. It used to say "is not halted" also of a
// context that Halted reported halted (a packet that halted the chip in Close's drain).
func TestRestartClosedSaysClosed(t *testing.T) {
	sc, err := New(Config{Type: Kernel, Credits: 8, Threshold: 1, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := sc.BufferAlloc(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Copy(CreatePBC(0, 0, 0, 40), make([]byte, 8)); err != nil { // a bad length: halts in Close's drain
		t.Fatal(err)
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	if !sc.Halted() {
		t.Fatal("the bad packet did not halt the context in Close's drain")
	}
	err = sc.Restart()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "closed") || strings.Contains(err.Error(), "not halted") {
		t.Fatalf("Restart after Close: %v, want ErrInvalid saying it is closed", err)
	}
}

// A Waiter's wake-up may call into the context (Waiter: "so it may retry BufferAlloc"), and one
// on a caller's goroutine may Close it; on the chip goroutine, Close would wait for that
// goroutine's end, which is waiting in Close: it is refused there (ErrInvalid, nothing changed),
// as sdma refuses a Close on an engine's own goroutine. It used to hang the chip goroutine and
// every later Close.
func TestCloseFromWakeupOnChipRefused(t *testing.T) {
	sc, err := New(Config{Type: Kernel, Credits: 8})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	var w Waiter
	w.Init(func(*Waiter) { closed <- sc.Close() })
	if !sc.QueueWait(&w, sc.ReleaseSeq()) { // the first waiter forces a credit return: the chip goroutine's pass wakes it
		t.Fatal("not queued")
	}
	var got error
	bounded(t, "Close from a wake-up on the chip goroutine", func() { got = <-closed })
	if !errors.Is(got, ErrInvalid) || !strings.Contains(got.Error(), "chip goroutine") {
		t.Fatalf("Close from a wake-up on the chip goroutine: %v, want ErrInvalid naming the chip goroutine", got)
	}
	if !sc.Enabled() {
		t.Fatal("the refused Close changed the context")
	}
	if err := sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 8)}, nil); err != nil {
		t.Fatalf("send after the refused Close: %v", err)
	}
	bounded(t, "Close", func() { err = sc.Close() })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.BufferAlloc(4, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("BufferAlloc after Close: %v", err)
	}
}

// The same refusal for a Sink and a Releaser on the chip goroutine (their docs forbid calls into
// the context; a Close there deadlocked on the chip's locks): ErrInvalid, the packet still sent
// and released once.
func TestCloseFromChipCallbacksRefused(t *testing.T) {
	for _, where := range []string{"sink", "releaser"} {
		t.Run(where, func(t *testing.T) {
			got := make(chan error, 1)
			var sc *SendContext
			var sink Sink
			var rel Releaser = ReleaseFunc(func(ReleaseCode) {})
			if where == "sink" {
				sink = sinkFn(func() { got <- sc.Close() })
			} else {
				rel = ReleaseFunc(func(ReleaseCode) { got <- sc.Close() })
			}
			var err error
			sc, err = New(Config{Type: Kernel, Credits: 8, Threshold: 1, Sink: sink})
			if err != nil {
				t.Fatal(err)
			}
			if err := sc.SendWait(context.Background(), 0, 0, [][]byte{make([]byte, 8)}, rel); err != nil {
				t.Fatal(err)
			}
			var cerr error
			bounded(t, "Close from a "+where+" on the chip goroutine", func() { cerr = <-got })
			if !errors.Is(cerr, ErrInvalid) {
				t.Fatalf("Close from a %s on the chip goroutine: %v, want ErrInvalid", where, cerr)
			}
			bounded(t, "Close", func() { err = sc.Close() })
			if err != nil || sc.Stats().Packets != 1 {
				t.Fatalf("Close %v, packets %d", err, sc.Stats().Packets)
			}
		})
	}
}

// sinkFn is a Sink that calls f for each packet.
type sinkFn func()

func (f sinkFn) Deliver(int, [][]byte) error { f(); return nil }

// A census of the context's state machine against the kernel's accounting, on one goroutine:
// random allocations (sizes across the buffer, PBC credit-return requests, whole and segmented
// copies), Process, forced returns, release passes, planned and injected halts, threshold
// changes, Stop, Disable, Enable and Restart, in any order. Whatever the order, every allocated
// packet's Releaser runs exactly once by Close (sc_release_update, or sc_disable's flush with
// PRC_SC_DISABLE), a release with another code is of a packet the sink received, packets reach
// the sink at most once and in allocation order, and Avail stays within 0..credits.
func TestRandomOpsReleaseOnce(t *testing.T) {
	seeds := uint64(300)
	if testing.Short() {
		seeds = 60
	}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 7))
		credits := 1 + rng.IntN(20)
		rels := map[uint64]int{}
		delivered := map[uint64]bool{}
		last := int64(-1)
		sink := segsSink(func(segs [][]byte) {
			var p []byte
			for _, s := range segs {
				p = append(p, s...)
			}
			id := int64(binary.LittleEndian.Uint64(p))
			if id <= last {
				t.Fatalf("seed %d: packet %d delivered after %d", seed, id, last)
			}
			last = id
			delivered[uint64(id)] = true
		})
		sc, err := New(Config{Type: Kernel, Credits: credits, Threshold: 1 + rng.IntN(credits), Sink: sink, Manual: true,
			Faults: FaultPlan{HaltRate: 0.05 * rng.Float64(), Seed: seed}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint64
		for range 400 {
			switch rng.IntN(12) {
			case 0, 1, 2, 3:
				n := 8 + rng.IntN(credits*BlockSize)
				dw := 2 + (n+3)/4
				id := uint64(len(ids))
				b, err := sc.BufferAlloc(dw, ReleaseFunc(func(c ReleaseCode) {
					rels[id]++
					if c&PRCSCDisable == 0 && !delivered[id] {
						t.Fatalf("seed %d: packet %d released %v, never delivered", seed, id, c)
					}
				}))
				if err != nil {
					if !errors.Is(err, ErrNoCredits) && !errors.Is(err, ErrNotRunning) && !errors.Is(err, ErrMsgSize) {
						t.Fatalf("seed %d: BufferAlloc: %v", seed, err)
					}
					continue
				}
				ids = append(ids, id)
				data := make([]byte, n)
				binary.LittleEndian.PutUint64(data, id)
				var flags PBC
				if rng.IntN(4) == 0 {
					flags = PBCCreditReturn
				}
				pbc := CreatePBC(flags, 0, 0, uint32(dw))
				if rng.IntN(2) == 0 {
					err = b.CopySegs(pbc, [][]byte{data[:n/3], data[n/3:]})
				} else {
					err = b.Copy(pbc, data[:n&^3])
				}
				if err != nil {
					t.Fatalf("seed %d: copy: %v", seed, err)
				}
			case 4, 5:
				sc.Process()
			case 6:
				sc.ReturnCredits()
			case 7:
				sc.ReleaseUpdate()
			case 8:
				_ = sc.InjectHalt()
			case 9:
				_ = sc.SetThreshold(1 + rng.IntN(credits))
			case 10:
				switch rng.IntN(4) {
				case 0:
					sc.Stop()
				case 1:
					sc.Disable()
				case 2:
					_ = sc.Enable()
				default:
					_ = sc.Restart()
				}
			default:
				if a := sc.Avail(); a < 0 || a > credits {
					t.Fatalf("seed %d: Avail %d of %d credits", seed, a, credits)
				}
			}
		}
		if err := sc.Close(); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if rels[id] != 1 {
				t.Fatalf("seed %d: packet %d released %d times", seed, id, rels[id])
			}
		}
	}
}

// segsSink is a Sink that hands each packet's segments to f.
type segsSink func(segs [][]byte)

func (f segsSink) Deliver(_ int, segs [][]byte) error { f(segs); return nil }

// A Waiter's wake-up runs "without locks held, so it may retry BufferAlloc" (Waiter), but the
// one that BufferAlloc's own release pass woke ran after BufferAlloc counted its new buffer in
// flight: on a goroutine that held an unfinished buffer of the context, which nobody could see.
// A wake-up that then called Disable, Restart, InjectHalt or Close (each waits for every copy to
// end), or BufferAllocWait on a manual chip that met a halt, waited for that buffer for ever.
// The kernel's sc_piobufavail only schedules the woken QP's work (hfi1_qp_wakeup,
// hfi1_schedule_send: a workqueue), so the allocating thread never runs it. BufferAlloc now
// leaves its pass's wake-ups to the chip's next pass, asking for a credit return: with a manual
// chip, the Process after the copy; the wake-up sees no buffer in flight and its Disable returns.
func TestWakeupInBufferAllocHoldsNoBuffer(t *testing.T) {
	// Not newManual: its Cleanup's Close would wait for the stuck buffer too.
	sc, err := New(Config{Type: Kernel, Credits: 2, Threshold: 1, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := sc.BufferAlloc(32, nil) // both blocks
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Copy(CreatePBC(0, 0, 0, 32), make([]byte, 120)); err != nil {
		t.Fatal(err)
	}
	seq := sc.ReleaseSeq()
	if _, err := sc.BufferAlloc(2, nil); err != ErrNoCredits {
		t.Fatalf("want ErrNoCredits, got %v", err)
	}
	held := -1
	var w Waiter
	w.Init(func(*Waiter) {
		held = sc.InFlight()
		sc.Disable() // waits for every copy to end
	})
	if !sc.QueueWait(&w, seq) {
		t.Fatal("not queued")
	}
	sc.hwMu.Lock()
	sc.consume() // the chip sends it and writes the free counter back; no pass yet
	sc.hwMu.Unlock()
	var b2 *Buf
	bounded(t, "BufferAlloc whose pass returns the credits a waiter that disables the context waits for", func() {
		b2, err = sc.BufferAlloc(2, nil) // its pass returns the credits and leaves w queued
	})
	if err != nil {
		t.Fatalf("BufferAlloc: %v", err)
	}
	if err := b2.Copy(CreatePBC(0, 0, 0, 2), nil); err != nil {
		t.Fatal(err)
	}
	if st := sc.Stats(); st.Wakeups != 0 || held != -1 {
		t.Fatalf("BufferAlloc ran the wake-up (wake-ups %d, saw %d in flight)", st.Wakeups, held)
	}
	bounded(t, "Process whose pass wakes a waiter that disables the context", func() {
		sc.Process() // the wake-up left to the next pass runs here
	})
	if st := sc.Stats(); st.Wakeups != 1 || held != 0 {
		t.Fatalf("wake-ups %d; the wake-up saw %d buffers in flight, want 0", st.Wakeups, held)
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
}

// Producers sending with BufferAllocWait and producers parked on their own Waiters share a small
// context, on the chip goroutine and on a manual chip driven by a goroutine of its own (and by
// BufferAllocWait's Process). Every 16th wake-up halts the context (InjectHalt), which waits for
// every copy to end: a wake-up run on a goroutine that holds an unfinished buffer (what
// BufferAlloc's own pass used to do) never returns, and the bound on the context turns that into a
// failure; every wake-up also checks that it does not run inside BufferAlloc. Every packet is released exactly once or refused (ErrNotRunning, while a halt
// recovers), none is delivered twice, no waiter is left queued, every credit comes back; on the
// chip goroutine every wake-up runs there (none inside a producer's BufferAlloc).
func TestStressWakeupsLeftToChip(t *testing.T) {
	for _, manual := range []bool{false, true} {
		t.Run(map[bool]string{false: "chip", true: "manual"}[manual], func(t *testing.T) {
			stressWakeupsLeftToChip(t, manual)
		})
	}
}

func stressWakeupsLeftToChip(t *testing.T, manual bool) {
	const credits, senders, waiters = 12, 3, 3
	per := 1500
	if testing.Short() {
		per = 250
	}
	sink := &captureSink{}
	sc, err := New(Config{Credits: credits, Threshold: 6, Sink: sink, Manual: manual})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // far above any wake-up
	defer cancel()
	c := newCounter()
	var refused, offChip, inAlloc, woken atomic.Int64
	refuse := func(id uint64) {
		refused.Add(1)
		c.mu.Lock()
		c.seen[id]++ // not accepted: counts as its one outcome
		c.mu.Unlock()
	}
	dw := func(id uint64) int { return 4 + int(id%5)*16 + int(id%7) } // 1 to 5 blocks, the id in the data
	send := func(b *Buf, id uint64) error {
		n := (dw(id) - 2) * 4
		return b.Copy(CreatePBC(0, 0, 0, uint32(dw(id))), pkt(id, n))
	}
	var wg sync.WaitGroup
	for p := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				id := uint64(p*per + i)
				b, err := sc.BufferAllocWait(ctx, dw(id), &relOf{c, id})
				if errors.Is(err, ErrNotRunning) {
					refuse(id)
					continue
				}
				if err == nil {
					err = send(b, id)
				}
				if err != nil {
					t.Errorf("sender %d packet %d: %v", p, i, err)
					return
				}
			}
		}()
	}
	for q := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := make(chan struct{}, 1)
			var w Waiter
			w.Init(func(*Waiter) {
				if !manual && !sc.onChip() {
					offChip.Add(1)
				}
				if inBufferAlloc() {
					inAlloc.Add(1)
				}
				if woken.Add(1)%16 == 0 {
					_ = sc.InjectHalt() // waits for every copy: hangs on a goroutine holding one
				}
				select {
				case ch <- struct{}{}:
				default:
				}
			})
			for i := range per {
				id := uint64((senders+q)*per + i)
				for {
					seq := sc.ReleaseSeq()
					b, err := sc.BufferAlloc(dw(id), &relOf{c, id})
					if err == nil {
						if err := send(b, id); err != nil {
							t.Errorf("waiter %d packet %d: %v", q, i, err)
							return
						}
						break
					}
					if errors.Is(err, ErrNotRunning) {
						refuse(id)
						break
					}
					if err != ErrNoCredits {
						t.Errorf("waiter %d packet %d: %v", q, i, err)
						return
					}
					if !sc.QueueWait(&w, seq) {
						continue
					}
					select {
					case <-ch:
					case <-ctx.Done():
						sc.CancelWait(&w)
						t.Errorf("waiter %d packet %d never woken (waiting %d, stats %+v)", q, i, sc.Waiting(), sc.Stats())
						return
					}
				}
			}
		}()
	}
	stop := make(chan struct{})
	driven := make(chan struct{})
	go func() { // the manual chip's driver
		defer close(driven)
		for manual {
			select {
			case <-stop:
				return
			default:
			}
			sc.Process()
			runtime.Gosched()
		}
	}()
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
	case <-ctx.Done():
		buf := make([]byte, 1<<20)
		t.Fatalf("producers stuck (waiting %d, in flight %d, stats %+v):\n%s", sc.Waiting(), sc.InFlight(), sc.Stats(), buf[:runtime.Stack(buf, true)])
	}
	close(stop)
	<-driven
	// Every credit comes back once the chip has sent everything: none lost, none doubled.
	for sc.Avail() != credits && ctx.Err() == nil {
		sc.ReturnCredits()
		if manual {
			sc.Process()
		}
		runtime.Gosched()
	}
	if a := sc.Avail(); a != credits {
		t.Errorf("avail %d after the chip sent everything, want all %d", a, credits)
	}
	if n := sc.Waiting(); n != 0 {
		t.Errorf("%d waiters left queued", n)
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	total := uint64((senders + waiters) * per)
	c.check(t, total)
	st := sc.Stats()
	if st.Releases+st.Flushed+uint64(refused.Load()) != total {
		t.Errorf("releases %d + flushed %d + refused %d != %d", st.Releases, st.Flushed, refused.Load(), total)
	}
	if st.Waits == 0 || woken.Load() == 0 {
		t.Errorf("no waiter parked or woken (stats %+v): the test tested nothing", st)
	}
	if n := offChip.Load(); n != 0 {
		t.Errorf("%d wake-ups ran off the chip goroutine", n)
	}
	if n := inAlloc.Load(); n != 0 {
		t.Errorf("%d wake-ups ran inside BufferAlloc", n)
	}
	seen := map[uint64]bool{}
	for _, p := range sink.take() {
		id := binary.LittleEndian.Uint64(p)
		if seen[id] {
			t.Fatalf("packet %d delivered twice", id)
		}
		seen[id] = true
	}
	t.Logf("stats %+v, refused %d, wake-ups %d", st, refused.Load(), woken.Load())
}

// inBufferAlloc reports whether the caller runs inside (*SendContext).BufferAlloc.
func inBufferAlloc() bool {
	var pcs [64]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, ".(*SendContext).BufferAlloc") {
			return true
		}
		if !more {
			return false
		}
	}
}
