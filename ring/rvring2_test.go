package ring

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// errSink collects the first few failures of a test's goroutines (t.Fatal is for the test's own).
type errSink chan string

func (e errSink) report(format string, args ...any) {
	select {
	case e <- fmt.Sprintf(format, args...):
	default:
	}
}

// check fails t with what was reported, if anything.
func (e errSink) check(t *testing.T) {
	t.Helper()
	for {
		select {
		case s := <-e:
			t.Error(s)
		default:
			return
		}
	}
}

// sendVia sends ds (no AHG descriptors) by the producer API api: 0 Enqueue, 1 Reserve+Write+
// Publish, 2 ReserveWrite+PublishRelease, 3 ReserveIn (the current epoch)+Write+PublishRelease,
// 4 EnqueueSP (single producer only). The error is the reservation's.
func sendVia(r *Ring, api int, ds []desc.Desc) error {
	if api == 0 || api == 4 {
		send := r.Enqueue
		if api == 4 {
			send = r.EnqueueSP
		}
		_, err := send(ds, 0)
		return err
	}
	var v Reservation
	var err error
	switch api {
	case 1:
		v, err = r.Reserve(len(ds))
	case 2:
		v, err = r.ReserveWrite(ds, 0)
	default:
		v, err = r.ReserveIn(len(ds), r.Epoch())
	}
	if err != nil {
		return err
	}
	if api == 1 {
		v.Write(0, ds, 0)
		v.Publish()
		return nil
	}
	if api == 3 {
		v.Write(0, ds, 0)
	}
	v.PublishRelease()
	return nil
}

