package ring

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// TestStressOrderingLitmus is the message-passing litmus test of the package doc's "Memory
// ordering" (O1, O3, O5), run on every implementation and, without -race, on the production
// path: the amd64 assembly's EnqueueSP and Dequeue, whose index stores are plain MOVs. One
// producer writes a payload word (an ordinary Go store, outside the ring) and then enqueues a
// descriptor naming it; one consumer dequeues and checks, for every descriptor, that it is the
// next in sequence, that both of its words are the producer's (a slot read before the tail's
// release would show the previous pass's value: the ring is small, so every slot is rewritten
// every 64 descriptors), and that the payload word is already written (O1 covers stores made
// before the call). A slot overwritten before the consumer's read finished (a violation of O3)
// shows as a descriptor from a later pass. Many iterations, batches of varying size, both ends
// yielding now and then so that they run interleaved on any number of CPUs.
func TestStressOrderingLitmus(t *testing.T) {
	total := uint64(4 << 20)
	if testing.Short() {
		total = 1 << 20
	}
	if raceEnabled {
		total = 1 << 15 // the Go path only (see ring_amd64_race.go): an exactly-once check there
	}
	forEachImpl(t, func(t *testing.T) {
		const size = 64
		r, err := newAt(size, ^uint64(0)-3*size) // cross the 2^64 wrap too
		if err != nil {
			t.Fatal(err)
		}
		payload := make([]uint64, 4*size) // indexed by seq mod 4*size: never rewritten while live
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // producer
			defer wg.Done()
			var batch [7]desc.Desc
			seq := uint64(1)
			for k := 0; seq <= total; k++ {
				n := int(min(uint64(1+k%len(batch)), total-seq+1))
				for j := range n {
					s := seq + uint64(j)
					payload[s%uint64(len(payload))] = s * 3
					batch[j] = desc.Desc{Qw0: s, Qw1: (^s) &^ desc.GenerationSMask}
				}
				for {
					if _, err := r.EnqueueSP(batch[:n], 0); err == nil {
						break
					}
					runtime.Gosched()
				}
				seq += uint64(n)
			}
		}()
		var dst [13]desc.Desc
		want := uint64(1)
		failed := ""
		for spins := 0; want <= total && failed == ""; {
			got := r.Dequeue(dst[:1+int(want)%len(dst)])
			if got == 0 {
				if spins++; spins&15 == 0 {
					runtime.Gosched()
				}
				continue
			}
			for _, d := range dst[:got] {
				switch {
				case d.Qw0 != want:
					failed = fmt.Sprintf("descriptor %d: qw0 %d (a stale or overwritten slot)", want, d.Qw0)
				case d.Qw1&^desc.GenerationSMask != (^want)&^desc.GenerationSMask:
					failed = fmt.Sprintf("descriptor %d: qw1 %#x torn", want, d.Qw1)
				case payload[want%uint64(len(payload))] != want*3:
					failed = fmt.Sprintf("descriptor %d: payload %d not yet visible", want, payload[want%uint64(len(payload))])
				}
				if failed != "" {
					break
				}
				want++
			}
		}
		if failed != "" {
			// Drain so the producer can finish, then report.
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			for {
				select {
				case <-done:
					t.Fatal(failed)
				default:
					if r.Dequeue(dst[:]) == 0 {
						runtime.Gosched()
					}
				}
			}
		}
		wg.Wait()
		if !r.Empty() || r.Tail() != r.SwHead() {
			t.Fatalf("ring not empty after %d descriptors", total)
		}
	})
}
