package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/cacheline"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// The packet-path benchmarks send a 296-byte packet (a 40-byte header and a 256-byte payload, as
// BenchmarkPacket does) the way a sender that owns its txreqs does:
//
//	Get          a pathTx from the allocator under test (alloc=slab|list|pool)
//	Init         the embedded sdma.TxReq, the *pathTx its own sdma.Completer
//	AddKVAddr ×2 the header and the payload, mapped by the mapper under test (mapper=direct|iommu)
//	Send         onto the engine's ring
//	Process      the hardware model reads the descriptors, translates the bus addresses, delivers
//	Poll         the completion pass unmaps and calls the *pathTx's Complete, which Puts it
//
// hw=inline runs Process and Poll on the benchmark goroutine (a Manual engine in CompletePoll
// mode), one packet at a time; hw=goroutine lets the engine's busy-polling goroutine do the
// hardware and the completions, with up to pathWindow packets in flight (the List's capacity is
// the window: Get fails with ErrEmpty when all are in flight).
//
// impl=copy is the baseline of the same run: a copy of the packet's 296 bytes (header, then
// payload) into a buffer, the least any path that moves the packet must do. b.SetBytes counts the
// packet's bytes everywhere, so MB/s compare directly. One op is one packet; ns/pkt says so.
const (
	pathHdrLen     = 40
	pathPayloadLen = 256
	pathPktLen     = pathHdrLen + pathPayloadLen
	pathWindow     = 128 // hw=goroutine: packets in flight at most
)

// pathTx is a caller's txreq: sdma.TxReq first, as the hfi1 API prescribes, then the packet's
// own buffers, so that no two txreqs in flight map the same memory (hfi1's verbs_txreq carries
// its header the same way), and what its completion needs. It is its own sdma.Completer.
type pathTx struct {
	sdma.TxReq
	hdr     [pathHdrLen]byte
	payload [pathPayloadLen]byte
	rig     *pathRig     // set by build
	count   *pathCounter // its engine's counter; set by build
	// reg is, with mem=registered, this txreq's packet memory in the rig's registered arena
	// (header, then payload), given out on the txreq's first use; nil otherwise.
	reg []byte
}

// Complete puts the packet back and counts it on its engine's counter.
func (t *pathTx) Complete(_ *sdma.TxReq, st sdma.Status) {
	c := t.count
	if err := t.rig.a.Put(t); err != nil || st != sdma.StatusOK {
		c.failed.Add(1)
		return
	}
	c.done.Add(1)
}

// pathAllocs are the allocators under test. n is the most objects in use at once.
var pathAllocs = []struct {
	name string
	make func(n int) (alloc.Allocator[pathTx], error)
}{
	{"slab", func(int) (alloc.Allocator[pathTx], error) {
		return alloc.NewSlab(alloc.SlabConfig[pathTx]{ObjectsPerSlab: 64})
	}},
	{"list", func(n int) (alloc.Allocator[pathTx], error) { return alloc.NewList[pathTx](n, nil) }},
	{"pool", func(int) (alloc.Allocator[pathTx], error) { return alloc.NewPool[pathTx](nil), nil }},
}

// pathMappers are the mappers under test.
var pathMappers = []struct {
	name string
	make func() (dma.Mapper, error)
}{
	{"direct", func() (dma.Mapper, error) { return dma.NewDirect(), nil }},
	{"iommu", func() (dma.Mapper, error) { return dma.NewIOMMU(dma.IOMMUConfig{}) }},
}

// pathCounter counts one engine's completions on its own cache line: in the parallel twin two
// engines' completion passes would otherwise share one. The padding on both sides is the
// module's unit (internal/cacheline.Pad: two 64-byte lines on amd64), so neither the next
// counter nor the allocation before the first shares a line or an adjacent-line pair with it.
type pathCounter struct {
	_      [cacheline.Pad]byte
	done   atomic.Int64 // completions with StatusOK whose Put succeeded
	failed atomic.Int64 // completions with another status, or a refused Put
	_      [cacheline.Pad]byte
}