// TestStressRVRing2CountsAndSeq is DPDK's test_ring_stress with the counters watched: producers
// of the multi-producer APIs (sendVia's Enqueue, Reserve+Write+Publish, ReserveWrite+PublishRelease) with
// random bulks, a consumer that alternates Dequeue bursts with the split hardware model and
// completion pass (SetHWHead, then BeginWrite/SetSwHead/EndWrite, the heads apart), and every few
// rounds a sw clean (Close, drain, Reset to a random start, Open). Two observers read the
// accessors the whole time: FreeCnt in [0, Size()-1], Used in [0, Size()-1], InProcess in [1,
// Size()]; swHead <= hwHead <= tail <= reserved loaded in that order, each no further apart than
// the ring allows, and none going backwards between two observations (outside a sw clean, which
// a test-side counter brackets); a head seqcount snapshot (HeadSeq, or Seq().BeginWait) that
// HeadRetry does not report stale must have seen no swHead change. The consumer checks every
// descriptor exactly once, in its producer's order, with its index's generation. Run under -race
// and at -cpu 1,2,4, and without -race for the assembly Dequeue.
func TestStressRVRing2CountsAndSeq(t *testing.T) {
	const producers = 3
	perProducer := 2000
	if testing.Short() {
		perProducer = 500
	}
	forEachImpl(t, func(t *testing.T) {
		r, err := newAt(64, ^uint64(0)-200)
		if err != nil {
			t.Fatal(err)
		}
		mask := r.Mask()
		errs := make(errSink, 8)
		var clean atomic.Uint64 // odd while the consumer runs a sw clean (Close to Open)
		var stop atomic.Bool
		var wg, obs sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func(pid uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(pid, 21))
				ds := make([]desc.Desc, 0, 24)
				for seq := 0; seq < perProducer; {
					n := min(1+rng.IntN(24), perProducer-seq)
					ds = ds[:0]
					for k := range n {
						ds = append(ds, stressDesc(pid, uint64(seq+k), k, 0))
					}
					for !stop.Load() {
						err := sendVia(r, int(pid), ds)
						if err == nil {
							break
						}
						if err != ErrFull && err != ErrClosed {
							errs.report("producer %d: %v", pid, err)
							stop.Store(true)
							return
						}
						runtime.Gosched()
					}
					seq += n
				}
			}(uint64(p))
		}
		for o := range 2 {
			obs.Add(1)
			go func() {
				defer obs.Done()
				var last [4]uint64
				lastClean := ^uint64(0)
				for i := 0; !stop.Load(); i++ {
					if f, u, ip := r.FreeCnt(), r.Used(), r.InProcess(); f < 0 || uint64(f) > mask || u < 0 || uint64(u) > mask || ip < 1 || ip > r.Size() {
						errs.report("observer %d: FreeCnt %d, Used %d, InProcess %d", o, f, u, ip)
						stop.Store(true)
						return
					}
					c := clean.Load()
					var s uint32
					if o == 0 {
						s = r.HeadSeq()
					} else {
						s = r.Seq().BeginWait()
					}
					cur := [4]uint64{r.SwHead(), r.HWHead(), r.Tail(), r.Reserved()}
					sw2 := r.SwHead()
					if !r.HeadRetry(s) && sw2 != cur[0] {
						errs.report("observer %d: swHead %#x then %#x, and HeadRetry(%d) says no pass began", o, cur[0], sw2, s)
						stop.Store(true)
						return
					}
					if c%2 == 1 || clean.Load() != c {
						continue // a sw clean moves every index
					}
					for k := 1; k < 4; k++ {
						if d := cur[k] - cur[k-1]; d > mask+(1<<20) { // loaded in order: each at or past the previous (well within 2^20 of it)
							errs.report("observer %d: indices sw, hw, tail, reserved %#x out of order", o, cur)
							stop.Store(true)
							return
						}
					}
					if c == lastClean {
						for k := range cur {
							if cur[k]-last[k] >= 1<<62 {
								errs.report("observer %d: index %d went back from %#x to %#x", o, k, last[k], cur[k])
								stop.Store(true)
								return
							}
						}
					}
					last, lastClean = cur, c
					if i%16 == 0 {
						runtime.Gosched()
					}
				}
			}()
		}

		rng := rand.New(rand.NewPCG(5, 5))
		next := make([]uint64, producers)
		seen, total := 0, producers*perProducer
		dst := make([]desc.Desc, 70)
		checkAt := func(idx uint64, d desc.Desc) {
			pid, seq := d.Qw0>>48, d.Qw0&(1<<48-1)
			if pid >= producers || next[pid] != seq || check32(d.Qw0) != uint32(d.Qw1>>32) || d.Generation() != r.Generation(idx) {
				t.Fatalf("index %#x: %#x (producer %d, want seq %d)", idx, d, pid, next[min(pid, producers-1)])
			}
			next[pid]++
			seen++
		}
		consume := func() {
			if rng.IntN(2) == 0 {
				h := r.HWHead()
				got := r.Dequeue(dst[:rng.IntN(len(dst)+1)])
				for i, d := range dst[:got] {
					checkAt(h+uint64(i), d)
				}
				return
			}
			// The split way: the hardware model a random part of the way, the completion
			// pass a random part of what the model finished (the heads apart).
			sw, h, tl := r.SwHead(), r.HWHead(), r.Tail()
			to := h + uint64(rng.IntN(int(tl-h)+1))
			for i := h; i != to; i++ {
				checkAt(i, r.Slot(i))
			}
			r.SetHWHead(to)
			r.BeginWrite()
			r.SetSwHead(sw + uint64(rng.IntN(int(to-sw)+1)))
			r.EndWrite()
		}
		for round := 1; seen < total; round++ {
			if stop.Load() {
				break
			}
			consume()
			if round%13 != 0 {
				runtime.Gosched()
				continue
			}
			clean.Add(1)
			r.Close()
			for r.Tail() != r.Reserved() || r.SwHead() != r.Tail() {
				consume()
				runtime.Gosched()
			}
			starts := []uint64{0, 64*4 - 5, 1<<32 - 7, ^uint64(0) - 10, rng.Uint64()}
			r.Reset(starts[rng.IntN(len(starts))])
			r.Open()
			clean.Add(1)
		}
		stop.Store(true)
		wg.Wait()
		obs.Wait()
		errs.check(t)
		for p := range producers {
			if next[p] != uint64(perProducer) && !t.Failed() {
				t.Errorf("producer %d: %d of %d", p, next[p], perProducer)
			}
		}
	})
}

