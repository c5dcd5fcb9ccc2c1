package ring

import (
	"testing"

	"github.com/gosdma/gosdma/desc"
)

// BenchmarkPacketOps is the ring's share of one packet on sdma's path, on one goroutine: Reserve,
// Write (two descriptors: a header and a payload), Publish (publish=seqcst) or PublishRelease
// (publish=release), the hardware model's SetHWHead, and a completion pass's BeginWrite,
// SetSwHead and EndWrite. The module's bench package measures the ring alone and the whole
// packet; this measures the index stores in between.
func BenchmarkPacketOps(b *testing.B) {
	for _, c := range []struct{ name, method string }{{"seqcst", "Publish"}, {"release", "PublishRelease"}} {
		pub := c.method
		b.Run("publish="+c.name, func(b *testing.B) {
			r, err := New(DefaultSize)
			if err != nil {
				b.Fatal(err)
			}
			ds := []desc.Desc{mk(1), mk(2)}
			b.ReportAllocs()
			for b.Loop() {
				res, err := r.Reserve(len(ds))
				if err != nil {
					b.Fatal(err)
				}
				res.Write(0, ds, 0)
				publishBy(&res, pub)
				t := r.Tail()
				r.SetHWHead(t)
				r.BeginWrite()
				r.SetSwHead(t)
				r.EndWrite()
			}
			if !r.Empty() {
				b.Fatal("ring not empty")
			}
		})
	}
}
