package sdma

import (
	"context"
	"testing"
	"time"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRegistryPathAdds: on a mapper that gives its Registry (Direct and the IOMMU, unwrapped:
// the path of Registry.Find, which the counted mappers of the other registration tests do not
// take), adds from registered memory make MapNone descriptors and adds from other memory map;
// with several registrations (the snapshot's search) each is found, a packet holds at most
// maxTxRegs of them and maps a fragment of a further one; once Deregister has begun, the
// packet that holds the registration adds from it with no mapping and another txreq maps; every
// packet arrives whole, Deregister returns once the holder completed, and the memory is mapped per
// add afterwards.
func TestRegistryPathAdds(t *testing.T) {
	for _, m := range []struct {
		name string
		make func(t *testing.T) dma.Mapper
	}{
		{"direct", func(*testing.T) dma.Mapper { return dma.NewDirect() }},
		{"iommu", func(t *testing.T) dma.Mapper { return engTestIOMMU(t) }},
	} {
		t.Run("mapper="+m.name, func(t *testing.T) {
			dev, cs := engTestDevice(t, Config{Manual: true, Mapper: m.make(t)})
			require.NotNil(t, dev.registry, "the mapper gives its Registry")
			e := dev.Engine(0)
			mems := [3][]byte{txTestPattern(512, 1), txTestPattern(512, 2), txTestPattern(512, 3)}
			heap := txTestPattern(64, 4)
			var regs [3]*dma.Registration
			types := func(tx *TxReq) (ts []desc.MapType) {
				for _, d := range tx.Descs() {
					ts = append(ts, d.MapType())
				}
				return ts
			}
			send := func(tx *TxReq, want []byte) {
				t.Helper()
				require.NoError(t, e.Send(nil, tx, false))
				_, err := e.Process()
				require.NoError(t, err)
				e.Poll()
				pkts := cs.Packets(0)
				require.NotEmpty(t, pkts)
				require.Equal(t, want, pkts[len(pkts)-1])
				require.Equal(t, CauseNone, haltCauseOf(e), "no halt")
			}

			// One registration: the snapshot's case without a search.
			var err error
			regs[0], err = dev.Register(mems[0])
			require.NoError(t, err)
			var tx TxReq
			require.NoError(t, tx.Init(0, 128+64, nil))
			require.NoError(t, tx.AddKVAddr(dev, mems[0][:128]))
			require.NoError(t, tx.AddKVAddr(dev, heap))
			assert.Equal(t, []desc.MapType{desc.MapNone, desc.MapSingle}, types(&tx))
			send(&tx, append(append([]byte(nil), mems[0][:128]...), heap...))

			// Three registrations: the search; a packet holds two, the third one's fragment maps.
			for i := 1; i < 3; i++ {
				regs[i], err = dev.Register(mems[i])
				require.NoError(t, err)
			}
			require.NoError(t, tx.Init(0, 4*64, nil))
			require.NoError(t, tx.AddKVAddr(dev, mems[2][448:512])) // a registration's last bytes
			require.NoError(t, tx.AddKVAddr(dev, mems[0][0:64]))    // and another's first
			require.NoError(t, tx.AddKVAddr(dev, mems[1][64:128]))  // a third: mapped
			require.NoError(t, tx.AddKVAddr(dev, mems[2][0:64]))    // the first one again: held
			assert.Equal(t, []desc.MapType{desc.MapNone, desc.MapNone, desc.MapSingle, desc.MapNone}, types(&tx))
			assert.Equal(t, uint8(2), tx.nregs)
			var want []byte
			for _, b := range [][]byte{mems[2][448:512], mems[0][0:64], mems[1][64:128], mems[2][0:64]} {
				want = append(want, b...)
			}
			send(&tx, want)

			// A registration being deregistered: its holder adds without a mapping, another
			// txreq maps; Deregister waits for the holder.
			require.NoError(t, tx.Init(0, 128, nil))
			require.NoError(t, tx.AddKVAddr(dev, mems[1][:64]))
			done := make(chan error, 1)
			go func() { done <- dev.Deregister(context.Background(), regs[1]) }()
			require.Eventually(t, func() bool { return !regs[1].Live() }, time.Minute, time.Millisecond, "a hang guard: Deregister never began")
			require.NoError(t, tx.AddKVAddr(dev, mems[1][64:128]))
			assert.Equal(t, []desc.MapType{desc.MapNone, desc.MapNone}, types(&tx), "the held registration")
			var other TxReq
			require.NoError(t, other.Init(0, 64, nil))
			require.NoError(t, other.AddKVAddr(dev, mems[1][128:192]))
			assert.Equal(t, []desc.MapType{desc.MapSingle}, types(&other), "memory being deregistered, not held: mapped")
			require.NoError(t, other.Clean())
			select {
			case err := <-done:
				t.Fatalf("Deregister returned %v while a txreq holds a use", err)
			case <-time.After(5 * time.Millisecond):
			}
			send(&tx, mems[1][:128])
			require.NoError(t, <-done)

			require.NoError(t, tx.Init(0, 64, nil))
			require.NoError(t, tx.AddKVAddr(dev, mems[1][:64]))
			assert.Equal(t, []desc.MapType{desc.MapSingle}, types(&tx), "deregistered: mapped per add")
			send(&tx, mems[1][:64])
			for _, r := range []*dma.Registration{regs[0], regs[2]} {
				require.NoError(t, dev.Deregister(context.Background(), r))
			}
			assert.Zero(t, dev.UnmapErrors())
		})
	}
}
