package ring

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/desc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Stress descriptors carry everything the consumer needs to check them without a shared oracle:
//
//	qw0   63:48 producer id, 47:0 the producer's sequence number
//	qw1   63:32 check word (a hash of qw0), 31:24 skip of the batch, 23:16 k in the batch,
//	      3:2   seq & 3 as written (overwritten by the stamp unless k is an edit descriptor)
func stressDesc(pid, seq uint64, k, skip int) desc.Desc {
	qw0 := pid<<48 | seq
	return desc.Desc{
		Qw0: qw0,
		Qw1: uint64(check32(qw0))<<32 | uint64(skip)<<24 | uint64(k)<<16 | (seq&3)<<2,
	}
}

func check32(v uint64) uint32 {
	v *= 0x9e3779b97f4a7c15
	return uint32(v>>32) ^ uint32(v)
}

// hangGuard bounds a stress test's waits for progress that a correct ring makes at once (the next
// publication, the tail reaching the reservations after Close, the goroutines' return): a hang
// guard, not a timing. A ring that lost a publication, or a Close that did not refuse a
// reservation, then fails the test with what it saw instead of hanging it until the binary's
// timeout, the message never printed.
const hangGuard = time.Minute

// stressCrew is a stress test's goroutines (counted in the WaitGroup) and their quit flag.
type stressCrew struct {
	sync.WaitGroup
	quit   atomic.Bool // set when the test returns or a goroutine fails: every loop ends
	gaveUp bool        // stop gave up on them once: it does not wait again
}

// stop sets quit and waits for the goroutines, for hangGuard at most: a goroutine stuck where a
// correct ring never keeps it (a Publish whose turn never comes after a lost publication, a
// reservation loop on a ring Close broke) is reported and left, and stop reports false.
func (c *stressCrew) stop(t *testing.T) bool {
	t.Helper()
	c.quit.Store(true)
	if c.gaveUp {
		return false
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(hangGuard):
		c.gaveUp = true
		t.Errorf("goroutines still running %v after quit", hangGuard)
		return false
	}
}

// progress tells a loop that waits for descriptors whether it made any for hangGuard: stalled
// reports true once the count it is given has not moved for that long.
type progress struct {
	last int
	at   time.Time
}

func (p *progress) stalled(n int) bool {
	if p.at.IsZero() || n != p.last {
		p.last, p.at = n, time.Now()
		return false
	}
	return time.Since(p.at) > hangGuard
}

// TestStressMPSC: several producers (Enqueue, Reserve+Write+Publish and Reserve+Write+
// PublishRelease) against a hardware-model
// goroutine (Tail, Slot, SetHWHead) and a completion goroutine (BeginWrite, SetSwHead, EndWrite)
// on a small ring that wraps and fills constantly, with indices starting just below 2^64. Every
// descriptor must be seen exactly once, in each producer's order, with content and generation
// intact: a slot read before its publication would carry a previous pass's generation or
// sequence number.
func TestStressMPSC(t *testing.T) {
	producers, perProducer := 4, 20000
	if testing.Short() {
		perProducer = 3000
	}
	forEachImpl(t, func(t *testing.T) {
		r, err := newAt(64, ^uint64(0)-1000)
		require.NoError(t, err)
		total := producers * perProducer

		// crew.quit ends every goroutine here: set when the test returns (a failure of the
		// hardware model's included: producers would retry a full ring for ever) or a producer
		// fails (the hardware model would wait for ever for its descriptors).
		var crew stressCrew
		defer crew.stop(t)
		for p := range producers {
			crew.Add(1)
			go func(pid uint64) {
				defer crew.Done()
				rng := rand.New(rand.NewPCG(pid, 1))
				ds := make([]desc.Desc, 0, 8)
				for seq := 0; seq < perProducer; {
					n := min(1+rng.IntN(8), perProducer-seq)
					skip := rng.IntN(3)
					ds = ds[:0]
					for k := range n {
						ds = append(ds, stressDesc(pid, uint64(seq+k), k, min(skip, n-1)))
					}
					for {
						var err error
						if pid%2 == 0 {
							_, err = r.Enqueue(ds, skip)
						} else {
							var s Reservation
							if s, err = r.Reserve(n); err == nil {
								s.Write(0, ds, skip)
								if pid%4 == 1 {
									s.Publish()
								} else {
									s.PublishRelease()
								}
							}
						}
						if err == nil {
							break
						}
						if err != ErrFull { // a plain compare: testify's, per retry, slowed -race runs tenfold
							t.Errorf("producer %d: %v, want ErrFull", pid, err)
							crew.quit.Store(true)
							return
						}
						if crew.quit.Load() {
							return
						}
						runtime.Gosched()
					}
					seq += n
				}
			}(uint64(p))
		}

		// Completion pass: frees what the hardware model finished.
		var freed atomic.Uint64
		crew.Add(1)
		go func() {
			defer crew.Done()
			for !crew.quit.Load() {
				hw := r.HWHead()
				if hw != r.SwHead() {
					r.BeginWrite()
					r.SetSwHead(hw)
					r.EndWrite()
					freed.Store(hw)
				}
				runtime.Gosched()
			}
		}()

		// Hardware model, on this goroutine.
		next := make([]uint64, producers)
		seen := 0
		var prog progress
		for seen < total && !crew.quit.Load() {
			h, tl := r.HWHead(), r.Tail()
			if h == tl {
				if prog.stalled(seen) {
					t.Fatalf("no descriptor published for %v: %d of %d seen (tail %#x, reserved %#x)", hangGuard, seen, total, tl, r.Reserved())
				}
				runtime.Gosched()
				continue
			}
			for i := h; i != tl; i++ {
				// Plain compares per descriptor (testify's, with their boxed arguments, made
				// the -race run at -cpu 4 take minutes).
				d := r.Slot(i)
				pid, seq := d.Qw0>>48, d.Qw0&(1<<48-1)
				if pid >= uint64(producers) {
					t.Fatalf("index %#x: %#x", i, d)
				}
				if next[pid] != seq {
					t.Fatalf("producer %d out of order at index %#x: seq %d, want %d", pid, i, seq, next[pid])
				}
				if check32(d.Qw0) != uint32(d.Qw1>>32) {
					t.Fatalf("torn or stale slot at %#x: %#x", i, d)
				}
				k, skip := int(d.Qw1>>16&0xff), int(d.Qw1>>24&0xff)
				if k == 0 || k > skip {
					if g := d.Generation(); g != r.Generation(i) {
						t.Fatalf("generation at %#x: %d, want %d", i, g, r.Generation(i))
					}
				} else if g := d.Generation(); g != desc.Generation(seq&3) {
					t.Fatalf("edit descriptor raw at %#x: generation %d, want %d", i, g, seq&3)
				}
				next[pid]++
				seen++
			}
			r.SetHWHead(tl)
		}
		if !crew.stop(t) || t.Failed() {
			return // a producer's failure, or one stuck
		}
		for p := range producers {
			assert.Equal(t, uint64(perProducer), next[p], "producer %d", p)
		}
		assert.Equal(t, r.Tail(), r.HWHead())
		assert.Less(t, r.Tail(), uint64(1)<<20, "crossed the uint64 wrap")
	})
}