// pathRig is one device under test with its allocator and one counter per engine.
type pathRig struct {
	dev   *sdma.Device
	a     alloc.Allocator[pathTx]
	arena *pathArena // mem=registered: registered packet memory; nil for mem=kvaddr
	count []pathCounter
}

func newPathRig(b testing.TB, cfg sdma.Config, m dma.Mapper, a alloc.Allocator[pathTx]) *pathRig {
	cfg.Mapper = m
	cfg.Sink = &sdmatest.DiscardSink{}
	dev, err := sdma.NewDevice(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = dev.Close() })
	return &pathRig{dev: dev, a: a, count: make([]pathCounter, dev.NumEngines())}
}

// build gets a pathTx and builds its packet for engine i; it returns alloc.ErrEmpty as is.
func (r *pathRig) build(i int) (*pathTx, error) {
	t, err := r.a.Get()
	if err != nil {
		return nil, err
	}
	// Written only when they change (a txreq's first use, or another engine's counter): the
	// completion reads them on the engine's core, and a store of the same values on every build
	// took that line back each packet (hw=goroutine: Complete's load of t.count was its
	// hottest instruction).
	if c := &r.count[i]; t.rig != r || t.count != c {
		t.rig, t.count = r, c
	}
	if err := t.Init(0, pathPktLen, t); err != nil {
		_ = r.a.Put(t)
		return nil, err
	}
	hdr, payload := t.hdr[:], t.payload[:]
	if r.arena != nil {
		if t.reg == nil {
			t.reg = r.arena.slot()
		}
		if t.reg != nil {
			hdr, payload = t.reg[:pathHdrLen], t.reg[pathHdrLen:]
		}
	}
	// A failed add has cleaned the txreq already: it only has to go back.
	if err := t.AddKVAddr(r.dev, hdr); err != nil {
		_ = r.a.Put(t)
		return nil, err
	}
	if err := t.AddKVAddr(r.dev, payload); err != nil {
		_ = r.a.Put(t)
		return nil, err
	}
	return t, nil
}

// inline sends one packet on engine i and drives it to completion on the caller's goroutine.
func (r *pathRig) inline(i int) error {
	t, err := r.build(i)
	if err != nil {
		return err
	}
	e := r.dev.Engine(i)
	if err := e.Send(nil, &t.TxReq, false); err != nil {
		_ = t.Clean()
		_ = r.a.Put(t)
		return err
	}
	if _, err := e.Process(); err != nil {
		return err
	}
	e.Poll()
	return nil
}

// pathArenaSlots is the number of packets' memory in a registered arena: more txreqs than any
// allocator under test makes (a txreq beyond it uses its own, unregistered arrays).
const pathArenaSlots = 8192

// pathArena is registered memory carved into one packet's bytes per txreq (mem=registered), as a
// sender with a registered buffer pool would lay it out.
type pathArena struct {
	mem  []byte
	next atomic.Int64 // slots given out
}

// withArena registers an arena with r's device: every packet the rig builds from then on comes
// from registered memory.
func (r *pathRig) withArena(b testing.TB) *pathRig {
	a := &pathArena{mem: make([]byte, pathArenaSlots*pathPktLen)}
	reg, err := r.dev.Register(a.mem)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.dev.Deregister(context.Background(), reg) })
	r.arena = a
	return r
}

// slot gives out the next packet's memory, or nil past the arena's end.
func (a *pathArena) slot() []byte {
	i := int(a.next.Add(1) - 1)
	if i >= pathArenaSlots {
		return nil
	}
	return a.mem[i*pathPktLen : (i+1)*pathPktLen : (i+1)*pathPktLen]
}

// check fails b unless every one of n packets completed OK and went back to the allocator.
func (r *pathRig) check(b testing.TB, n int) {
	var done, failed int64
	for i := range r.count {
		done += r.count[i].done.Load()
		failed += r.count[i].failed.Load()
	}
	if done != int64(n) || failed != 0 {
		b.Fatalf("%d packets: %d completed and went back, %d failed", n, done, failed)
	}
}

