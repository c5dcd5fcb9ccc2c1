package sdma

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// regTestMappers are the mappers registration is tested on, each counted.
func regTestMappers(t *testing.T, f func(t *testing.T, c *dma.Counting)) {
	t.Run("mapper=direct", func(t *testing.T) { f(t, dma.NewCounting(dma.NewDirect())) })
	t.Run("mapper=iommu", func(t *testing.T) { f(t, dma.NewCounting(engTestIOMMU(t))) })
}

// regTestRig is a Manual device on c with 4096 bytes of patterned memory (seed) registered.
func regTestRig(t *testing.T, c *dma.Counting, seed byte) (*Device, *captureSink, *Engine, []byte, *dma.Registration) {
	t.Helper()
	dev, cs := engTestDevice(t, Config{Manual: true, Mapper: c})
	mem := txTestPattern(4096, seed)
	r, err := dev.Register(mem)
	require.NoError(t, err)
	return dev, cs, dev.Engine(0), mem, r
}

// TestRegisteredAdds: adds from registered memory (AddKVAddr, AddBytes, AddPage, AddPages) map
// nothing and unmap nothing, carry daddr-typed descriptors, and deliver the right bytes; AddBytes
// does not split registered memory at pages; unregistered memory is still mapped per add.
func TestRegisteredAdds(t *testing.T) {
	regTestMappers(t, func(t *testing.T, c *dma.Counting) {
		dev, cs := engTestDevice(t, Config{Manual: true, Mapper: c})
		e := dev.Engine(0)
		region, err := dma.AllocPages(4)
		require.NoError(t, err)
		defer region.Close()
		mem := region.Bytes()
		copy(mem, txTestPattern(len(mem), 5))
		r, err := dev.Register(mem)
		require.NoError(t, err)
		heap := txTestPattern(64, 9)

		var tx TxReq
		want := append(append(append(append([]byte(nil), mem[100:140]...), mem[4000:9000]...), mem[3*dma.PageSize+8:3*dma.PageSize+108]...), heap...)
		require.NoError(t, tx.Init(0, len(want), nil))
		require.NoError(t, tx.AddKVAddr(dev, mem[100:140]))
		require.NoError(t, tx.AddBytes(dev, mem[4000:9000]))
		pg, err := region.Page(3)
		require.NoError(t, err)
		require.NoError(t, tx.AddPage(dev, pg, 8, 100))
		before := c.Counts()
		assert.Zero(t, before.MapSingle+before.MapPage, "registered memory maps nothing")
		require.NoError(t, tx.AddKVAddr(dev, heap))
		assert.Equal(t, 1, c.Counts().MapSingle, "heap memory is mapped")
		ds := tx.Descs()
		require.Len(t, ds, 4, "AddBytes of registered memory is one descriptor across pages")
		for _, d := range ds[:3] {
			assert.Equal(t, desc.MapNone, d.MapType())
		}
		assert.Equal(t, want, txTestGather(t, dev, &tx))

		require.NoError(t, e.Send(nil, &tx, false))
		_, err = e.Process()
		require.NoError(t, err)
		e.Poll()
		require.Equal(t, [][]byte{want}, cs.Packets(0))
		after := c.Counts()
		assert.Equal(t, 1, after.UnmapSingle, "only the heap fragment is unmapped")
		assert.Zero(t, after.UnmapPage)

		var tx2 TxReq
		require.NoError(t, tx2.Init(0, 2*dma.PageSize, nil))
		require.NoError(t, tx2.AddPages(dev, region, dma.PageSize, 2*dma.PageSize))
		assert.Equal(t, after.MapPage, c.Counts().MapPage, "AddPages of registered memory maps nothing")
		assert.Equal(t, mem[dma.PageSize:3*dma.PageSize], txTestGather(t, dev, &tx2))
		require.NoError(t, tx2.Clean())
		require.NoError(t, dev.Deregister(context.Background(), r))
		assert.Zero(t, c.Counts().Errors, "no unmap failed")
	})
}

