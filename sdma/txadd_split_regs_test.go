package sdma

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// TestAddBytesRegisteredUnusable: AddBytes cuts registered memory only at the 16383-byte count
// because it adds it unmapped; registered memory that the txreq cannot use that way (a third
// registration, past the two a txreq holds, or one that does not let the device read) is mapped
// like any memory, and then must be split at page boundaries as the doc promises. It was added
// as one MapSingle descriptor of 8200 bytes across page boundaries: with three registrations
// (a header and two scatter-gather entries from three memory regions) the third came out so.
func TestAddBytesRegisteredUnusable(t *testing.T) {
	m := engTestIOMMU(t)
	dev, cs := engTestDevice(t, Config{Manual: true, Mapper: m})
	e := dev.Engine(0)
	bufs := make([][]byte, 4)
	regs := make([]*dma.Registration, 4)
	for i := range bufs {
		bufs[i] = engTestPattern(3*dma.PageSize, byte(i))
		dir := dma.ToDevice
		if i == 3 {
			dir = dma.FromDevice // registered, but not for the device to read
		}
		r, err := m.Register(bufs[i], dir)
		require.NoError(t, err)
		regs[i] = r
	}
	defer func() {
		for _, r := range regs {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			require.NoError(t, dev.Deregister(ctx, r))
			cancel()
		}
	}()
	base := m.LiveCount()

	for _, last := range []int{2, 3} {
		var tx TxReq
		payload := bufs[last][100:8300] // crosses at least one page boundary of its address
		pages := int((addrOf(payload)+uintptr(len(payload))-1)/dma.PageSize - addrOf(payload)/dma.PageSize + 1)
		require.NoError(t, tx.Init(0, 16+len(payload), nil))
		require.NoError(t, tx.AddBytes(dev, bufs[0][:8]))
		require.NoError(t, tx.AddBytes(dev, bufs[1][:8]))
		require.NoError(t, tx.AddBytes(dev, payload))
		ds := tx.Descs()
		assert.Equal(t, desc.MapNone, ds[0].MapType(), "the header: registered, unmapped")
		assert.Equal(t, desc.MapNone, ds[1].MapType())
		a := addrOf(payload)
		for i, d := range ds[2:] {
			assert.Equal(t, desc.MapSingle, d.MapType(), "payload piece %d: mapped", i)
			assert.Equal(t, a/dma.PageSize, (a+uintptr(d.Len())-1)/dma.PageSize, "payload piece %d of %d bytes crosses a page", i, d.Len())
			a += uintptr(d.Len())
		}
		assert.Len(t, ds, 2+pages, "registration %d: the payload in its %d page pieces", last, pages)
		cs.Reset()
		require.NoError(t, e.Send(nil, &tx, false))
		_, err := e.Process()
		require.NoError(t, err)
		e.Poll()
		want := append(append(append([]byte(nil), bufs[0][:8]...), bufs[1][:8]...), payload...)
		assert.Equal(t, [][]byte{want}, cs.Packets(0))
		assert.Equal(t, base, m.LiveCount(), "mappings left: %v", m.Live())
	}
	// One registration the txreq can use: unmapped, cut only at the byte count.
	var tx TxReq
	require.NoError(t, tx.Init(0, 8200, nil))
	require.NoError(t, tx.AddBytes(dev, bufs[2][100:8300]))
	require.Len(t, tx.Descs(), 1)
	assert.Equal(t, desc.MapNone, tx.Descs()[0].MapType())
	require.NoError(t, tx.Clean())
}
