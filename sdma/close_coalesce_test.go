package sdma

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// Txreqs of many small fragments (past the descriptor limit: the coalesce buffer) and of
// scattered pages, sent while halts come and Close races: exactly once, nothing mapped.
func TestCloseCoalescedConcurrent(t *testing.T) {
	engTestNoLeak(t)
	for round := 0; round < 30; round++ {
		seed := uint64(round)*7919 + uint64(time.Now().UnixNano())
		iommu := engTestIOMMU(t)
		dev, err := NewDevice(Config{Mapper: iommu, RingSize: 256, Engines: 2, faults: faultPlan{HaltRate: 0.01, Seed: seed}})
		if err != nil {
			t.Fatal(err)
		}
		r := &tortRig{t: t, dev: dev, buf: engTestPattern(4096, 3)}
		var coalesced atomic.Int64
		for s := 0; s < 3; s++ {
			rng := rand.New(rand.NewPCG(seed, uint64(s)))
			r.spinSender(dev.Engine(s%2), func() *tortRec {
				rec := &tortRec{}
				frags := 1 + rng.IntN(120)
				sz := 4 + rng.IntN(12)
				n := frags * sz
				if err := rec.tx.Init(0, n, CompleterFunc(func(tx *TxReq, st Status) { r.complete(rec, st) })); err != nil {
					r.fail("Init: %v", err)
					return nil
				}
				for k := 0; k < frags; k++ {
					off := rng.IntN(len(r.buf) - sz)
					if err := rec.tx.AddKVAddr(dev, r.buf[off:off+sz]); err != nil {
						if !errors.Is(err, ErrClosed) {
							r.fail("AddKVAddr frag %d of %d: %v", k, frags, err)
						}
						return nil
					}
				}
				if rec.tx.coalescing || rec.tx.NumDesc() < frags {
					coalesced.Add(1)
				}
				r.mu.Lock()
				r.recs = append(r.recs, rec)
				r.mu.Unlock()
				return rec
			})
		}
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		if err := dev.Close(); err != nil {
			t.Fatal(err)
		}
		r.end()
		r.check(fmt.Sprintf("round %d seed %d", round, seed), iommu)
		if round == 0 {
			t.Logf("%d txreqs, %d coalesced", len(r.recs), coalesced.Load())
		}
	}
}