func reportPkt(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
}

// pathCopy is the impl=copy baseline's memory: a packet's buffers and the buffer it is copied
// into, on the heap (newPathCopy publishes it), as the benchmarked packets' buffers are; the
// compiler could drop copies into a stack buffer that nothing reads.
type pathCopy struct {
	src pathTx
	dst [pathPktLen]byte
}

var pathCopyEscape atomic.Pointer[pathCopy]

func newPathCopy() *pathCopy {
	c := new(pathCopy)
	for i := range c.src.payload {
		c.src.payload[i] = byte(i)
	}
	pathCopyEscape.Store(c)
	return c
}

// packet copies the header, then the payload, as a sink copying the two segments would.
func (c *pathCopy) packet() {
	n := copy(c.dst[:], c.src.hdr[:])
	copy(c.dst[n:], c.src.payload[:])
}

// benchPathCopy is the impl=copy baseline.
func benchPathCopy(b *testing.B) {
	c := newPathCopy()
	b.SetBytes(pathPktLen)
	b.ReportAllocs()
	for b.Loop() {
		c.packet()
	}
	reportPkt(b)
}

// pathMems are the kinds of packet memory: mem=kvaddr (the txreq's own arrays, mapped per add
// and unmapped at completion, as the kernel's sdma_txadd_kvaddr) is today's case and has no key
// in the names; mem=registered is memory registered with the device once (Device.Register).
var pathMems = []struct {
	key        string // the name's mem= part, "" for kvaddr
	registered bool
}{{"", false}, {"/mem=registered", true}}

// BenchmarkPacketPath: one goroutine, one packet's whole way per op, on each allocator and
// mapper, against a copy of the packet's bytes in the same run. Steady state allocates nothing.
// The mem=registered twins run on the slab and list allocators.
func BenchmarkPacketPath(b *testing.B) {
	b.Run("alloc=none/mapper=none/impl=copy", benchPathCopy)
	for _, mem := range pathMems {
		for _, al := range pathAllocs {
			if mem.registered && al.name == "pool" {
				continue
			}
			for _, mp := range pathMappers {
				b.Run(fmt.Sprintf("alloc=%s/mapper=%s%s/hw=inline", al.name, mp.name, mem.key), func(b *testing.B) {
					r := makePathRig(b, sdma.Config{Manual: true, Completion: sdma.CompletePoll}, al.make, mp.make, 64)
					if mem.registered {
						r.withArena(b)
					}
					b.SetBytes(pathPktLen)
					b.ReportAllocs()
					for b.Loop() {
						if err := r.inline(0); err != nil {
							b.Fatal(err)
						}
					}
					reportPkt(b)
					r.check(b, b.N)
				})
			}
		}
	}
	// One variant with the engine's own goroutine, on the allocator whose fixed capacity makes
	// the window.
	for _, mem := range pathMems {
		b.Run("alloc=list/mapper=direct"+mem.key+"/hw=goroutine", func(b *testing.B) {
			r := makePathRig(b, sdma.Config{RingSize: 1024, Wait: sdma.WaitBusyPoll}, pathAllocs[1].make, pathMappers[0].make, pathWindow)
			if mem.registered {
				r.withArena(b)
			}
			benchPathGoroutine(b, r)
		})
	}
}

// benchPathGoroutine is the hw=goroutine loop: build and send, the engine's goroutine does the
// rest, with up to pathWindow packets in flight.
func benchPathGoroutine(b *testing.B, r *pathRig) {
	e := r.dev.Engine(0)
	b.SetBytes(pathPktLen)
	b.ReportAllocs()
	for b.Loop() {
		t, err := r.build(0)
		for ; errors.Is(err, alloc.ErrEmpty); t, err = r.build(0) {
			runtime.Gosched() // all pathWindow in flight: let the engine's goroutine run
		}
		if err != nil {
			b.Fatal(err)
		}
		for {
			err := e.Send(nil, &t.TxReq, false)
			if err == nil {
				break
			}
			if err != sdma.ErrBusy {
				b.Fatal(err)
			}
			runtime.Gosched()
		}
	}
	r.drain(b.N)
	reportPkt(b)
	r.check(b, b.N)
}

