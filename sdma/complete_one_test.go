package sdma

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// TestCompleteOneSoleInline covers the completion pass of one txreq (progressPass), which cleans
// a packet of one sole kvaddr mapping without clean's call: each packet below is sent alone on a
// Manual engine and completed by its Process (the idle interrupt's pass), then by Poll on an
// engine in CompletePoll mode. After each: the packet's own mapping undone once and nothing
// else (the mapper's live count back, Counting's unmaps), no unmap error, the txreq free with no
// descriptor and no mapping counted, its callback run after the clean, its iowait (from the
// second round) dropped and drained once. The shapes beside the inline one take clean: a daddr
// packet after the kvaddr one (nothing mapped), a kvaddr packet on a mapper that is no
// SoleMapper (no handle), a packet padded to a dword (two descriptors), an AHG head (which leaves
// slot 0's handle of the packet before as it was) and a kvaddr payload, and a packet of
// registered memory (nothing mapped).
func TestCompleteOneSoleInline(t *testing.T) {
	for _, mode := range []CompletionMode{CompleteInterrupt, CompletePoll} {
		for _, mk := range []struct {
			name  string
			plain bool
		}{{"sole", false}, {"plain", true}} {
			t.Run(mode.String()+"/"+mk.name, func(t *testing.T) {
				d := dma.NewDirect()
				c := dma.NewCounting(d)
				var m dma.Mapper = c
				if mk.plain {
					m = plainOnly{c}
				}
				dev, err := NewDevice(Config{Mapper: m, Manual: true, Completion: mode})
				require.NoError(t, err)
				defer dev.Close()
				e := dev.Engine(0)
				buf := txTestPattern(4096, 5)
				daddr, err := d.MapSingle(buf[2048:2112], dma.ToDevice)
				require.NoError(t, err)
				defer d.UnmapSingle(daddr, 64, dma.ToDevice)
				base := d.LiveCount()
				var tx TxReq
				calls := 0
				cb := CompleterFunc(func(got *TxReq, st Status) {
					calls++
					assert.Same(t, &tx, got)
					assert.Equal(t, StatusOK, st)
					assert.Equal(t, txFree, got.state.Load(), "cleaned before the callback")
					assert.Zero(t, got.NumDesc(), "cleaned before the callback")
				})
				var w IOWait
				drained := 0
				w.Init(nil, nil, func(*IOWait) { drained++ })
				var wait *IOWait // the iowait of the round's sends: none, then w
				send := func(step string, wantUnmaps int) {
					t.Helper()
					before, n, nd := c.Counts().UnmapSingle, calls, drained
					require.NoError(t, e.Send(wait, &tx, false), step)
					_, err := e.Process()
					require.NoError(t, err, step)
					if mode == CompletePoll {
						require.Equal(t, 1, e.Poll(), step)
					}
					require.Equal(t, n+1, calls, "%s: the callback once", step)
					require.Nil(t, tx.wait, "%s: the iowait dropped", step)
					require.Zero(t, w.Busy(), step)
					if wait != nil {
						require.Equal(t, nd+1, drained, "%s: the iowait drained once", step)
					} else {
						require.Equal(t, nd, drained, step)
					}
					require.Equal(t, txFree, tx.state.Load(), step)
					require.Zero(t, tx.NumDesc(), step)
					require.Zero(t, tx.nmaps, "%s: no mapping left to count", step)
					require.Equal(t, wantUnmaps, c.Counts().UnmapSingle-before, "%s: unmaps", step)
					require.Equal(t, base, d.LiveCount(), "%s: live mappings", step)
					require.Zero(t, dev.UnmapErrors(), step)
					require.Zero(t, c.Counts().Errors, step)
				}
				for round := range 3 {
					if round > 0 {
						wait = &w
					}
					require.NoError(t, tx.Init(0, 256, cb))
					require.NoError(t, tx.AddKVAddr(dev, buf[:256]))
					if !mk.plain {
						require.NotZero(t, tx.soles[0], "a sole mapping")
					}
					send("kvaddr", 1)

					require.NoError(t, tx.Init(0, 64, cb))
					require.NoError(t, tx.AddDAddr(dev, daddr, 64))
					send("daddr after kvaddr", 0)

					require.NoError(t, tx.Init(0, 62, cb))
					require.NoError(t, tx.AddKVAddr(dev, buf[512:574]))
					require.Equal(t, 2, tx.NumDesc(), "the pad descriptor")
					send("padded kvaddr", 1)

					// An AHG header stored (a packet of one descriptor, the inline case), then
					// applied: the head left slot 0's handle as it was (a hint), and the packet's
					// one mapping is its second descriptor's.
					require.NoError(t, tx.InitAHG(FlagAHGCopy, 64, AHG{Entry: 3}, cb))
					require.NoError(t, tx.AddKVAddr(dev, buf[:64]))
					send("AHG copy", 1)
					w, err := desc.AHGUpdate(0x1234, 1, 0, 16)
					require.NoError(t, err)
					require.NoError(t, tx.InitAHG(FlagUseAHG, 64, AHG{Entry: 3, Words: []uint32{w}, HeaderLen: 16}, cb))
					require.NoError(t, tx.AddKVAddr(dev, buf[64:128]))
					require.Equal(t, 2, tx.NumDesc(), "the AHG head and the payload")
					if !mk.plain {
						require.NotZero(t, tx.soles[0], "the head's slot: the earlier packet's handle")
					}
					send("AHG update", 1)

					if !mk.plain && round == 0 {
						reg, err := dev.Register(buf[1024:2048])
						require.NoError(t, err)
						base++ // the registration's
						require.NoError(t, tx.Init(0, 128, cb))
						require.NoError(t, tx.AddKVAddr(dev, buf[1024:1152]))
						send("registered", 0)
						require.NoError(t, dev.Deregister(t.Context(), reg))
						base--
					}
				}
			})
		}
	}
}