// TestDeregisterInFlightRace: Deregister waits for the packet in flight that points into the
// memory, and for a built, unsent txreq until it is cleaned; a Deregister whose context ends
// first changes nothing; after Deregister the memory is mapped per add again.
func TestDeregisterInFlightRace(t *testing.T) {
	regTestMappers(t, func(t *testing.T, c *dma.Counting) {
		dev, cs, e, mem, r := regTestRig(t, c, 3)
		var err error
		var tx, built TxReq
		require.NoError(t, tx.Init(0, 256, nil))
		require.NoError(t, tx.AddKVAddr(dev, mem[:256]))
		require.NoError(t, e.Send(nil, &tx, false))
		require.NoError(t, built.Init(0, 64, nil))
		require.NoError(t, built.AddKVAddr(dev, mem[512:576]))

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, dev.Deregister(ctx, r), context.DeadlineExceeded)
		assert.True(t, r.Live())

		done := make(chan error, 1)
		go func() { done <- dev.Deregister(context.Background(), r) }()
		require.Eventually(t, func() bool { return !r.Live() }, time.Minute, time.Millisecond, "a hang guard: Deregister never began")
		// While it waits, the packet in flight is still read from the memory.
		_, err = e.Process()
		require.NoError(t, err)
		e.Poll()
		require.Equal(t, [][]byte{mem[:256]}, cs.Packets(0))
		assert.Equal(t, CauseNone, haltCauseOf(e), "no halt")
		select {
		case err := <-done:
			t.Fatalf("Deregister returned %v while a built txreq holds the memory", err)
		case <-time.After(5 * time.Millisecond):
		}
		require.NoError(t, built.Clean())
		require.NoError(t, <-done)

		// Deregistered: the same memory is mapped per add now.
		maps := c.Counts().MapSingle
		require.NoError(t, tx.Init(0, 64, nil))
		require.NoError(t, tx.AddKVAddr(dev, mem[:64]))
		assert.Equal(t, maps+1, c.Counts().MapSingle)
		require.NoError(t, tx.Clean())
		assert.Zero(t, c.Counts().Errors)
	})
}

// haltCauseOf returns the cause of e's last halt, CauseNone if it never halted.
func haltCauseOf(e *Engine) HaltCause {
	var he *HaltError
	if err := e.HaltCause(); err != nil && errors.As(err, &he) {
		return he.Cause
	}
	return CauseNone
}

// TestRegisteredSendConcurrent: senders on two engines send packets from registered memory while
// the memory is deregistered and registered again over and over; every packet completes OK with
// its own bytes, no engine halts (no read of deregistered memory), and nothing stays mapped.
func TestRegisteredSendConcurrent(t *testing.T) {
	m := engTestIOMMU(t)
	var mu sync.Mutex
	got := map[byte]int{}
	sink := SinkFunc(func(_ int, segs [][]byte) error {
		var p []byte
		for _, s := range segs {
			p = append(p, s...)
		}
		if !bytes.Equal(p, bytes.Repeat(p[:1], len(p))) {
			t.Errorf("packet mixes bytes: %v", p[:8])
		}
		mu.Lock()
		got[p[0]]++
		mu.Unlock()
		return nil
	})
	dev, err := NewDevice(Config{Engines: 2, Mapper: m, Sink: sink, Wait: WaitBusyPoll})
	require.NoError(t, err)
	defer dev.Close()
	const senders = 2
	per := 400
	if testing.Short() {
		per = 100
	}
	mem := make([]byte, senders*256)
	for s := range senders {
		copy(mem[s*256:], bytes.Repeat([]byte{byte(s + 1)}, 256))
	}
	var cur atomic.Pointer[dma.Registration]
	r, err := dev.Register(mem)
	require.NoError(t, err)
	cur.Store(r)
	var okN atomic.Int64
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() { // assert, not require, here: a sender that stops leaves no txreq built
			e := dev.Engine(s)
			tx := new(TxReq)
			done := make(chan Status, 1)
			for range per {
				if !assert.NoError(t, tx.Init(0, 256, CompleterFunc(func(_ *TxReq, st Status) { done <- st }))) {
					return
				}
				if !assert.NoError(t, tx.AddKVAddr(dev, mem[s*256:(s+1)*256])) {
					_ = tx.Clean()
					return
				}
				err := e.Send(nil, tx, false)
				for errors.Is(err, ErrBusy) {
					err = e.Send(nil, tx, false)
				}
				if err != nil && !errors.Is(err, ErrNotRunning) { // ErrNotRunning: taken, aborted
					assert.NoError(t, err)
					_ = tx.Clean()
					return
				}
				if st := <-done; st == StatusOK {
					okN.Add(1)
				}
			}
		})
	}
	// The flips go on until the senders are done, not until every packet completed OK: a packet
	// aborted (the engine halted reading deregistered memory, what this test is for) left that
	// count short, and the flips, and the test, went on for ever. Each Deregister is bounded: a
	// txreq left holding the memory fails the test instead.
	deregister := func(r *dma.Registration) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return dev.Deregister(ctx, r)
	}
	sendersDone, flipsDone := make(chan struct{}), make(chan struct{})
	var flips int
	go func() {
		defer close(flipsDone)
		for {
			select {
			case <-sendersDone:
				return
			default:
			}
			if !assert.NoError(t, deregister(cur.Load())) {
				return
			}
			nr, err := dev.Register(mem)
			if !assert.NoError(t, err) {
				return
			}
			cur.Store(nr)
			flips++
			runtime.Gosched()
		}
	}()
	wg.Wait()
	close(sendersDone)
	<-flipsDone
	require.NoError(t, deregister(cur.Load()))
	assert.Equal(t, int64(senders*per), okN.Load())
	for i := range 2 {
		assert.Equal(t, CauseNone, haltCauseOf(dev.Engine(i)))
	}
	mu.Lock()
	for s := range senders {
		assert.Equal(t, per, got[byte(s+1)])
	}
	mu.Unlock()
	assert.Equal(t, 1, m.LiveCount(), "only the pad stays mapped")
	t.Logf("%d registrations", flips)
}

