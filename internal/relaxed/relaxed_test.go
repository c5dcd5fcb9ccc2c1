package relaxed

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func TestCounterAdd(t *testing.T) {
	var c Counter
	if got := c.Load(); got != 0 {
		t.Fatalf("zero Counter: Load = %d, want 0", got)
	}
	c.Add(0)
	c.Add(5)
	c.Add(1 << 40)
	if got, want := c.Load(), uint64(5+1<<40); got != want {
		t.Fatalf("Load = %d, want %d", got, want)
	}
	c.Add(^uint64(0)) // adding 2^64-1 is subtracting 1, modulo 2^64
	if got, want := c.Load(), uint64(4+1<<40); got != want {
		t.Fatalf("after a wrapping Add: Load = %d, want %d", got, want)
	}
}

func TestStoreRelease(t *testing.T) {
	var w64 atomic.Uint64
	for _, v := range []uint64{1, 0, ^uint64(0), 0x0123456789abcdef} {
		StoreRelease64(&w64, v)
		if got := w64.Load(); got != v {
			t.Fatalf("StoreRelease64(%#x): Load = %#x", v, got)
		}
	}
	// StoreRelease32 writes its 4 bytes and nothing else.
	var pair struct{ a, b, c atomic.Uint32 }
	pair.a.Store(0xaaaaaaaa)
	pair.c.Store(0xcccccccc)
	for _, v := range []uint32{1, 0, ^uint32(0), 0x01234567} {
		StoreRelease32(&pair.b, v)
		if got := pair.b.Load(); got != v {
			t.Fatalf("StoreRelease32(%#x): Load = %#x", v, got)
		}
		if pair.a.Load() != 0xaaaaaaaa || pair.c.Load() != 0xcccccccc {
			t.Fatalf("StoreRelease32(%#x) touched its neighbours: %#x, %#x", v, pair.a.Load(), pair.c.Load())
		}
	}
}

// TestCounterOneWriterConcurrentReaders: one writer adds a known sequence while readers load
// all the time; every reader's successive values never decrease and are sums the writer
// passed through (each Add is a multiple of 3, so any other value is a torn or invented one),
// and the last value is the total. Run under -race, where the Counter is sync/atomic and the
// detector checks the readers' accesses against the writer's.
func TestCounterOneWriterConcurrentReaders(t *testing.T) {
	adds := 1 << 20
	if testing.Short() || impl == "atomic" {
		adds = 1 << 16
	}
	const readers = 3
	var c Counter
	var done atomic.Bool
	errs := make(chan error, readers)
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for i := 0; ; i++ {
				finished := done.Load()
				v := c.Load()
				if v < last || v%3 != 0 {
					errs <- fmt.Errorf("reader saw %d after %d", v, last)
					return
				}
				last = v
				if finished {
					return
				}
				if i&255 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	var want uint64
	for i := range adds {
		n := uint64(3 * (1 + i%5))
		c.Add(n)
		want += n
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := c.Load(); got != want {
		t.Fatalf("Load = %d after the writer finished, want %d", got, want)
	}
}

// TestStoreReleaseMessagePassing is the message-passing litmus test of the release promise:
// the writer stores a payload word with an ordinary Go store and then publishes its index with
// StoreRelease64; the reader loads the index (sync/atomic) and then reads every payload word up
// to it, which must already hold its value. Without -race this runs the plain-MOV path; under
// -race the detector also checks that the index store orders the payload (it would report the
// ordinary payload accesses otherwise).
func TestStoreReleaseMessagePassing(t *testing.T) {
	total := uint64(1 << 22)
	if testing.Short() || impl == "atomic" {
		total = 1 << 16
	}
	const window = 256 // the writer never runs more than window-1 words ahead of the reader
	payload := make([]uint64, window)
	var index, ack atomic.Uint64 // index: the writer's release; ack: the reader's, for reuse
	var stop atomic.Bool         // the reader failed: the writer gives up
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop.Store(true)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for s := uint64(1); s <= total; s++ {
			for i := 0; s-ack.Load() >= window; i++ {
				if stop.Load() {
					return
				}
				if i&15 == 15 {
					runtime.Gosched()
				}
			}
			payload[s%window] = s * 7
			StoreRelease64(&index, s)
		}
	}()
	var seen uint64
	for spins := 0; seen < total; {
		ix := index.Load()
		if ix == seen {
			if spins++; spins&15 == 0 {
				runtime.Gosched()
			}
			continue
		}
		for s := seen + 1; s <= ix; s++ {
			if got := payload[s%window]; got != s*7 {
				t.Fatalf("word %d: payload %d, want %d: read before the release made it visible", s, got, s*7)
			}
		}
		seen = ix
		StoreRelease64(&ack, seen) // the reads above happen before the writer reuses the words
	}
}

func TestAllocs(t *testing.T) {
	var c Counter
	var w64 atomic.Uint64
	var w32 atomic.Uint32
	if n := testing.AllocsPerRun(100, func() {
		c.Add(1)
		StoreRelease64(&w64, c.Load())
		StoreRelease32(&w32, uint32(c.Load()))
	}); n != 0 {
		t.Fatalf("%v allocations per run, want 0", n)
	}
}

// BenchmarkCounter compares Counter.Add (impl=relaxed) with atomic.Uint64.Add (impl=atomic) in
// the same run; on amd64 outside -race the first is a plain ADD to memory, the second LOCK XADD.
func BenchmarkCounter(b *testing.B) {
	b.Run("impl=relaxed", func(b *testing.B) {
		var c Counter
		for b.Loop() {
			c.Add(1)
		}
		if c.Load() == 0 {
			b.Fatal("no adds")
		}
	})
	b.Run("impl=atomic", func(b *testing.B) {
		var c atomic.Uint64
		for b.Loop() {
			c.Add(1)
		}
		if c.Load() == 0 {
			b.Fatal("no adds")
		}
	})
}

// BenchmarkStore compares StoreRelease64 (impl=release) with atomic.Uint64.Store (impl=atomic)
// in the same run; on amd64 outside -race the first is a plain MOV, the second XCHG.
func BenchmarkStore(b *testing.B) {
	b.Run("impl=release", func(b *testing.B) {
		var w atomic.Uint64
		i := uint64(0)
		for b.Loop() {
			i++
			StoreRelease64(&w, i)
		}
		if w.Load() != i {
			b.Fatal("lost store")
		}
	})
	b.Run("impl=atomic", func(b *testing.B) {
		var w atomic.Uint64
		i := uint64(0)
		for b.Loop() {
			i++
			w.Store(i)
		}
		if w.Load() != i {
			b.Fatal("lost store")
		}
	})
}