// TestStressRVRing2FreeSpace is DPDK's free_space and available out-parameters under a race: one
// producer cycling through every producer API (sendVia's five) against a consumer draining with Dequeue bursts. The consumer
// only frees, so room only grows under the producer: a batch of at most FreeCnt(), read just
// before, must be accepted (no ErrFull), and a refused batch (one larger than FreeCnt) must change
// nothing (Reserved, Tail). The consumer only sees the tail grow: a Dequeue of k must return at
// least min(k, Tail()-HWHead()) read just before, and at most k. Every descriptor exactly once, in
// order. Run under -race and at -cpu 1,2,4, and without -race for the assembly EnqueueSP and
// Dequeue.
func TestStressRVRing2FreeSpace(t *testing.T) {
	total := 400000
	if testing.Short() {
		total = 100000
	}
	forEachImpl(t, func(t *testing.T) {
		r, err := newAt(128, 1<<32-300)
		if err != nil {
			t.Fatal(err)
		}
		errs := make(errSink, 4)
		var stop atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			rng := rand.New(rand.NewPCG(3, 3))
			ds := make([]desc.Desc, 0, 127)
			for seq, call := 0, 0; seq < total && !stop.Load(); call++ {
				f := r.FreeCnt()
				n := 1 + rng.IntN(40)
				if f > 0 && rng.IntN(4) != 0 {
					n = 1 + rng.IntN(f) // fits: must be accepted
				}
				n = min(n, total-seq)
				ds = ds[:0]
				for k := range n {
					ds = append(ds, stressDesc(0, uint64(seq+k), k, 0))
				}
				res0, tail0 := r.Reserved(), r.Tail()
				err := sendVia(r, call%5, ds)
				switch {
				case err == nil:
					seq += n
				case err != ErrFull:
					errs.report("call %d (API %d): batch %d: %v", call, call%5, n, err)
					stop.Store(true)
				case n <= f:
					errs.report("call %d (API %d): batch %d refused with ErrFull after FreeCnt said %d", call, call%5, n, f)
					stop.Store(true)
				case r.Reserved() != res0 || r.Tail() != tail0:
					errs.report("call %d (API %d): the refused batch moved reserved %#x -> %#x, tail %#x -> %#x", call, call%5, res0, r.Reserved(), tail0, r.Tail())
					stop.Store(true)
				default:
					runtime.Gosched()
				}
			}
		}()
		rng := rand.New(rand.NewPCG(4, 4))
		dst := make([]desc.Desc, 130)
		want := uint64(0)
		for want < uint64(total) && !stop.Load() {
			h := r.HWHead()
			avail := r.Tail() - h
			k := rng.IntN(len(dst) + 1)
			got := r.Dequeue(dst[:k])
			if got > k || uint64(got) < min(uint64(k), avail) {
				t.Fatalf("Dequeue of %d with %d published: %d", k, avail, got)
			}
			for i, d := range dst[:got] {
				if d.Qw0 != want || check32(d.Qw0) != uint32(d.Qw1>>32) || d.Generation() != r.Generation(h+uint64(i)) {
					t.Fatalf("index %#x: %#x, want seq %d", h+uint64(i), d, want)
				}
				want++
			}
			if got == 0 {
				runtime.Gosched()
			}
		}
		stop.Store(true)
		<-done
		errs.check(t)
	})
}

