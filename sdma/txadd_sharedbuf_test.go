package sdma

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
)

// TestSharedBufDirect is the end-to-end form of dma's shared-buffer regression tests: every
// packet in flight maps the two halves of the same buffer with the Direct mapper while the
// completion goroutine unmaps the earlier packets' identical mappings. A map call used to read
// its record after publishing it, so an unmap could claim and recycle it first and the
// descriptor got bus address 0: the engine halted with a memory read fault ("[0x0,+2048): not
// mapped").
func TestSharedBufDirect(t *testing.T) {
	dur := time.Second
	if testing.Short() {
		dur = 200 * time.Millisecond
	}
	m := dma.NewDirect()
	dev, err := NewDevice(Config{Mapper: m})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	e := dev.Engine(0)

	buf := engTestPattern(4096, 1)
	var ok, bad atomic.Int64
	var cb CompleterFunc = func(_ *TxReq, st Status) {
		if st == StatusOK {
			ok.Add(1)
		} else {
			bad.Add(1)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur+30*time.Second)
	defer cancel()
	sent := int64(0)
	for deadline := time.Now().Add(dur); time.Now().Before(deadline) && e.HaltCause() == nil; sent++ {
		tx := new(TxReq)
		require.NoError(t, tx.Init(0, len(buf), cb))
		require.NoError(t, tx.AddKVAddr(dev, buf[:2048]))
		require.NoError(t, tx.AddKVAddr(dev, buf[2048:]))
		if err := e.SendWait(ctx, tx); errors.Is(err, ErrNotRunning) {
			break // halted: HaltCause below says why
		} else {
			require.NoError(t, err)
		}
	}
	require.NoError(t, dev.Shutdown(ctx))
	t.Logf("%d packets", sent)
	require.NoError(t, e.HaltCause())
	require.Zero(t, bad.Load(), "aborted txreqs")
	require.Equal(t, sent, ok.Load())
	require.Zero(t, m.LiveCount(), "mappings left after Shutdown: %v", m.Live())
}
