package bench

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/alloc"
)

// benchTx is txreq-sized: a header, a few inline descriptors, caller fields.
type benchTx struct {
	_   [4]uint64    // header
	_   [8][2]uint64 // inline descriptors
	_   func()       // callback
	seq uint64
	_   [2]uint64
}

// holder makes new(benchTx) escape without a shared hot word: each goroutine stores into its own
// heap-allocated holder (published once through allocSink so it must live on the heap).
type holder struct{ p *benchTx }

var allocSink atomic.Pointer[holder]

// getPut is one allocator under benchmark: get an object, touch it, give it back.
type getPut struct {
	name string
	make func(b *testing.B) func(h *holder)
}

func allocImpls() []getPut {
	return []getPut{
		{"slab", func(b *testing.B) func(*holder) {
			s, err := alloc.NewSlab(alloc.SlabConfig[benchTx]{ObjectsPerSlab: 256})
			if err != nil {
				b.Fatal(err)
			}
			return func(*holder) {
				p, err := s.Get()
				if err != nil {
					panic(err)
				}
				p.seq++
				if err := s.Put(p); err != nil {
					panic(err)
				}
			}
		}},
		{"list", func(b *testing.B) func(*holder) {
			l, err := alloc.NewList[benchTx](4096, nil)
			if err != nil {
				b.Fatal(err)
			}
			return func(*holder) {
				p, err := l.Get()
				if err != nil {
					panic(err)
				}
				p.seq++
				if err := l.Put(p); err != nil {
					panic(err)
				}
			}
		}},
		{"pool", func(b *testing.B) func(*holder) {
			pl := alloc.NewPool[benchTx](nil)
			return func(*holder) {
				p, _ := pl.Get()
				p.seq++
				if err := pl.Put(p); err != nil {
					panic(err)
				}
			}
		}},
		{"syncpool", func(b *testing.B) func(*holder) {
			sp := &sync.Pool{New: func() any { return new(benchTx) }}
			return func(*holder) {
				p := sp.Get().(*benchTx)
				p.seq++
				sp.Put(p)
			}
		}},
		{"new", func(b *testing.B) func(*holder) {
			// A live, pointer-rich heap so each GC cycle the allocation triggers has marking to
			// do: the pressure new(T) puts on a real program.
			live := make([]*[4]uint64, 1<<17)
			for i := range live {
				live[i] = new([4]uint64)
			}
			b.Cleanup(func() { runtime.KeepAlive(live) })
			return func(h *holder) {
				h.p = new(benchTx)
				h.p.seq++
			}
		}},
	}
}

// BenchmarkAllocGetPut: one goroutine, get+put per op, each allocator against new(T) and a plain
// sync.Pool in the same run.
func BenchmarkAllocGetPut(b *testing.B) {
	for _, im := range allocImpls() {
		b.Run("impl="+im.name, func(b *testing.B) {
			f := im.make(b)
			h := new(holder)
			allocSink.Store(h)
			f(h) // warm up: the slab's first slab and the pool's first chunk are not the steady state
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				f(h)
			}
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(ms1.NumGC-ms0.NumGC), "GCs")
		})
	}
}

// BenchmarkAllocGetPutParallel is the RunParallel twin: every goroutine gets and puts at once.
func BenchmarkAllocGetPutParallel(b *testing.B) {
	for _, im := range allocImpls() {
		b.Run("impl="+im.name, func(b *testing.B) {
			f := im.make(b)
			f(new(holder)) // warm up, as above
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				h := new(holder)
				allocSink.Store(h)
				for pb.Next() {
					f(h)
				}
			})
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(ms1.NumGC-ms0.NumGC), "GCs")
		})
	}
}
