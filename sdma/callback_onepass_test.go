package sdma_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestCallbackPanicOneTxreqPass: on a Manual engine, a pass that completes one txreq (the
// one-packet completion that the interrupt or Poll runs without walking a batch) and whose
// callback panics is still a whole pass: the panic is recovered and recorded, Process and Poll
// return, the head seqcount's write section is closed (HeadSeq moves by 2 per pass: an unclosed
// section would read the old value), the txreq's iowait busy count drops (the drained callback
// runs and Drain returns), its mapping is undone, and the next packet goes through. Both
// completion modes: the pass runs in Process's interrupt (CompleteInterrupt) or in Poll.
func TestCallbackPanicOneTxreqPass(t *testing.T) {
	for _, mode := range []sdma.CompletionMode{sdma.CompleteInterrupt, sdma.CompletePoll} {
		t.Run("completion="+mode.String(), func(t *testing.T) {
			iommu := promIOMMU(t)
			sink := &sdmatest.DiscardSink{}
			dev, err := sdma.NewDevice(sdma.Config{Mapper: iommu, Manual: true, Completion: mode, Sink: sink})
			require.NoError(t, err)
			defer dev.Close()
			e := dev.Engine(0)
			live := iommu.LiveCount() // the device's own mappings
			buf := make([]byte, 64)
			var drained atomic.Int32
			var w sdma.IOWait
			w.Init(nil, nil, func(*sdma.IOWait) { drained.Add(1) })

			// pass runs the packet's hardware pass and, in CompletePoll mode, the completion
			// pass, and reports whether either let a panic escape.
			pass := func() (escaped any) {
				defer func() { escaped = recover() }()
				_, err := e.Process()
				require.NoError(t, err)
				if mode == sdma.CompletePoll {
					e.Poll()
				}
				return nil
			}
			const rounds = 5
			var calls atomic.Int32
			var tx sdma.TxReq
			for i := range rounds {
				seq := e.HeadSeq()
				require.NoError(t, tx.Init(0, len(buf), sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) {
					calls.Add(1)
					panic("completion callback panics")
				})))
				require.NoError(t, tx.AddKVAddr(dev, buf))
				require.NoError(t, e.Send(&w, &tx, false))
				require.Nil(t, pass(), "round %d: the callback's panic escaped", i)
				require.EqualValues(t, i+1, calls.Load(), "round %d: the callback ran once", i)
				require.Equal(t, seq+2, e.HeadSeq(), "round %d: the pass closed its write section", i)
				require.Equal(t, live, iommu.LiveCount(), "round %d: the txreq's mapping is undone", i)
				require.EqualValues(t, i+1, drained.Load(), "round %d: the busy count dropped to 0", i)
				var ce *sdma.CallbackError
				require.True(t, errors.As(e.CallbackError(), &ce), "round %d: the panic is recorded", i)
				assert.Equal(t, "completion callback panics", ce.Panic)
			}
			ctx, cancel := context.WithTimeout(context.Background(), promHangGuard)
			defer cancel()
			require.NoError(t, w.Drain(ctx))
			assert.EqualValues(t, rounds, e.Stats().CallbackPanics)

			// The next packet, with a callback that returns, completes as usual.
			var ok atomic.Int32
			require.NoError(t, tx.Init(0, len(buf), sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) {
				if st == sdma.StatusOK {
					ok.Add(1)
				}
			})))
			require.NoError(t, tx.AddKVAddr(dev, buf))
			require.NoError(t, e.Send(nil, &tx, false))
			require.Nil(t, pass())
			assert.EqualValues(t, 1, ok.Load())
			assert.EqualValues(t, rounds+1, sink.Packets())
			assert.Equal(t, live, iommu.LiveCount())
		})
	}
}