// TestStressRVRing2PublishOutOfTurn: reservations published in any order (DPDK's MP enqueue,
// whose tail update waits for the earlier producers). Each round, a few goroutines reserve at
// once, then publish in a random order that the test imposes (Publish, PublishRelease, or
// TryPublishRelease in a loop, which must report false, its slots unpublished, while it is not
// its turn): the tail must reach Reserved with every batch where it was reserved. Every third
// round one reservation is abandoned for a while: the ring is closed, the tail stops at the
// abandoned reservation with everything before it published and the later publishers waiting,
// Reset panics with ErrOrder and changes nothing, Reserve is refused with ErrClosed; then the
// abandoned reservation is published, the waiting ones follow, and the ring is drained, Reset and
// opened. Run under -race and at -cpu 1,2,4.
func TestStressRVRing2PublishOutOfTurn(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 80
	}
	r, err := newAt(64, ^uint64(0)-40)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 8))
	errs := make(errSink, 4)
	dst := make([]desc.Desc, 64)
	for round := range rounds {
		k := 2 + rng.IntN(7)
		type held struct {
			v  Reservation
			ds []desc.Desc
		}
		got := make(chan held, k)
		gos := make([]chan struct{}, k)
		var wg sync.WaitGroup
		for p := range k {
			gos[p] = make(chan struct{})
			wg.Add(1)
			go func(pid uint64, mode int, n int) {
				defer wg.Done()
				v, err := r.Reserve(n)
				if err != nil {
					errs.report("round %d: producer %d: Reserve(%d): %v", round, pid, n, err)
					got <- held{} // no reservation: the test stops
					return
				}
				ds := make([]desc.Desc, n)
				for i := range ds {
					ds[i] = stressDesc(pid, uint64(round), i, 0)
				}
				got <- held{v, ds}
				<-gos[pid]
				v.Write(0, ds, 0)
				switch mode {
				case 0:
					v.Publish()
				case 1:
					v.PublishRelease()
				default:
					for i := 0; !v.TryPublishRelease(); i++ {
						if tl := r.Tail(); tl != v.Start() && tl-v.Start() < 1<<62 { // past it: published by another
							errs.report("round %d: TryPublishRelease of [%#x, +%d) false with the tail at %#x", round, v.Start(), n, tl)
							return
						}
						backoff(i)
					}
				}
			}(uint64(p), rng.IntN(3), 1+rng.IntN(63/k))
		}
		hs := make([]held, 0, k)
		for range k {
			h := <-got
			if h.ds == nil {
				for _, c := range gos {
					close(c)
				}
				wg.Wait()
				errs.check(t)
				t.FailNow()
			}
			hs = append(hs, h)
		}
		first := r.Tail()
		abandon := -1
		if round%3 == 2 {
			abandon = int(hs[rng.IntN(k)].v.Start() - first) // by its offset from the tail
		}
		order := rng.Perm(k)
		for _, p := range order {
			if pid := hs[p].ds[0].Qw0 >> 48; abandon < 0 || int(hs[p].v.Start()-first) != abandon {
				close(gos[pid])
			}
			runtime.Gosched() // let it reach its wait, if it must wait
		}
		if abandon >= 0 {
			r.Close()
			res, ep := r.Reserved(), r.Epoch()
			at := first + uint64(abandon)
			for r.Tail() != at {
				runtime.Gosched() // everything before the abandoned reservation publishes
			}
			if p := panicOf(func() { r.Reset(0) }); !isErr(p, ErrOrder) {
				t.Fatalf("round %d: Reset with [%#x, %#x) unpublished: panic %v, want ErrOrder", round, at, res, p)
			}
			if _, err := r.Reserve(1); err != ErrClosed {
				t.Fatalf("round %d: Reserve on the closed ring: %v", round, err)
			}
			if r.Tail() != at || r.Reserved() != res || r.Epoch() != ep || !r.Closed() {
				t.Fatalf("round %d: tail %#x (want %#x: later publishers wait), reserved %#x (want %#x), epoch %d (%d), closed %v",
					round, r.Tail(), at, r.Reserved(), res, r.Epoch(), ep, r.Closed())
			}
			for _, h := range hs {
				if h.v.Start() == at {
					close(gos[h.ds[0].Qw0>>48])
				}
			}
		}
		wg.Wait()
		errs.check(t)
		if t.Failed() {
			return
		}
		if r.Tail() != r.Reserved() {
			t.Fatalf("round %d: tail %#x, reserved %#x after every Publish", round, r.Tail(), r.Reserved())
		}
		h0 := r.HWHead()
		n := r.Dequeue(dst)
		for _, h := range hs {
			for i, d := range h.ds {
				idx := h.v.Start() + uint64(i)
				if off := idx - h0; off >= uint64(n) || dst[off] != d.WithGeneration(r.Generation(idx)) {
					t.Fatalf("round %d: index %#x: %#x, want %#x", round, idx, dst[min(off, 63)], d)
				}
			}
		}
		if !r.Empty() {
			t.Fatalf("round %d: not empty after the drain", round)
		}
		if abandon >= 0 {
			r.Reset(rng.Uint64() >> rng.IntN(64))
			r.Open()
		}
	}
}