// TestStressSPSCDequeue: EnqueueSP against Dequeue from two goroutines, with same-seed
// generators on both sides, so the consumer knows every byte to expect.
func TestStressSPSCDequeue(t *testing.T) {
	total := 200000
	if testing.Short() {
		total = 20000
	}
	forEachImpl(t, func(t *testing.T) {
		r, err := newAt(128, 1<<32-500)
		require.NoError(t, err)
		const seed = 42
		done := make(chan struct{})
		go func() {
			defer close(done)
			rng := rand.New(rand.NewPCG(seed, 2))
			ds := make([]desc.Desc, 16)
			for sent := 0; sent < total; {
				n := min(1+rng.IntN(16), total-sent)
				for k := range n {
					ds[k] = desc.Desc{Qw0: rng.Uint64(), Qw1: rng.Uint64()}
				}
				for {
					if _, err := r.EnqueueSP(ds[:n], 0); err == nil {
						break
					}
					runtime.Gosched()
				}
				sent += n
			}
		}()
		rng := rand.New(rand.NewPCG(seed, 2))
		dst := make([]desc.Desc, 16)
		var want []desc.Desc
		idx := r.SwHead()
		for got := 0; got < total; {
			m := r.Dequeue(dst[:1+got%16])
			if m == 0 {
				runtime.Gosched()
				continue
			}
			for _, d := range dst[:m] {
				if len(want) == 0 {
					n := min(1+rng.IntN(16), total-got)
					for range n {
						want = append(want, desc.Desc{Qw0: rng.Uint64(), Qw1: rng.Uint64()})
					}
				}
				if w := want[0].WithGeneration(r.Generation(idx)); d != w {
					t.Fatalf("index %#x: %+v, want %+v", idx, d, w)
				}
				want = want[1:]
				idx++
				got++
			}
		}
		<-done
		assert.True(t, r.Empty())
	})
}

// TestSeqCountConcurrent: one writer updates two words inside write sections (a = v, then b = v,
// with the pair briefly inconsistent); readers snapshot with Begin, read both words and ask
// Retry. Under -race this must be clean, and every read the seqcount accepts must be consistent
// (a == b) and never go backwards. A count that stopped flagging open or completed sections would
// let the readers accept a torn pair.
func TestSeqCountConcurrent(t *testing.T) {
	writes := 20000
	if testing.Short() {
		writes = 3000
	}
	var sc SeqCount
	var a, b atomic.Uint64
	var done atomic.Bool
	const readers = 3
	accepted := make([]int, readers)
	var wg sync.WaitGroup
	for rd := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := uint64(0)
			for {
				finished := done.Load() // read before the snapshot: one last look after the writer ends
				s := sc.Begin()
				va, vb := a.Load(), b.Load()
				if !sc.Retry(s) {
					if va != vb || va < last {
						t.Errorf("reader %d accepted a=%d b=%d after %d (seq %d)", rd, va, vb, last, s)
						return
					}
					last = va
					accepted[rd]++
				}
				if s2 := sc.BeginWait(); s2&1 != 0 {
					t.Errorf("BeginWait returned an odd count %d", s2)
					return
				}
				if finished {
					if last != uint64(writes) {
						t.Errorf("reader %d: last accepted %d, want the final %d", rd, last, writes)
					}
					return
				}
				runtime.Gosched()
			}
		}()
	}
	for v := 1; v <= writes; v++ {
		sc.BeginWrite()
		a.Store(uint64(v))
		if v%64 == 0 {
			runtime.Gosched() // hold the section open for a while now and then
		}
		b.Store(uint64(v))
		sc.EndWrite()
	}
	done.Store(true)
	wg.Wait()
	assert.Equal(t, uint32(2*writes), sc.Count())
	for rd, n := range accepted {
		assert.Positive(t, n, "reader %d accepted no read", rd)
	}
}
