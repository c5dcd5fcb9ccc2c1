package dma

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkMapTranslateUnmapSoleParallel is BenchmarkMapTranslateUnmapSole from every P at once,
// each goroutine with its own packet (header and payload) in one shared array, as the packet
// path's txreqs lie in one slab: map both with MapSingleSole, translate both, unmap both with
// their handles, per op (see benchSoleParallel for the strides). Compared with the one-goroutine benchmark it shows what the mapper's
// producers on different Ps cost each other (a cache line both write, a hashed set both use).
func BenchmarkMapTranslateUnmapSoleParallel(b *testing.B) {
	for _, stride := range []int{296, 720} {
		for _, name := range []string{"direct", "iommu"} {
			b.Run(fmt.Sprintf("stride=%d/mapper=%s", stride, name), func(b *testing.B) {
				benchSoleParallel(b, newBenchMapper(b, name), stride)
			})
		}
	}
}

// benchSoleParallel is BenchmarkMapTranslateUnmapSoleParallel on m, with the packets (a 40-byte
// header, then a 256-byte payload) stride bytes apart in one cache-line-aligned array: 296, one
// after the other, or 720, a stride at which a hash of the whole address (Direct's sets before
// dde3d3f) put two neighbouring packets' buffers in one set.
func benchSoleParallel(b *testing.B, m testMapper, stride int) {
	sm := m.(SoleMapper)
	const pkts = 64
	mem := make([]byte, pkts*stride+64)
	mem = mem[64-int(sliceAddr(mem)&63):] // line-aligned, as a slab's padded cells are
	var next atomic.Int64
	b.ReportAllocs()
	b.SetBytes(296)
	b.RunParallel(func(pb *testing.PB) {
		p := mem[int(next.Add(1)-1)%pkts*stride:]
		hdr, payload := p[:40:40], p[40:296:296]
		for pb.Next() {
			ha, hs, err := sm.MapSingleSole(hdr, ToDevice)
			if err != nil {
				b.Error(err)
				return
			}
			pa, ps, err := sm.MapSingleSole(payload, ToDevice)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := m.Translate(ha, len(hdr), ToDevice); err != nil {
				b.Error(err)
				return
			}
			if _, err := m.Translate(pa, len(payload), ToDevice); err != nil {
				b.Error(err)
				return
			}
			if err := sm.UnmapSingleSole(ha, len(hdr), ToDevice, hs); err != nil {
				b.Error(err)
				return
			}
			if err := sm.UnmapSingleSole(pa, len(payload), ToDevice, ps); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// newBenchMapper returns a new mapper of the named kind: "direct" or "iommu".
func newBenchMapper(b *testing.B, name string) testMapper {
	if name == "iommu" {
		m, err := NewIOMMU(IOMMUConfig{})
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	return NewDirect()
}
