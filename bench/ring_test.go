package bench

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/Workiva/go-datastructures/queue"
	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/internal/ringimpl"
	"github.com/gosdma/gosdma/ring"
)

// The ring benchmarks move 16-byte descriptors through a 2048-slot queue, like
// bench/dpdk/rte_ring_ref.c does with DPDK's rte_ring, so that bench/compare.sh can set the
// figures side by side. One benchmark op is one bulk of descriptors; ns/desc is the time per
// descriptor, b.SetBytes counts 16 bytes per descriptor.
//
//	impl=asm|go   gosdma's ring with the amd64 assembly or the portable Go writer
//	impl=chan     a buffered chan [2]uint64 of 2048, one send/receive per descriptor
//	impl=workiva  github.com/Workiva/go-datastructures/queue.RingBuffer of 2048 (interface
//	              values: it allocates per descriptor)
//	mode=same     one goroutine enqueues a bulk and dequeues it again
//	mode=cross    a producer goroutine and a consumer goroutine

const benchRingSize = 2048

var bulks = []int{1, 8, 32}

func descs(n int) []desc.Desc {
	ds := make([]desc.Desc, n)
	for i := range ds {
		ds[i] = desc.Desc{Qw0: uint64(i), Qw1: ^uint64(i)}
	}
	return ds
}

// wantSum is the sum of Qw0 over bulks descriptors from descs(bulk): what a consumer that saw
// every descriptor exactly once adds up. The benchmarks check it after the timed loop, so a ring
// that lost, duplicated or tore descriptors fails the benchmark instead of timing it.
func wantSum(bulks, bulk int) uint64 { return uint64(bulks) * uint64(bulk*(bulk-1)/2) }

func checkSum(b *testing.B, got uint64, bulks, bulk int) {
	if want := wantSum(bulks, bulk); got != want {
		b.Fatalf("consumer saw Qw0 sum %d, want %d: descriptors lost, duplicated or torn", got, want)
	}
}

func report(b *testing.B, bulk int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*bulk), "ns/desc")
}

// useImpl forces the ring's Write implementation for the duration of a benchmark.
func useImpl(b *testing.B, impl string) {
	if !slices.Contains(ring.Implementations(), impl) {
		b.Skipf("implementation %q not available here", impl)
	}
	restore, err := ringimpl.Set(impl)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(restore)
}

func BenchmarkRingSPSC(b *testing.B) {
	for _, impl := range []string{"asm", "go", "chan", "workiva"} {
		for _, mode := range []string{"same", "cross"} {
			for _, bulk := range bulks {
				b.Run(fmt.Sprintf("impl=%s/mode=%s/bulk=%d", impl, mode, bulk), func(b *testing.B) {
					b.SetBytes(int64(desc.Size * bulk))
					b.ReportAllocs()
					switch impl {
					case "chan":
						benchChan(b, mode, bulk)
					case "workiva":
						benchWorkiva(b, mode, bulk)
					default:
						useImpl(b, impl)
						benchRing(b, mode, bulk)
					}
					report(b, bulk)
				})
			}
		}
	}
}

func benchRing(b *testing.B, mode string, bulk int) {
	r, err := ring.New(benchRingSize)
	if err != nil {
		b.Fatal(err)
	}
	src, dst := descs(bulk), make([]desc.Desc, bulk)
	if mode == "same" {
		b.ResetTimer()
		for range b.N {
			if _, err := r.EnqueueSP(src, 0); err != nil {
				b.Fatal(err)
			}
			if r.Dequeue(dst) != bulk {
				b.Fatal("short dequeue")
			}
		}
		b.StopTimer()
		var sum uint64
		for _, d := range dst {
			sum += d.Qw0
		}
		checkSum(b, sum, 1, bulk) // the last bulk came back whole
		return
	}
	total := b.N * bulk
	var wg sync.WaitGroup
	var sum uint64 // written by the consumer goroutine, read after wg.Wait
	wg.Add(1)
	var started atomic.Bool
	go func() {
		defer wg.Done()
		started.Store(true)
		for got, spins := 0, 0; got < total; {
			n := r.Dequeue(dst)
			if n == 0 {
				if spins++; spins&63 == 0 {
					runtime.Gosched() // the machine may have fewer free cores than goroutines
				}
				continue
			}
			for _, d := range dst[:n] {
				sum += d.Qw0
			}
			got += n
		}
	}()
	// Start timing once the consumer runs: a consumer still waiting for a P measures the scheduler.
	for !started.Load() {
		runtime.Gosched()
	}
	b.ResetTimer()
	for i, spins := 0, 0; i < b.N; {
		if _, err := r.EnqueueSP(src, 0); err != nil {
			if spins++; spins&63 == 0 {
				runtime.Gosched()
			}
			continue
		}
		i++
	}
	wg.Wait()
	b.StopTimer()
	checkSum(b, sum, b.N, bulk)
}

