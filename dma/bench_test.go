package dma

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// benchImpls runs f once per mapper, named for benchstat.
func benchImpls(b *testing.B, f func(b *testing.B, m testMapper)) {
	b.Run("impl=direct", func(b *testing.B) { f(b, NewDirect()) })
	b.Run("impl=iommu", func(b *testing.B) {
		m, err := NewIOMMU(IOMMUConfig{})
		if err != nil {
			b.Fatal(err)
		}
		f(b, m)
	})
}

func BenchmarkMapUnmapSingle(b *testing.B) {
	benchImpls(b, func(b *testing.B, m testMapper) {
		buf := make([]byte, 2048)
		b.SetBytes(int64(len(buf)))
		benchMapUnmap(b, m, buf)
	})
}

// benchMapUnmap maps and unmaps buf on m once per op.
func benchMapUnmap(b *testing.B, m testMapper, buf []byte) {
	b.ReportAllocs()
	for b.Loop() {
		a, err := m.MapSingle(buf, ToDevice)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.UnmapSingle(a, len(buf), ToDevice); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMapUnmapPage(b *testing.B) {
	benchImpls(b, func(b *testing.B, m testMapper) {
		r := newRegion(b, 1)
		p, _ := r.Page(0)
		b.ReportAllocs()
		for b.Loop() {
			a, err := m.MapPage(p, 0, PageSize, ToDevice)
			if err != nil {
				b.Fatal(err)
			}
			if err := m.UnmapPage(a, PageSize, ToDevice); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMapUnmapParallel: every goroutine maps and unmaps its own buffer.
func BenchmarkMapUnmapParallel(b *testing.B) {
	benchImpls(b, func(b *testing.B, m testMapper) {
		benchMapUnmapParallel(b, m, func() []byte { return make([]byte, 2048) })
	})
}

// benchMapUnmapParallel maps and unmaps a buffer once per op from every P, each goroutine its own
// buffer from newBuf.
func benchMapUnmapParallel(b *testing.B, m testMapper, newBuf func() []byte) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := newBuf()
		for pb.Next() {
			a, err := m.MapSingle(buf, ToDevice)
			if err != nil {
				b.Error(err)
				return
			}
			if err := m.UnmapSingle(a, len(buf), ToDevice); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkTranslate translates a descriptor-sized range of one of many live mappings.
func BenchmarkTranslate(b *testing.B) {
	benchImpls(b, func(b *testing.B, m testMapper) {
		const live = 1024
		addrs := make([]Addr, live)
		bufs := make([][]byte, live)
		for i := range addrs {
			bufs[i] = make([]byte, 4096)
			a, err := m.MapSingle(bufs[i], ToDevice)
			if err != nil {
				b.Fatal(err)
			}
			addrs[i] = a
		}
		b.ReportAllocs()
		b.SetBytes(1024)
		i := 0
		for b.Loop() {
			if _, err := m.Translate(addrs[i&(live-1)]+64, 1024, ToDevice); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/desc")
	})
}

// BenchmarkTranslateParallel translates from every P at once, each goroutine walking 1024 live
// mappings from its own start, so concurrent translations mostly take read locks of different
// stripes. lock=striped is Translate as it is; lock=global is the same workload with every
// translation also taking one shared RWMutex's read lock, the baseline of a table behind a global
// read lock. The gap is what striping saves (the shared reader count's cache line bouncing
// between cores); it grows with the number of cores.
func BenchmarkTranslateParallel(b *testing.B) {
	benchImpls(b, func(b *testing.B, m testMapper) {
		const live = 1024
		addrs := make([]Addr, live)
		for i := range addrs {
			a, err := m.MapSingle(make([]byte, 4096), ToDevice)
			if err != nil {
				b.Fatal(err)
			}
			addrs[i] = a
		}
		for _, global := range []bool{false, true} {
			name := "lock=striped"
			if global {
				name = "lock=global"
			}
			b.Run(name, func(b *testing.B) {
				var (
					seed atomic.Uint64
					mu   sync.RWMutex // the baseline's global lock; only ever read-locked
				)
				b.ReportAllocs()
				b.SetBytes(256)
				b.RunParallel(func(pb *testing.PB) {
					i := int(seed.Add(97))
					for pb.Next() {
						if global {
							mu.RLock()
						}
						_, err := m.Translate(addrs[i&(live-1)], 256, ToDevice)
						if global {
							mu.RUnlock()
						}
						if err != nil {
							b.Error(err)
							return
						}
						i++
					}
				})
			})
		}
	})
}

func BenchmarkPool(b *testing.B) {
	p, err := NewPool(NewDirect(), "bench", 64, 64)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		blk, err := p.Alloc()
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Free(blk); err != nil {
			b.Fatal(err)
		}
	}
}

// benchPacket is one packet's memory as package sdma's senders keep it: a header and a payload in
// one object (the bench suite's txreq), mapped per packet as sdma_txadd_kvaddr does.
type benchPacket struct {
	hdr     [40]byte
	payload [256]byte
}

// BenchmarkMapTranslateUnmap is one packet's mappings on the kvaddr path: the header and the
// payload mapped (2×MapSingle), read by the hardware model (2×Translate), and unmapped by the
// completion (one UnmapBatch of 2). The packets cycle through 64 objects, as a slab's do.
func BenchmarkMapTranslateUnmap(b *testing.B) {
	for _, name := range []string{"direct", "iommu"} {
		b.Run("mapper="+name, func(b *testing.B) { benchPacketMappings(b, name, false) })
	}
}

// BenchmarkMapTranslateUnmapSole is BenchmarkMapTranslateUnmap with the mappings made by
// MapSingleSole and undone with their handles (the batch entries carry them): the kvaddr path as
// package sdma takes it when its mapper is a SoleMapper.
func BenchmarkMapTranslateUnmapSole(b *testing.B) {
	for _, name := range []string{"direct", "iommu"} {
		b.Run("mapper="+name, func(b *testing.B) { benchPacketMappings(b, name, true) })
	}
}

// benchPacketMappings maps, translates and unmaps one packet's header and payload per op, on a
// new mapper of the named kind, with MapSingle or (sole) MapSingleSole.
func benchPacketMappings(b *testing.B, name string, sole bool) {
	m := newBenchMapper(b, name)
	bu := m.(BatchUnmapper)
	pkts := make([]benchPacket, 64)
	us := make([]Unmap, 2)
	b.ReportAllocs()
	b.SetBytes(int64(len(pkts[0].hdr) + len(pkts[0].payload)))
	i := 0
	for b.Loop() {
		p := &pkts[i&63]
		i++
		ha, hs, err := mapTest(m, p.hdr[:], sole)
		if err != nil {
			b.Fatal(err)
		}
		pa, ps, err := mapTest(m, p.payload[:], sole)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Translate(ha, len(p.hdr), ToDevice); err != nil {
			b.Fatal(err)
		}
		if _, err := m.Translate(pa, len(p.payload), ToDevice); err != nil {
			b.Fatal(err)
		}
		us[0] = Unmap{Addr: ha, Size: len(p.hdr), Dir: ToDevice, Kind: KindSingle, Sole: hs}
		us[1] = Unmap{Addr: pa, Size: len(p.payload), Dir: ToDevice, Kind: KindSingle, Sole: ps}
		if err := bu.UnmapBatch(us); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMapHeapAmongRegions is BenchmarkMapUnmapSingle's Direct case of a Go heap buffer in a
// process that has allocated Regions (AllocPages: a device's coherent memory, a sender's page
// pools): every map asks the region registry whether the buffer lies in one.
func BenchmarkMapHeapAmongRegions(b *testing.B) {
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("regions=%d", n), func(b *testing.B) {
			for range n {
				newRegion(b, 1)
			}
			benchMapUnmap(b, NewDirect(), make([]byte, 256))
		})
	}
}

// BenchmarkTranslateRegistered translates descriptor-sized ranges of registered memory (eight
// registrations; Register), the path of every descriptor of a sender with registered buffers.
func BenchmarkTranslateRegistered(b *testing.B) {
	benchImpls(b, func(b *testing.B, m testMapper) {
		const regs = 8
		addrs := make([]Addr, regs)
		for i := range addrs {
			r, err := m.(Registrar).Register(make([]byte, 1<<16), ToDevice)
			if err != nil {
				b.Fatal(err)
			}
			addrs[i] = r.Addr()
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := m.Translate(addrs[i&(regs-1)]+Addr(i&1023)*32, 256, ToDevice); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// BenchmarkMapUnmapPayloadParallel: every goroutine maps and unmaps its own kvaddr payload of
// size bytes at an offset that is not page-aligned, so each mapping touches several pages
// (IOMMU granules): the map and unmap of a Payload packet, from every P at once.
func BenchmarkMapUnmapPayloadParallel(b *testing.B) {
	for _, size := range []int{4096, 16380} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			benchImpls(b, func(b *testing.B, m testMapper) {
				b.SetBytes(int64(size))
				benchMapUnmapParallel(b, m, func() []byte { return make([]byte, size+PageSize)[100 : 100+size] })
			})
		})
	}
}

// BenchmarkRegistrationAcquireRelease is registered memory's per-packet count: one Acquire and one
// Release of a registration, on one goroutine (sdma's producer and completion on one P).
func BenchmarkRegistrationAcquireRelease(b *testing.B) {
	r, err := NewDirect().Register(make([]byte, 4096), ToDevice)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !r.Acquire() {
			b.Fatal("Acquire refused")
		}
		r.Release()
	}
}
