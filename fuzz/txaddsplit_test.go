package fuzz

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
)

// Memory targets of FuzzTxAddSplit.
const (
	splitHeapBytes   = iota // AddBytes of Go heap memory (any alignment)
	splitRegionBytes        // AddBytes of page-backed memory
	splitRegionPages        // AddPages
	splitRegistered         // AddBytes of page-backed memory registered with the device
	numSplitTargets
)

// FuzzTxAddSplit runs the splitting adds alone, over offsets and lengths around page and
// 16383-byte boundaries, after `prefix` one-byte adds (so that pieces also land in the extended
// array and the coalesce buffer). Every piece must stay inside one page and the device must read
// back exactly the bytes given.
func FuzzTxAddSplit(f *testing.F) {
	f.Add(uint8(splitHeapBytes), uint32(4095), uint16(2), uint8(0))
	f.Fuzz(func(t *testing.T, target uint8, off uint32, n uint16, prefix uint8) {
		e := newEnv(t)
		tgt := int(target) % numSplitTargets
		length := int(n) % (desc.MaxPktSize + 1)
		pre := int(prefix) % 80
		if length == 0 {
			length = 1
		}
		if pre+length > desc.MaxPktSize {
			pre = desc.MaxPktSize - length
		}

		var mem []byte
		o := int(off)
		switch tgt {
		case splitHeapBytes:
			mem = make([]byte, 5*dma.PageSize+desc.MaxPktSize)
			fill(mem, byte(off))
			o %= 5 * dma.PageSize
		case splitRegistered:
			reg, err := e.dev.Register(e.region.Bytes())
			require.NoError(t, err)
			t.Cleanup(func() { // bounded: a failed check leaves tx holding the registration
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				require.NoError(t, e.dev.Deregister(ctx, reg))
			})
			e.base = e.iommu.LiveCount() // the registration stays live until the cleanup
			fallthrough
		case splitRegionBytes:
			mem = e.region.Bytes()
			o %= regionSize - desc.MaxPktSize
		case splitRegionPages:
			mem = e.region.Bytes()
			o %= regionSize + 1 // may run past the region's end: ErrInvalid
		}

		var tx sdma.TxReq
		require.NoError(t, tx.Init(0, pre+length, nil))
		for i := range pre {
			require.NoError(t, tx.AddKVAddr(e.dev, e.heap[i:i+1]))
		}
		var err error
		if tgt == splitRegionPages {
			err = tx.AddPages(e.dev, e.region, o, length)
		} else {
			err = tx.AddBytes(e.dev, mem[o:o+length])
		}
		if o+length > len(mem) {
			require.ErrorIs(t, err, sdma.ErrInvalid)
			require.Equal(t, 0, tx.NumDesc())
			e.balanced(t)
			return
		}
		require.NoError(t, err)
		require.Equal(t, 0, tx.Remaining())

		ds := tx.Descs()
		require.LessOrEqual(t, len(ds), desc.MaxDesc)
		var got []byte
		sum := 0
		for i, d := range ds {
			require.Equal(t, i == 0, d.First())
			require.Equal(t, i == len(ds)-1, d.Last())
			require.GreaterOrEqual(t, d.Len(), 1)
			require.LessOrEqual(t, d.Len(), desc.MaxByteCount)
			b, err := e.iommu.Translate(dma.Addr(d.Addr()), d.Len(), dma.ToDevice)
			require.NoError(t, err)
			sum += d.Len()
			got = append(got, b...)
			// The split add's own pieces: after the one-byte prefix, before index 63 (which only ever
			// holds the coalesce buffer or the pad).
			if i >= pre && i < desc.MaxDesc-1 && d.MapType() != desc.MapNone {
				require.LessOrEqual(t, d.Len(), dma.PageSize)
				a := addrOf(b)
				require.Equal(t, a/dma.PageSize, (a+uintptr(len(b))-1)/dma.PageSize, "desc %d crosses a page", i)
				// Every piece but the add's last ends on a page boundary: the add splits where it
				// must and nowhere else.
				if sum < pre+length {
					require.Zero(t, (a+uintptr(len(b)))%dma.PageSize, "desc %d split before the page's end", i)
				}
			}
		}
		want := append(append([]byte(nil), e.heap[:pre]...), mem[o:o+length]...)
		for len(want)%4 != 0 {
			want = append(want, 0)
		}
		if tgt == splitRegistered && pre < desc.MaxDesc-1 {
			// Registered memory is not split at pages (and length <= MaxByteCount): one
			// descriptor, no mapping.
			require.Equal(t, desc.MapNone, ds[pre].MapType())
			require.Equal(t, length, ds[pre].Len())
		}
		require.Equal(t, (pre+length+3)&^3, sum)
		require.Equal(t, want, got)

		require.NoError(t, tx.Clean())
		e.balanced(t)
	})
}
