package sdma

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
)

func TestAHGAllocExhaustAndFree(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true})
	e := dev.Engine(0)
	for i := 0; i <= MaxAHGEntry; i++ {
		got, err := e.AHGAlloc()
		require.NoError(t, err)
		assert.Equal(t, i, got, "ffz order")
	}
	assert.Equal(t, 32, e.AHGInUse())
	_, err := e.AHGAlloc()
	assert.ErrorIs(t, err, ErrBusy, "33rd entry")
	require.NoError(t, e.AHGFree(7))
	got, err := e.AHGAlloc()
	require.NoError(t, err)
	assert.Equal(t, 7, got, "the freed entry comes back")
	for i := 0; i <= MaxAHGEntry; i++ {
		require.NoError(t, e.AHGFree(i))
	}
	assert.Zero(t, e.AHGInUse())
	for _, bad := range []int{-1, 32, 3} { // out of range, out of range, not allocated
		err := e.AHGFree(bad)
		assert.ErrorIs(t, err, ErrInvalid, "free %d", bad)
	}
	assert.Zero(t, e.AHGInUse(), "a refused free changes nothing")
}

// TestAHGAllocConcurrent: goroutines allocate and free entries; no entry is ever held by two at
// once (each holder marks its entry and checks nobody else did).
func TestAHGAllocConcurrent(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true})
	e := dev.Engine(0)
	var owner [32]sync.Mutex
	var wg sync.WaitGroup
	iters := 20000
	if testing.Short() {
		iters = 2000
	}
	for g := 0; g < 40; g++ { // more goroutines than entries: ErrBusy happens
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range iters / 40 {
				i, err := e.AHGAlloc()
				if errors.Is(err, ErrBusy) {
					continue
				}
				if !owner[i].TryLock() {
					t.Errorf("entry %d handed out twice", i)
					return
				}
				owner[i].Unlock()
				if err := e.AHGFree(i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, e.AHGInUse())
}

// TestAHG64ByteHeader: user_sdma's 64-byte header (hfi1_pkt_header) is a valid AHG header
// length: HEADER_DWS is encoded 0 and the chip reads it as 16 dwords, so an update of dword 15
// (KDETH swdata[6], the eager offset) lands.
func TestAHG64ByteHeader(t *testing.T) {
	dev, cs := engTestDevice(t, Config{Manual: true, RingSize: 64, Mapper: engTestIOMMU(t)})
	e := dev.Engine(0)
	var c completions
	hdr := engTestPattern(64, 0x11)
	payload := engTestPattern(32, 3)
	var copyTx TxReq
	require.NoError(t, copyTx.InitAHG(FlagAHGCopy, len(hdr)+len(payload), AHG{Entry: 9}, &c))
	require.NoError(t, copyTx.AddKVAddr(dev, hdr))
	require.NoError(t, copyTx.AddKVAddr(dev, payload))
	require.NoError(t, e.Send(nil, &copyTx, false))

	w, err := desc.AHGUpdate(0xbeef, 15, 16, 16)
	require.NoError(t, err)
	var tx TxReq
	require.NoError(t, tx.InitAHG(FlagUseAHG, len(payload), AHG{Entry: 9, Words: []uint32{w}, HeaderLen: 64}, &c))
	assert.Equal(t, 0, tx.Descs()[0].HeaderDWs(), "16 dwords are encoded 0")
	require.NoError(t, tx.AddKVAddr(dev, payload))
	require.NoError(t, e.Send(nil, &tx, false))
	_, err = e.Process()
	require.NoError(t, err)
	want := append([]byte(nil), hdr...)
	binary.LittleEndian.PutUint16(want[62:], 0xbeef)
	pk := cs.Packets(0)
	require.Len(t, pk, 2)
	assert.Equal(t, append(want, payload...), pk[1])
}

// TestAHGNilEngine: the kernel's sdma_ahg_alloc returns -EINVAL for a NULL engine and
// sdma_ahg_free ignores one; AHGAlloc and AHGFree on a nil *Engine panicked with a nil
// dereference. They return ErrInvalid, and AHGInUse reports 0.
func TestAHGNilEngine(t *testing.T) {
	var e *Engine
	assert.NotPanics(t, func() {
		i, err := e.AHGAlloc()
		assert.ErrorIs(t, err, ErrInvalid)
		assert.Equal(t, -1, i)
		assert.ErrorIs(t, e.AHGFree(0), ErrInvalid)
		assert.Zero(t, e.AHGInUse())
	})
}
