package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// TestPacketTwoDescPath: packet reads a plain packet of two descriptors with bytes on its own
// straight path (plainPair), every other multi-descriptor packet with gather. Both deliver the
// same bytes, and a read that fails halts with the same cause, index and descriptor whichever
// path reads it: the first descriptor's fault before the second's, the second's at its own index.
func TestPacketTwoDescPath(t *testing.T) {
	t.Run("deliver", func(t *testing.T) {
		dev, cs := engTestDevice(t, Config{Manual: true})
		e := dev.Engine(0)
		var c completions
		hdr, payload := engTestPattern(40, 1), engTestPattern(256, 2)
		odd := engTestPattern(9, 3) // 40+9: a pad descriptor, three descriptors: gather
		for i, parts := range [][][]byte{{hdr, payload}, {hdr, odd}, {hdr, payload, hdr}} {
			var tx TxReq
			n := 0
			for _, p := range parts {
				n += len(p)
			}
			require.NoError(t, tx.Init(0, n, &c))
			for _, p := range parts {
				require.NoError(t, tx.AddKVAddr(dev, p))
			}
			require.NoError(t, e.Send(nil, &tx, false))
			got, err := e.Process()
			require.NoError(t, err)
			assert.Equal(t, 1, got)
			var want []byte
			for _, p := range parts {
				want = append(want, p...)
			}
			assert.Equal(t, padded(want), cs.Packets(0)[i], "packet %d", i)
			st, ok := c.status(&tx)
			assert.True(t, ok)
			assert.Equal(t, StatusOK, st)
		}
	})
	for _, tc := range []struct {
		name    string
		badAt   int  // which descriptor is unmapped
		gather  bool // a zero-length descriptor first: gather reads the packet
		wantIdx int  // the halt's index, relative to the packet's start
	}{
		{"straight/first", 0, false, 0},
		{"straight/second", 1, false, 1},
		{"gather/second", 1, true, 2},
	} {
		t.Run("fault/"+tc.name, func(t *testing.T) {
			r := newHaltRig(t, 64)
			buf := make([]byte, 16)
			a, err := r.dev.Mapper().MapSingle(buf, dma.ToDevice)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, r.dev.Mapper().UnmapSingle(a, len(buf), dma.ToDevice)) })
			addrs := []uint64{uint64(a), uint64(a) + 8}
			addrs[tc.badAt] = 0x7000_0000 // never mapped
			var ds []desc.Desc
			if tc.gather {
				ds = append(ds, rawDesc(0, 0, true, false))
			}
			ds = append(ds, rawDesc(addrs[0], 8, !tc.gather, false), rawDesc(addrs[1], 8, false, true))
			start, err := r.e.ring.Enqueue(ds, 0)
			require.NoError(t, err)
			h := r.finish(t, CauseMemRead)
			assert.Equal(t, start+uint64(tc.wantIdx), h.Index)
			assert.Equal(t, ds[tc.wantIdx].Addr(), h.Desc.Addr())
			assert.ErrorIs(t, h, dma.ErrFault)
		})
	}
}
