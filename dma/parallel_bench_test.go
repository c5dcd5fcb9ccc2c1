package dma

import (
	"sync/atomic"
	"testing"
)

// BenchmarkMapTranslateUnmapSoleParallel is BenchmarkMapTranslateUnmapSole from every P at once,
// each goroutine with its own packet (header and payload) in one shared array, as the packet
// path's txreqs lie in one slab: map both with MapSingleSole, translate both, unmap both with
// their handles, per op. Compared with the one-goroutine benchmark it shows what the mapper's
// producers on different Ps cost each other (a cache line both write, a hashed set both use).
func BenchmarkMapTranslateUnmapSoleParallel(b *testing.B) {
	for _, name := range []string{"direct", "iommu"} {
		b.Run("mapper="+name, func(b *testing.B) {
			m := newBenchMapper(b, name)
			sm := m.(SoleMapper)
			pkts := make([]benchPacket, 64)
			var next atomic.Int64
			b.ReportAllocs()
			b.SetBytes(int64(len(pkts[0].hdr) + len(pkts[0].payload)))
			b.RunParallel(func(pb *testing.PB) {
				p := &pkts[next.Add(1)&63]
				for pb.Next() {
					ha, hs, err := sm.MapSingleSole(p.hdr[:], ToDevice)
					if err != nil {
						b.Error(err)
						return
					}
					pa, ps, err := sm.MapSingleSole(p.payload[:], ToDevice)
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := m.Translate(ha, len(p.hdr), ToDevice); err != nil {
						b.Error(err)
						return
					}
					if _, err := m.Translate(pa, len(p.payload), ToDevice); err != nil {
						b.Error(err)
						return
					}
					if err := sm.UnmapSingleSole(ha, len(p.hdr), ToDevice, hs); err != nil {
						b.Error(err)
						return
					}
					if err := sm.UnmapSingleSole(pa, len(p.payload), ToDevice, ps); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
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
