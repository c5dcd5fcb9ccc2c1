package ring

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// TestStressRV3AllProducersDequeue: one producer per producer API (Enqueue, Reserve+Write+Publish,
// ReserveWrite+PublishRelease, ReserveWrite+TryPublishRelease spinning, ReserveIn+Write in
// pieces+Publish) against a single consumer that drains with Dequeue bursts of random sizes and,
// every few rounds, does a sw clean: Close, drain until the tail reaches Reserved, Reset to a
// random start (near a generation change, 2^32 or 2^64), Open. Every descriptor must come out
// exactly once, in its producer's order, with its check word and the generation of the index it
// was written at. Run under -race and at -cpu 1,2,4.
func TestStressRV3AllProducersDequeue(t *testing.T) {
	const producers = 5
	perProducer := 4000
	if testing.Short() {
		perProducer = 1500
	}
	forEachImpl(t, func(t *testing.T) {
		r, err := newAt(64, ^uint64(0)-300)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan string, producers)
		for p := range producers {
			wg.Add(1)
			go func(pid uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(pid, 11))
				ds := make([]desc.Desc, 0, 12)
				for seq := 0; seq < perProducer; {
					n := min(1+rng.IntN(12), perProducer-seq)
					if rng.IntN(2) == 0 {
						n = min(1+rng.IntN(3), perProducer-seq) // ReserveWrite's inline path
					}
					ds = ds[:0]
					for k := range n {
						ds = append(ds, stressDesc(pid, uint64(seq+k), k, 0))
					}
					for {
						var err error
						switch pid {
						case 0:
							_, err = r.Enqueue(ds, 0)
						case 1:
							var v Reservation
							if v, err = r.Reserve(n); err == nil {
								v.Write(0, ds, 0)
								v.Publish()
							}
						case 2:
							var v Reservation
							if v, err = r.ReserveWrite(ds, 0); err == nil {
								v.PublishRelease()
							}
						case 3:
							var v Reservation
							if v, err = r.ReserveWrite(ds, 0); err == nil {
								for i := 0; !v.TryPublishRelease(); i++ {
									backoff(i)
								}
							}
						case 4:
							var v Reservation
							if v, err = r.ReserveIn(n, r.Epoch()); err == nil {
								for off := 0; off < n; {
									k := 1 + rng.IntN(n-off)
									v.Write(off, ds[off:off+k], 0)
									off += k
								}
								v.Publish()
							}
						}
						if err == nil {
							break
						}
						if err != ErrFull && err != ErrClosed && err != ErrReset {
							errs <- err.Error()
							return
						}
						runtime.Gosched()
					}
					seq += n
				}
			}(uint64(p))
		}

		rng := rand.New(rand.NewPCG(99, 1))
		next := make([]uint64, producers)
		seen, total := 0, producers*perProducer
		dst := make([]desc.Desc, 80)
		consume := func() {
			h := r.HWHead()
			k := rng.IntN(len(dst) + 1)
			got := r.Dequeue(dst[:k])
			for i, d := range dst[:got] {
				idx := h + uint64(i)
				pid, seq := d.Qw0>>48, d.Qw0&(1<<48-1)
				if pid >= producers || next[pid] != seq || check32(d.Qw0) != uint32(d.Qw1>>32) || d.Generation() != r.Generation(idx) {
					t.Fatalf("index %#x: %#x (producer %d, want seq %d)", idx, d, pid, next[min(pid, producers-1)])
				}
				next[pid]++
				seen++
			}
		}
		resets := 0
		for round := 1; seen < total; round++ {
			select {
			case e := <-errs:
				t.Fatal(e)
			default:
			}
			consume()
			if round%11 != 0 {
				runtime.Gosched()
				continue
			}
			r.Close()
			for r.Tail() != r.Reserved() {
				consume()
				runtime.Gosched()
			}
			for r.HWHead() != r.Tail() {
				consume()
			}
			if !r.Empty() {
				t.Fatal("closed and drained, not empty")
			}
			starts := []uint64{0, 64*4 - 5, 1<<32 - 7, ^uint64(0) - 10, rng.Uint64()}
			r.Reset(starts[rng.IntN(len(starts))])
			resets++
			r.Open()
		}
		wg.Wait()
		for p := range producers {
			if next[p] != uint64(perProducer) {
				t.Errorf("producer %d: %d of %d", p, next[p], perProducer)
			}
		}
		if resets == 0 {
			t.Error("no reset")
		}
	})
}