func benchChan(b *testing.B, mode string, bulk int) {
	c := make(chan [2]uint64, benchRingSize)
	src := descs(bulk)
	if mode == "same" {
		b.ResetTimer()
		for range b.N {
			for _, d := range src {
				c <- [2]uint64{d.Qw0, d.Qw1}
			}
			for range bulk {
				<-c
			}
		}
		b.StopTimer()
		// One more bulk, untimed, to check the queue hands back what it was given.
		var sum uint64
		for _, d := range src {
			c <- [2]uint64{d.Qw0, d.Qw1}
		}
		for range bulk {
			v := <-c
			sum += v[0]
		}
		checkSum(b, sum, 1, bulk)
		return
	}
	total := b.N * bulk
	done := make(chan uint64)
	b.ResetTimer()
	go func() {
		var sum uint64
		for range total {
			v := <-c
			sum += v[0]
		}
		done <- sum
	}()
	for range b.N {
		for _, d := range src {
			c <- [2]uint64{d.Qw0, d.Qw1}
		}
	}
	sum := <-done
	b.StopTimer()
	checkSum(b, sum, b.N, bulk)
}

func benchWorkiva(b *testing.B, mode string, bulk int) {
	q := queue.NewRingBuffer(benchRingSize)
	src := descs(bulk)
	put := func(d desc.Desc) {
		if err := q.Put(d); err != nil {
			b.Fatal(err)
		}
	}
	if mode == "same" {
		b.ResetTimer()
		for range b.N {
			for _, d := range src {
				put(d)
			}
			for range bulk {
				if _, err := q.Get(); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		// One more bulk, untimed, to check the queue hands back what it was given.
		var sum uint64
		for _, d := range src {
			put(d)
		}
		for range bulk {
			v, err := q.Get()
			if err != nil {
				b.Fatal(err)
			}
			sum += v.(desc.Desc).Qw0
		}
		checkSum(b, sum, 1, bulk)
		return
	}
	total := b.N * bulk
	done := make(chan uint64)
	b.ResetTimer()
	go func() {
		var sum uint64
		for range total {
			v, err := q.Get()
			if err != nil {
				panic(err)
			}
			sum += v.(desc.Desc).Qw0
		}
		done <- sum
	}()
	for range b.N {
		for _, d := range src {
			put(d)
		}
	}
	sum := <-done
	b.StopTimer()
	checkSum(b, sum, b.N, bulk)
}

// BenchmarkRingMPSC: producers goroutines Enqueue (CAS reservation, ordered publish) into one
// ring, one consumer goroutine Dequeues. b.N bulks in total, split across the producers.
func BenchmarkRingMPSC(b *testing.B) {
	for _, impl := range []string{"asm", "go"} {
		for _, producers := range []int{2, 4} {
			for _, bulk := range bulks {
				b.Run(fmt.Sprintf("impl=%s/producers=%d/bulk=%d", impl, producers, bulk), func(b *testing.B) {
					useImpl(b, impl)
					b.SetBytes(int64(desc.Size * bulk))
					b.ReportAllocs()
					benchMPSC(b, producers, bulk)
					report(b, bulk)
				})
			}
		}
	}
}

func benchMPSC(b *testing.B, producers, bulk int) {
	r, err := ring.New(benchRingSize)
	if err != nil {
		b.Fatal(err)
	}
	total := b.N * bulk
	var wg sync.WaitGroup
	b.ResetTimer()
	for p := range producers {
		ops := b.N / producers
		if p < b.N%producers {
			ops++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := descs(bulk)
			for i, spins := 0, 0; i < ops; {
				if _, err := r.Enqueue(src, 0); err != nil {
					if spins++; spins&255 == 0 {
						runtime.Gosched()
					}
					continue
				}
				i++
			}
		}()
	}
	dst := make([]desc.Desc, 64)
	var sum uint64
	for got, spins := 0, 0; got < total; {
		n := r.Dequeue(dst)
		if n == 0 {
			if spins++; spins&63 == 0 {
				runtime.Gosched()
			}
			continue
		}
		for _, d := range dst[:n] {
			sum += d.Qw0
		}
		got += n
	}
	wg.Wait()
	b.StopTimer()
	checkSum(b, sum, b.N, bulk)
}
