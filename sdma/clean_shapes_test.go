package sdma

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
)

// userDirect is a user's SoleMapper: it embeds *dma.Direct and overrides MapSingleSole
// (NewDevice puts it behind hintless).
type userDirect struct{ *dma.Direct }

func (u userDirect) MapSingleSole(buf []byte, dir dma.Direction) (dma.Addr, dma.Sole, error) {
	return u.Direct.MapSingleSole(buf, dir)
}

// plainOnly is a user's mapper that is no SoleMapper.
type plainOnly struct{ dma.Mapper }

// TestCleanShapesUnmapOnce builds txreqs of many shapes (one descriptor or a few, sole kvaddr,
// page, daddr, registered, AHG heads, failed adds, Clean twice, reuse across devices) on
// mappers of every kind, with a fault injector failing chosen maps, and checks after each that
// the mapper holds exactly the mappings it held before (each mapping the adds made undone once,
// nothing else unmapped) and that no unmap failed.
func TestCleanShapesUnmapOnce(t *testing.T) {
	type mk struct {
		name string
		new  func(t *testing.T) (m dma.Mapper, live func() int, fi *dma.FaultInjector)
	}
	mks := []mk{
		{"direct", func(*testing.T) (dma.Mapper, func() int, *dma.FaultInjector) {
			d := dma.NewDirect()
			fi := dma.NewFaultInjector(dma.NewCounting(d))
			return fi, d.LiveCount, fi
		}},
		{"direct-bare", func(*testing.T) (dma.Mapper, func() int, *dma.FaultInjector) {
			d := dma.NewDirect()
			return d, d.LiveCount, nil
		}},
		{"iommu", func(t *testing.T) (dma.Mapper, func() int, *dma.FaultInjector) {
			m, err := dma.NewIOMMU(dma.IOMMUConfig{})
			require.NoError(t, err)
			fi := dma.NewFaultInjector(m)
			return fi, m.LiveCount, fi
		}},
		{"iommu-bare", func(t *testing.T) (dma.Mapper, func() int, *dma.FaultInjector) {
			m, err := dma.NewIOMMU(dma.IOMMUConfig{})
			require.NoError(t, err)
			return m, m.LiveCount, nil
		}},
		{"user-sole", func(*testing.T) (dma.Mapper, func() int, *dma.FaultInjector) {
			d := dma.NewDirect()
			return userDirect{d}, d.LiveCount, nil
		}},
		{"user-plain", func(*testing.T) (dma.Mapper, func() int, *dma.FaultInjector) {
			d := dma.NewDirect()
			return plainOnly{d}, d.LiveCount, nil
		}},
	}
	for _, a := range mks {
		for _, b := range mks {
			t.Run(a.name+"/"+b.name, func(t *testing.T) {
				ma, liveA, fiA := a.new(t)
				mb, liveB, _ := b.new(t)
				devA, err := NewDevice(Config{Mapper: ma, Manual: true})
				require.NoError(t, err)
				defer devA.Close()
				devB, err := NewDevice(Config{Mapper: mb, Manual: true})
				require.NoError(t, err)
				defer devB.Close()
				baseA, baseB := liveA(), liveB()
				buf := txTestPattern(8192, 3)
				region, err := dma.AllocPages(2)
				require.NoError(t, err)
				defer region.Close()
				page, err := region.Page(0)
				require.NoError(t, err)
				daddr, err := devA.Mapper().MapSingle(buf[6000:6100], dma.ToDevice)
				require.NoError(t, err)
				defer devA.Mapper().UnmapSingle(daddr, 100, dma.ToDevice)
				baseA++
				w := uint32(0x1234)
				var tx TxReq
				check := func(step string) {
					t.Helper()
					require.Equal(t, baseA, liveA(), "%s: device A's live mappings", step)
					require.Equal(t, baseB, liveB(), "%s: device B's live mappings", step)
					require.Zero(t, devA.UnmapErrors(), step)
					require.Zero(t, devB.UnmapErrors(), step)
				}
				send := func(dev *Device) {
					t.Helper()
					require.NoError(t, dev.Engine(0).Send(nil, &tx, false))
					_, err := dev.Engine(0).Process()
					require.NoError(t, err)
					dev.Engine(0).Poll()
					require.Equal(t, int32(txFree), int32(tx.state.Load()), "completed")
				}
				for round := range 3 {
					// one sole kvaddr descriptor: Clean, then Send.
					require.NoError(t, tx.Init(0, 64, nil))
					require.NoError(t, tx.AddKVAddr(devA, buf[:64]))
					require.NoError(t, tx.Clean())
					require.NoError(t, tx.Clean())
					check("kv Clean")
					require.NoError(t, tx.Init(0, 64, nil))
					require.NoError(t, tx.AddKVAddr(devA, buf[:64]))
					send(devA)
					check("kv Send")
					// kvaddr then a failed add of each kind.
					require.NoError(t, tx.Init(0, 100, nil))
					require.NoError(t, tx.AddKVAddr(devA, buf[:48]))
					require.Error(t, tx.AddKVAddr(devA, buf[:200]))
					check("kv then too long")
					require.NoError(t, tx.Init(0, 100, nil))
					require.NoError(t, tx.AddKVAddr(devA, buf[:48]))
					require.Error(t, tx.AddDAddr(devA, dma.Addr(1)<<50, 4))
					check("kv then bad daddr")
					require.NoError(t, tx.Init(0, 100, nil))
					require.NoError(t, tx.AddKVAddr(devA, buf[:48]))
					require.Error(t, tx.AddPage(devA, dma.Page{}, 0, 4))
					check("kv then bad page")
					require.NoError(t, tx.Init(0, 100, nil))
					require.NoError(t, tx.AddKVAddr(devA, buf[:48]))
					require.Error(t, tx.AddKVAddr(devB, buf[:4]))
					check("kv then other device")
					if fiA != nil {
						require.NoError(t, tx.Init(0, 100, nil))
						require.NoError(t, tx.AddKVAddr(devA, buf[:48]))
						fiA.FailNth(1)
						require.Error(t, tx.AddKVAddr(devA, buf[64:68]))
						check("kv then failed map")
						require.NoError(t, tx.Init(0, 100, nil))
						fiA.FailNth(1)
						require.Error(t, tx.AddKVAddr(devA, buf[:48]))
						check("failed first map")
						require.NoError(t, tx.Init(0, 100, nil))
						require.NoError(t, tx.AddPage(devA, page, 0, 48))
						fiA.FailNth(1)
						require.Error(t, tx.AddKVAddr(devA, buf[64:68]))
						check("page then failed map")
					}
					// page, daddr, bytes across a page, 3 bytes (a pad after).
					require.NoError(t, tx.Init(0, 64, nil))
					require.NoError(t, tx.AddPage(devA, page, 100, 64))
					require.NoError(t, tx.Clean())
					check("page")
					require.NoError(t, tx.Init(0, 100, nil))
					require.NoError(t, tx.AddDAddr(devA, daddr, 100))
					send(devA)
					check("daddr")
					require.NoError(t, tx.Init(0, 64, nil))
					require.NoError(t, tx.AddBytes(devA, buf[4096-32:4096+32]))
					send(devA)
					check("bytes across a page")
					require.NoError(t, tx.Init(0, 3, nil))
					require.NoError(t, tx.AddKVAddr(devA, buf[:3]))
					send(devA)
					check("three bytes")
					require.NoError(t, tx.Init(0, 67, nil))
					require.NoError(t, tx.AddKVAddr(devA, buf[:67]))
					require.NoError(t, tx.Clean())
					check("pad, Clean")
					// AHG heads (entry 1 stored first).
					require.NoError(t, tx.InitAHG(FlagAHGCopy, 64, AHG{Entry: 1}, nil))
					require.NoError(t, tx.AddKVAddr(devA, buf[:64]))
					send(devA)
					check("AHG copy")
					for _, n := range []int{1, 3, 7} {
						ws := make([]uint32, n)
						for i := range ws {
							ws[i] = w
						}
						require.NoError(t, tx.InitAHG(FlagUseAHG, 64, AHG{Entry: 1, Words: ws, HeaderLen: 16}, nil))
						require.NoError(t, tx.AddKVAddr(devA, buf[:64]))
						send(devA)
						check("AHG head and kv")
						require.NoError(t, tx.InitAHG(FlagUseAHG, 64, AHG{Entry: 1, Words: ws, HeaderLen: 16}, nil))
						require.NoError(t, tx.AddKVAddr(devA, buf[:32]))
						require.NoError(t, tx.Clean())
						check("AHG head and partial kv")
					}
					// The txreq to the other device and back.
					require.NoError(t, tx.Init(0, 64, nil))
					require.NoError(t, tx.AddKVAddr(devB, buf[:64]))
					send(devB)
					check("device B")
					require.NoError(t, tx.Init(0, 64, nil))
					require.NoError(t, tx.AddKVAddr(devB, buf[:64]))
					require.NoError(t, tx.Clean())
					check("device B Clean")
					// Registered memory, one descriptor.
					if round == 1 {
						reg, err := devA.Register(buf[:4096])
						if err == nil {
							require.NoError(t, tx.Init(0, 64, nil))
							require.NoError(t, tx.AddKVAddr(devA, buf[:64]))
							require.Zero(t, tx.nmaps)
							send(devA)
							require.NoError(t, tx.Init(0, 64, nil))
							require.NoError(t, tx.AddKVAddr(devA, buf[:64]))
							require.NoError(t, tx.Clean())
							require.NoError(t, devA.Deregister(t.Context(), reg))
							check("registered")
						}
					}
				}
			})
		}
	}
}