// drain waits until n packets completed (or failed).
func (r *pathRig) drain(n int) {
	for {
		var seen int64
		for i := range r.count {
			seen += r.count[i].done.Load() + r.count[i].failed.Load()
		}
		if seen >= int64(n) {
			return
		}
		runtime.Gosched()
	}
}

func makePathRig(b testing.TB, cfg sdma.Config, newAlloc func(int) (alloc.Allocator[pathTx], error), newMapper func() (dma.Mapper, error), n int) *pathRig {
	a, err := newAlloc(n)
	if err != nil {
		b.Fatal(err)
	}
	m, err := newMapper()
	if err != nil {
		b.Fatal(err)
	}
	return newPathRig(b, cfg, m, a)
}

// BenchmarkPacketPathParallel is the RunParallel twin of BenchmarkPacketPath's hw=inline cases:
// two Manual engines on one device (one mapper, one allocator), each goroutine driving the engine
// it was given round robin, so that the allocator and the mapper are shared under contention.
// Its impl=copy runs the copy on every goroutine at once.
func BenchmarkPacketPathParallel(b *testing.B) {
	const engines = 2
	b.Run("alloc=none/mapper=none/impl=copy", func(b *testing.B) {
		b.SetBytes(pathPktLen)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			c := newPathCopy()
			for pb.Next() {
				c.packet()
			}
		})
		reportPkt(b)
	})
	for _, mem := range pathMems {
		for _, al := range pathAllocs {
			if mem.registered && al.name != "slab" {
				continue
			}
			for _, mp := range pathMappers {
				b.Run(fmt.Sprintf("alloc=%s/mapper=%s%s/hw=inline", al.name, mp.name, mem.key), func(b *testing.B) {
					cfg := sdma.Config{Manual: true, Completion: sdma.CompletePoll, Engines: engines}
					r := makePathRig(b, cfg, al.make, mp.make, 64*runtime.GOMAXPROCS(0))
					if mem.registered {
						r.withArena(b)
					}
					var next atomic.Int64
					b.SetBytes(pathPktLen)
					b.ReportAllocs()
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						i := int(next.Add(1)-1) % engines
						for pb.Next() {
							if err := r.inline(i); err != nil {
								b.Error(err)
								return
							}
						}
					})
					b.StopTimer()
					reportPkt(b)
					r.check(b, b.N)
				})
			}
		}
	}
}

// TestPacketPathAllocs asserts what BenchmarkPacketPath shows: once warm, a packet's whole way
// allocates nothing, on every allocator and mapper.
func TestPacketPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool (Pool, the mappers' records) drop items: allocation counts vary")
	}
	for _, mem := range pathMems {
		for _, al := range pathAllocs {
			for _, mp := range pathMappers {
				t.Run(fmt.Sprintf("alloc=%s/mapper=%s%s", al.name, mp.name, mem.key), func(t *testing.T) {
					r := makePathRig(t, sdma.Config{Manual: true, Completion: sdma.CompletePoll}, al.make, mp.make, 64)
					if mem.registered {
						r.withArena(t)
					}
					send := func() {
						if err := r.inline(0); err != nil {
							t.Fatal(err)
						}
					}
					const warm, runs = 100, 200
					for range warm {
						send()
					}
					if n := testing.AllocsPerRun(runs, send); n != 0 {
						t.Errorf("%v allocations per packet", n)
					}
					r.check(t, warm+runs+1) // AllocsPerRun runs send once more to warm up
					if mem.registered {
						if n := r.arena.next.Load(); n > pathArenaSlots {
							t.Errorf("%d txreqs, more than the arena's %d slots", n, pathArenaSlots)
						}
					}
				})
			}
		}
	}
}
