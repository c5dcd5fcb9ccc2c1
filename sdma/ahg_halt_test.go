package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
)

// TestHaltAHGBadUseOfEntry: packets built through the API that misuse an AHG entry halt the
// engine with the recorded cause, at the packet's first descriptor: a header longer than the
// COPY stored (CauseHeaderLength), an update of a dword past the header (CauseHeaderAddress).
// The packets before complete OK, the bad one and the ones after aborted; the engine recovers.
func TestHaltAHGBadUseOfEntry(t *testing.T) {
	for _, c := range []struct {
		name  string
		hlen  int
		dw    uint8
		cause HaltCause
	}{
		{"header longer than the entry", 16, 0, CauseHeaderLength},
		{"update past the header", 8, 2, CauseHeaderAddress},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev, cs := engTestDevice(t, Config{Manual: true, RingSize: 64, Mapper: engTestIOMMU(t)})
			e := dev.Engine(0)
			var cc completions
			var copyTx TxReq
			hdr := engTestPattern(8, 0x10)
			require.NoError(t, copyTx.InitAHG(FlagAHGCopy, 12, AHG{Entry: 3}, &cc))
			require.NoError(t, copyTx.AddKVAddr(dev, hdr))
			require.NoError(t, copyTx.AddKVAddr(dev, engTestPattern(4, 1)))
			require.NoError(t, e.Send(nil, &copyTx, false))

			w, err := desc.AHGUpdate(0x1234, c.dw, 0, 16)
			require.NoError(t, err)
			var bad, after TxReq
			require.NoError(t, bad.InitAHG(FlagUseAHG, 4, AHG{Entry: 3, Words: []uint32{w}, HeaderLen: c.hlen}, &cc))
			require.NoError(t, bad.AddKVAddr(dev, engTestPattern(4, 2)))
			badD0 := bad.Descs()[0]
			require.NoError(t, e.Send(nil, &bad, false))
			badAt := e.ring.Tail() - uint64(bad.NumDesc())
			engTestBuild(t, dev, &after, 0, engTestPattern(8, 3), &cc)
			require.NoError(t, e.Send(nil, &after, false))

			n, err := e.Process()
			var h *HaltError
			require.ErrorAs(t, err, &h)
			assert.Equal(t, c.cause, h.Cause, "%v", err)
			assert.Equal(t, badAt, h.Index)
			assert.Equal(t, badD0.Qw0, h.Desc.Qw0)
			assert.Equal(t, 1, n)
			assert.Equal(t, 1, cs.Count())
			for tx, want := range map[*TxReq]Status{&copyTx: StatusOK, &bad: StatusAborted, &after: StatusAborted} {
				st, ok := cc.status(tx)
				assert.True(t, ok && st == want, "%v %v, want %v", st, ok, want)
			}
			assert.EqualValues(t, 1, e.Stats().Halts[c.cause])
			assertHaltPath(t, e, c.cause.String())
			require.NoError(t, dev.Close())
		})
	}
}