// TestRegisterConcurrentAddOneWay: while another goroutine registers and deregisters the memory
// over and over, each AddKVAddr from it goes one way only: the registered path (a daddr-typed
// descriptor, a use of the registration held, no map call) or the mapped path (MapSingle, one
// map, no use held), never both and never neither; the packet keeps its bytes either way, and
// every map is undone by the clean.
func TestRegisterConcurrentAddOneWay(t *testing.T) {
	regTestMappers(t, func(t *testing.T, c *dma.Counting) {
		dev, _ := engTestDevice(t, Config{Manual: true, Mapper: c})
		mem := txTestPattern(4096, 7)
		stop := make(chan struct{})
		var flips atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := dev.Register(mem)
				if !assert.NoError(t, err) {
					return
				}
				runtime.Gosched()
				if !assert.NoError(t, dev.Deregister(context.Background(), r)) {
					return
				}
				flips.Add(1)
			}
		})
		n := 4000
		if testing.Short() {
			n = 1000
		}
		var regd, mapped int
		var tx TxReq
		for i := range n {
			off := (i * 64) % (len(mem) - 64)
			require.NoError(t, tx.Init(0, 64, nil))
			before := c.Counts().MapSingle
			require.NoError(t, tx.AddKVAddr(dev, mem[off:off+64]))
			maps := c.Counts().MapSingle - before
			d := tx.Descs()[0]
			switch d.MapType() {
			case desc.MapNone:
				regd++
				require.Zero(t, maps, "add %d: registered path and a map", i)
				require.Equal(t, uint8(1), tx.nregs, "add %d: registered path without a use held", i)
			case desc.MapSingle:
				mapped++
				require.Equal(t, 1, maps, "add %d: mapped path with %d maps", i, maps)
				require.Zero(t, tx.nregs, "add %d: mapped path holding a use", i)
			default:
				t.Fatalf("add %d: descriptor of map type %v", i, d.MapType())
			}
			require.Equal(t, 64, d.Len())
			require.NoError(t, tx.Clean())
		}
		close(stop)
		wg.Wait()
		t.Logf("%d adds: %d registered, %d mapped, %d flips", n, regd, mapped, flips.Load())
		cn := c.Counts()
		assert.Equal(t, cn.MapSingle, cn.UnmapSingle, "every map undone")
		assert.Zero(t, cn.Errors)
	})
}

// TestRegisteredHeldUseWhileDeregistering: a packet's second add from the registration its first
// add holds takes it without a lookup, also once Deregister has begun (the held use keeps the
// memory mapped, and Deregister waits for it); another txreq's add from the same memory then is
// mapped. The packet arrives whole, and Deregister returns once it completed.
func TestRegisteredHeldUseWhileDeregistering(t *testing.T) {
	regTestMappers(t, func(t *testing.T, c *dma.Counting) {
		dev, cs, e, mem, r := regTestRig(t, c, 5)
		var err error
		var tx TxReq
		require.NoError(t, tx.Init(0, 128, nil))
		require.NoError(t, tx.AddKVAddr(dev, mem[:64]))
		done := make(chan error, 1)
		go func() { done <- dev.Deregister(context.Background(), r) }()
		require.Eventually(t, func() bool { return !r.Live() }, time.Minute, time.Millisecond, "a hang guard: Deregister never began")

		maps := c.Counts().MapSingle
		require.NoError(t, tx.AddKVAddr(dev, mem[64:128]))
		assert.Equal(t, maps, c.Counts().MapSingle, "the held registration: no map")
		for i, d := range tx.Descs() {
			assert.Equal(t, desc.MapNone, d.MapType(), "descriptor %d", i)
		}
		assert.Equal(t, uint8(1), tx.nregs, "one use held")

		var other TxReq
		require.NoError(t, other.Init(0, 64, nil))
		require.NoError(t, other.AddKVAddr(dev, mem[128:192]))
		assert.Equal(t, maps+1, c.Counts().MapSingle, "another txreq's add from memory being deregistered is mapped")
		require.NoError(t, other.Clean())

		select {
		case err := <-done:
			t.Fatalf("Deregister returned %v while a txreq holds a use", err)
		case <-time.After(5 * time.Millisecond):
		}
		require.NoError(t, e.Send(nil, &tx, false))
		_, err = e.Process()
		require.NoError(t, err)
		e.Poll()
		require.Equal(t, [][]byte{mem[:128]}, cs.Packets(0))
		require.NoError(t, <-done)
		assert.Equal(t, CauseNone, haltCauseOf(e), "no halt")
		cn := c.Counts()
		assert.Equal(t, cn.MapSingle, cn.UnmapSingle)
		assert.Zero(t, cn.Errors)
	})
}
