package sdma

import (
	"context"
	"github.com/gosdma/gosdma/sdma/internal/sm"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// The reliability table: bad inputs across the public API, each with the error it must get and a
// check that nothing else changed (the engine's counters, ring indices, state, the live mappings,
// the completions and the packets sent).

// badRig is a fresh manual device for one case, with one good packet already in flight.
type badRig struct {
	dev   *Device
	e     *Engine
	iommu *dma.IOMMU
	cs    *captureSink
	c     completions
	good  TxReq
}

func newBadRig(t *testing.T) *badRig {
	r := &badRig{iommu: engTestIOMMU(t)}
	r.dev, r.cs = engTestDevice(t, Config{Manual: true, RingSize: 64, Mapper: r.iommu})
	r.e = r.dev.Engine(0)
	engTestBuild(t, r.dev, &r.good, 0, engTestPattern(8, 1), &r.c)
	require.NoError(t, r.e.Send(nil, &r.good, false))
	return r
}

// world is what a refused call must leave as it was.
type world struct {
	stats       EngineStats
	tail, swH   uint64
	free        int
	state       sm.State
	live, done  int
	sent, flush int
	hist        int
}

func (r *badRig) world() world {
	r.e.flushMu.Lock()
	fl := r.e.flush.Len()
	r.e.flushMu.Unlock()
	return world{
		stats: r.e.Stats(), tail: r.e.ring.Tail(), swH: r.e.ring.SwHead(), free: r.e.DescqFreeCnt(),
		state: r.e.state(), live: len(r.iommu.Live()), done: int(r.c.n.Load()), sent: r.cs.Count(),
		flush: fl, hist: len(r.e.history()),
	}
}

func TestBadInputs(t *testing.T) {
	big := make([]byte, 64)
	cases := []struct {
		name string
		// setup prepares what the bad call needs (it may change the world); call is the bad call.
		setup func(t *testing.T, r *badRig) func() error
		want  error
	}{
		// Lengths and flags.
		{"Init tlen 0", func(_ *testing.T, r *badRig) func() error {
			return func() error { var tx TxReq; return tx.Init(0, 0, nil) }
		}, ErrNoData},
		{"Init tlen 16384", func(_ *testing.T, r *badRig) func() error {
			return func() error { var tx TxReq; return tx.Init(0, 16384, nil) }
		}, ErrMsgSize},
		{"Init unknown flag", func(_ *testing.T, r *badRig) func() error {
			return func() error { var tx TxReq; return tx.Init(0x8000, 8, nil) }
		}, ErrInvalid},
		{"Init of a txreq in flight", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.good.Init(0, 8, nil) }
		}, ErrInvalid},
		// AHG arguments.
		{"InitAHG entry 32", func(_ *testing.T, r *badRig) func() error {
			return func() error {
				var tx TxReq
				return tx.InitAHG(FlagUseAHG, 8, AHG{Entry: 32, Words: []uint32{1}, HeaderLen: 8}, nil)
			}
		}, ErrInvalid},
		{"InitAHG no words", func(_ *testing.T, r *badRig) func() error {
			return func() error { var tx TxReq; return tx.InitAHG(FlagUseAHG, 8, AHG{Entry: 1, HeaderLen: 8}, nil) }
		}, ErrInvalid},
		{"InitAHG ten words", func(_ *testing.T, r *badRig) func() error {
			return func() error {
				var tx TxReq
				return tx.InitAHG(FlagUseAHG, 8, AHG{Entry: 1, Words: make([]uint32, 10), HeaderLen: 8}, nil)
			}
		}, ErrInvalid},
		{"InitAHG header 6 bytes", func(_ *testing.T, r *badRig) func() error {
			return func() error {
				var tx TxReq
				return tx.InitAHG(FlagUseAHG, 8, AHG{Entry: 1, Words: []uint32{1}, HeaderLen: 6}, nil)
			}
		}, ErrInvalid},
		{"InitAHG header 68 bytes", func(_ *testing.T, r *badRig) func() error {
			return func() error {
				var tx TxReq
				return tx.InitAHG(FlagUseAHG, 8, AHG{Entry: 1, Words: []uint32{1}, HeaderLen: 68}, nil)
			}
		}, ErrInvalid},
		{"InitAHG words without UseAHG", func(_ *testing.T, r *badRig) func() error {
			return func() error {
				var tx TxReq
				return tx.InitAHG(0, 8, AHG{Entry: 1, Words: []uint32{1}, HeaderLen: 8}, nil)
			}
		}, ErrInvalid},
		// Adds: lengths, addresses, pages, devices.
		{"AddKVAddr empty", func(t *testing.T, r *badRig) func() error {
			var tx TxReq
			require.NoError(t, tx.Init(0, 8, nil))
			return func() error { return tx.AddKVAddr(r.dev, nil) }
		}, ErrInvalid},
		{"AddKVAddr beyond tlen", func(t *testing.T, r *badRig) func() error {
			var tx TxReq
			require.NoError(t, tx.Init(0, 8, nil))
			return func() error { return tx.AddKVAddr(r.dev, big) }
		}, ErrInvalid},
		{"AddKVAddr nil device", func(t *testing.T, r *badRig) func() error {
			var tx TxReq
			require.NoError(t, tx.Init(0, 8, nil))
			return func() error { return tx.AddKVAddr(nil, big[:8]) }
		}, ErrInvalid},
		{"AddKVAddr uninitialised", func(_ *testing.T, r *badRig) func() error {
			return func() error { var tx TxReq; return tx.AddKVAddr(r.dev, big[:8]) }
		}, ErrInvalid},
		{"AddKVAddr to a closed txreq", func(t *testing.T, r *badRig) func() error {
			// Built from a daddr, which the failed add's clean does not unmap (a failed add cleans
			// the txreq: its own mappings would go, as they should).
			var tx TxReq
			require.NoError(t, tx.Init(0, 8, nil))
			require.NoError(t, tx.AddDAddr(r.dev, dma.Addr(0x1000), 8))
			return func() error { return tx.AddKVAddr(r.dev, big[:4]) }
		}, ErrInvalid},
		{"AddKVAddr to a txreq in flight", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.good.AddKVAddr(r.dev, big[:4]) }
		}, ErrInvalid},
		{"AddDAddr over 48 bits", func(t *testing.T, r *badRig) func() error {
			var tx TxReq
			require.NoError(t, tx.Init(0, 8, nil))
			return func() error { return tx.AddDAddr(r.dev, dma.Addr(desc.MaxAddr), 8) }
		}, ErrInvalid},
		{"AddPage of a closed region", func(t *testing.T, r *badRig) func() error {
			reg, err := dma.AllocPages(1)
			require.NoError(t, err)
			p, err := reg.Page(0)
			require.NoError(t, err)
			require.NoError(t, reg.Close())
			var tx TxReq
			require.NoError(t, tx.Init(0, 8, nil))
			return func() error { return tx.AddPage(r.dev, p, 0, 8) }
		}, ErrInvalid},
		{"AddPage past the page", func(t *testing.T, r *badRig) func() error {
			reg, err := dma.AllocPages(1)
			require.NoError(t, err)
			t.Cleanup(func() { _ = reg.Close() })
			p, err := reg.Page(0)
			require.NoError(t, err)
			var tx TxReq
			require.NoError(t, tx.Init(0, 8, nil))
			return func() error { return tx.AddPage(r.dev, p, dma.PageSize-4, 8) }
		}, ErrInvalid},
		// Sends of txreqs that may not be sent.
		{"Send uninitialised", func(_ *testing.T, r *badRig) func() error {
			return func() error { var tx TxReq; return r.e.Send(nil, &tx, false) }
		}, ErrInvalid},
		{"Send unfinished", func(t *testing.T, r *badRig) func() error {
			var tx TxReq
			require.NoError(t, tx.Init(0, 16, nil))
			require.NoError(t, tx.AddKVAddr(r.dev, big[:8]))
			t.Cleanup(func() { _ = tx.Clean() })
			return func() error { return r.e.Send(nil, &tx, false) }
		}, ErrInvalid},
		{"Send already in flight", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.e.Send(nil, &r.good, false) }
		}, ErrInvalid},
		{"Send cleaned", func(t *testing.T, r *badRig) func() error {
			var tx TxReq
			engTestBuild(t, r.dev, &tx, 0, big[:8], nil)
			require.NoError(t, tx.Clean())
			return func() error { return r.e.Send(nil, &tx, false) }
		}, ErrInvalid},
		{"Send built for another device", func(t *testing.T, r *badRig) func() error {
			other, _ := engTestDevice(t, Config{Manual: true})
			var tx TxReq
			engTestBuild(t, other, &tx, 0, big[:8], nil)
			t.Cleanup(func() { _ = tx.Clean() })
			return func() error { return r.e.Send(nil, &tx, false) }
		}, ErrInvalid},
		{"SendList with an unfinished head", func(t *testing.T, r *badRig) func() error {
			var tx TxReq
			require.NoError(t, tx.Init(0, 16, nil))
			t.Cleanup(func() { _ = tx.Clean() })
			var l TxList
			l.PushBack(&tx)
			return func() error {
				n, err := r.e.SendList(nil, &l)
				if n != 0 || l.Len() != 1 {
					t.Errorf("SendList took %d, left %d", n, l.Len())
				}
				return err
			}
		}, ErrInvalid},
		{"SendWait in flight", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.e.SendWait(context.Background(), &r.good) }
		}, ErrInvalid},
		// Engine calls.
		{"Event unknown", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.e.event(sm.NumEvents, "") }
		}, ErrInvalid},
		{"InjectHalt CauseNone", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.e.injectHalt(CauseNone) }
		}, ErrInvalid},
		{"SetFaults rate 2", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.e.setFaults(faultPlan{HaltRate: 2}) }
		}, ErrInvalid},
		// Allocators: double frees and foreign objects.
		{"List double Put", func(t *testing.T, r *badRig) func() error {
			l, err := alloc.NewList[TxReq](2, nil)
			require.NoError(t, err)
			x, err := l.Get()
			require.NoError(t, err)
			require.NoError(t, l.Put(x))
			return func() error { return l.Put(x) }
		}, alloc.ErrDoublePut},
		{"List foreign Put", func(t *testing.T, r *badRig) func() error {
			l, err := alloc.NewList[TxReq](2, nil)
			require.NoError(t, err)
			return func() error { return l.Put(new(TxReq)) }
		}, alloc.ErrForeign},
		{"Slab double Put", func(t *testing.T, r *badRig) func() error {
			s, err := alloc.NewSlab(alloc.SlabConfig[TxReq]{ObjectsPerSlab: 4})
			require.NoError(t, err)
			x, err := s.Get()
			require.NoError(t, err)
			require.NoError(t, s.Put(x))
			return func() error { return s.Put(x) }
		}, alloc.ErrDoublePut},
		// More lengths, offsets and indices: negative, zero and huge values.
		{"Init tlen -1", func(_ *testing.T, r *badRig) func() error {
			return func() error { var tx TxReq; return tx.Init(0, -1, nil) }
		}, ErrInvalid},
		{"InitAHG entry -1", func(_ *testing.T, r *badRig) func() error {
			return func() error {
				var tx TxReq
				return tx.InitAHG(FlagUseAHG, 8, AHG{Entry: -1, Words: []uint32{1}, HeaderLen: 8}, nil)
			}
		}, ErrInvalid},
		{"AddDAddr length 0", func(t *testing.T, r *badRig) func() error {
			tx := badFresh(t, 8)
			return func() error { return tx.AddDAddr(r.dev, dma.Addr(0x1000), 0) }
		}, ErrInvalid},
		{"AddDAddr length -1", func(t *testing.T, r *badRig) func() error {
			tx := badFresh(t, 8)
			return func() error { return tx.AddDAddr(r.dev, dma.Addr(0x1000), -1) }
		}, ErrInvalid},
		{"AddDAddr ending past 48 bits", func(t *testing.T, r *badRig) func() error {
			tx := badFresh(t, 8)
			return func() error { return tx.AddDAddr(r.dev, dma.Addr(desc.MaxAddr-3), 8) }
		}, ErrInvalid},
		{"AddDAddr nil device", func(t *testing.T, r *badRig) func() error {
			tx := badFresh(t, 8)
			return func() error { return tx.AddDAddr(nil, dma.Addr(0x1000), 8) }
		}, ErrInvalid},
		{"AddBytes beyond tlen", func(t *testing.T, r *badRig) func() error {
			tx := badFresh(t, 8)
			return func() error { return tx.AddBytes(r.dev, big) }
		}, ErrInvalid},
		{"AddBytes nil device", func(t *testing.T, r *badRig) func() error {
			tx := badFresh(t, 8)
			return func() error { return tx.AddBytes(nil, big[:8]) }
		}, ErrInvalid},
		{"AddPage negative offset", func(t *testing.T, r *badRig) func() error {
			p := badPage(t)
			tx := badFresh(t, 8)
			return func() error { return tx.AddPage(r.dev, p, -1, 8) }
		}, ErrInvalid},
		{"AddPage length -1", func(t *testing.T, r *badRig) func() error {
			p := badPage(t)
			tx := badFresh(t, 8)
			return func() error { return tx.AddPage(r.dev, p, 0, -1) }
		}, ErrInvalid},
		{"AddPage zero Page", func(t *testing.T, r *badRig) func() error {
			tx := badFresh(t, 8)
			return func() error { return tx.AddPage(r.dev, dma.Page{}, 0, 8) }
		}, ErrInvalid},
		{"AddPages nil region", func(t *testing.T, r *badRig) func() error {
			tx := badFresh(t, 8)
			return func() error { return tx.AddPages(r.dev, nil, 0, 8) }
		}, ErrInvalid},
		{"AddPages past the region", func(t *testing.T, r *badRig) func() error {
			reg, err := dma.AllocPages(1)
			require.NoError(t, err)
			t.Cleanup(func() { _ = reg.Close() })
			tx := badFresh(t, 8)
			return func() error { return tx.AddPages(r.dev, reg, dma.PageSize-4, 8) }
		}, ErrInvalid},
		{"AddPages negative offset", func(t *testing.T, r *badRig) func() error {
			reg, err := dma.AllocPages(1)
			require.NoError(t, err)
			t.Cleanup(func() { _ = reg.Close() })
			tx := badFresh(t, 8)
			return func() error { return tx.AddPages(r.dev, reg, -1, 8) }
		}, ErrInvalid},
		// Nil txreqs, lists and iowaits.
		{"Send nil", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.e.Send(nil, nil, false) }
		}, ErrInvalid},
		{"SendList nil", func(_ *testing.T, r *badRig) func() error {
			return func() error { _, err := r.e.SendList(nil, nil); return err }
		}, ErrInvalid},
		{"SendWait nil", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.e.SendWait(context.Background(), nil) }
		}, ErrInvalid},
		{"QueueWait nil", func(_ *testing.T, r *badRig) func() error {
			return func() error { _, err := r.e.QueueWait(nil, 1, false); return err }
		}, ErrInvalid},
		{"QueueWait without a wakeup", func(_ *testing.T, r *badRig) func() error {
			return func() error { var w IOWait; w.Init(nil, nil, nil); _, err := r.e.QueueWait(&w, 1, false); return err }
		}, ErrInvalid},
		{"QueueWait need past the ring", func(_ *testing.T, r *badRig) func() error {
			return func() error {
				var w IOWait
				w.Init(nil, func(*IOWait, int) {}, nil)
				_, err := r.e.QueueWait(&w, r.e.ring.Size(), false)
				return err
			}
		}, ErrInvalid},
		{"QueueWait need -1", func(_ *testing.T, r *badRig) func() error {
			return func() error {
				var w IOWait
				w.Init(nil, func(*IOWait, int) {}, nil)
				_, err := r.e.QueueWait(&w, -1, false)
				return err
			}
		}, ErrInvalid},
		{"ParkOrRetry nil txreq", func(_ *testing.T, r *badRig) func() error {
			return func() error {
				var w IOWait
				w.Init(nil, func(*IOWait, int) {}, nil)
				return r.e.ParkOrRetry(&w, nil, r.e.HeadSeq(), false)
			}
		}, ErrInvalid},
		{"DeferOrRetry nil iowait", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.e.DeferOrRetry(nil, &r.good, r.e.HeadSeq(), false) }
		}, ErrInvalid},
		{"Clean in flight", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.good.Clean() }
		}, ErrInvalid},
		// AHG entries.
		{"AHGFree -1", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.e.AHGFree(-1) }
		}, ErrInvalid},
		{"AHGFree 32", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.e.AHGFree(32) }
		}, ErrInvalid},
		{"AHGFree twice", func(t *testing.T, r *badRig) func() error {
			i, err := r.e.AHGAlloc()
			require.NoError(t, err)
			require.NoError(t, r.e.AHGFree(i))
			return func() error { return r.e.AHGFree(i) }
		}, ErrInvalid},
		// Registrations.
		{"Register empty", func(_ *testing.T, r *badRig) func() error {
			return func() error { _, err := r.dev.Register(nil); return err }
		}, dma.ErrInvalid},
		{"Deregister twice", func(t *testing.T, r *badRig) func() error {
			reg, err := r.dev.Register(make([]byte, 64))
			require.NoError(t, err)
			require.NoError(t, r.dev.Deregister(context.Background(), reg))
			return func() error { return r.dev.Deregister(context.Background(), reg) }
		}, dma.ErrNotMapped},
		{"Deregister of another device's registration", func(t *testing.T, r *badRig) func() error {
			other, _ := engTestDevice(t, Config{Manual: true, Mapper: engTestIOMMU(t)})
			reg, err := other.Register(make([]byte, 64))
			require.NoError(t, err)
			return func() error { return r.dev.Deregister(context.Background(), reg) }
		}, dma.ErrNotMapped},
		{"Deregister nil", func(_ *testing.T, r *badRig) func() error {
			return func() error { return r.dev.Deregister(context.Background(), nil) }
		}, dma.ErrNotMapped},
		// Use after Close.
		{"Send after Close", func(t *testing.T, r *badRig) func() error {
			var tx TxReq
			engTestBuild(t, r.dev, &tx, 0, big[:8], nil)
			t.Cleanup(func() { _ = tx.Clean() })
			require.NoError(t, r.dev.Close())
			return func() error { return r.e.Send(nil, &tx, false) }
		}, ErrClosed},
		{"SendWait after Close", func(t *testing.T, r *badRig) func() error {
			var tx TxReq
			engTestBuild(t, r.dev, &tx, 0, big[:8], nil)
			t.Cleanup(func() { _ = tx.Clean() })
			require.NoError(t, r.dev.Close())
			return func() error { return r.e.SendWait(context.Background(), &tx) }
		}, ErrClosed},
		{"Process after Close", func(t *testing.T, r *badRig) func() error {
			require.NoError(t, r.dev.Close())
			return func() error { _, err := r.e.Process(); return err }
		}, ErrClosed},
		{"Event after Close", func(t *testing.T, r *badRig) func() error {
			require.NoError(t, r.dev.Close())
			return func() error { return r.e.Start() }
		}, ErrClosed},
		{"InjectHalt after Close", func(t *testing.T, r *badRig) func() error {
			require.NoError(t, r.dev.Close())
			return func() error { return r.e.injectHalt(CauseHalt) }
		}, ErrClosed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newBadRig(t)
			call := c.setup(t, r)
			before := r.world()
			err := call()
			require.ErrorIs(t, err, c.want)
			assert.Equal(t, before, r.world(), "a refused call changed the engine")
			assert.NotPanics(t, func() { _ = err.Error() })
		})
	}
}

// badFresh is a txreq initialised for tlen bytes, cleaned when the test ends.
func badFresh(t *testing.T, tlen int) *TxReq {
	tx := new(TxReq)
	require.NoError(t, tx.Init(0, tlen, nil))
	t.Cleanup(func() { _ = tx.Clean() })
	return tx
}

// badPage is page 0 of a fresh one-page region, closed when the test ends.
func badPage(t *testing.T) dma.Page {
	reg, err := dma.AllocPages(1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close() })
	p, err := reg.Page(0)
	require.NoError(t, err)
	return p
}

// TestBadConfigs: every Config field's bad values are refused, naming the field, and start no
// goroutine.
func TestBadConfigs(t *testing.T) {
	engTestNoLeak(t)
	for _, c := range []struct {
		field string
		cfg   Config
	}{
		{"Engines", Config{Engines: 17}}, {"Engines", Config{Engines: -1}},
		{"RingSize", Config{RingSize: 100}}, {"RingSize", Config{RingSize: 32}}, {"RingSize", Config{RingSize: 65536}},
		{"DescIntr", Config{DescIntr: -1}}, {"DescIntr", Config{RingSize: 64, DescIntr: 65}},
		{"Wait", Config{Wait: 9}}, {"Completion", Config{Completion: 9}},
		{"NumVLs", Config{NumVLs: 9}}, {"NumVLs", Config{Engines: 2, NumVLs: 3}},
		{"VLEngines", Config{Engines: 2, NumVLs: 2, VLEngines: []int{1}}},
		{"VLEngines", Config{Engines: 2, NumVLs: 2, VLEngines: []int{2, 1}}},
		{"VLEngines", Config{Engines: 2, NumVLs: 2, VLEngines: []int{0, 1}}},
		{"Engines", Config{Engines: math.MinInt}}, {"RingSize", Config{RingSize: -64}},
		{"DescIntr", Config{DescIntr: math.MaxInt}}, {"Wait", Config{Wait: -1}},
		{"Completion", Config{Completion: -1}}, {"NumVLs", Config{NumVLs: -1}},
		{"VLEngines", Config{Engines: 2, NumVLs: 2, VLEngines: []int{-1, 3}}},
		{"Mapper", Config{Mapper: (*dma.IOMMU)(nil)}}, {"Mapper", Config{Mapper: (*dma.Direct)(nil)}},
		{"Sink", Config{Sink: SinkFunc(nil)}},
		{"Faults.HaltRate", Config{faults: faultPlan{HaltRate: 1.5}}},
		{"Faults.HaltAt", Config{faults: faultPlan{HaltAt: -3}}},
		{"Faults.HaltCause", Config{faults: faultPlan{HaltCause: -1}}},
		// A BatchSink whose BatchLimit panics: an error naming the sink, not a panic of
		// NewDevice (before the fix the panic reached NewDevice's caller).
		{"Sink", Config{Sink: panicLimitSink{}}},
	} {
		dev, err := NewDevice(c.cfg)
		assert.Nil(t, dev)
		var ce *ConfigError
		if assert.ErrorAs(t, err, &ce, "%+v", c.cfg) {
			assert.Equal(t, c.field, ce.Field)
			assert.ErrorIs(t, err, ErrConfig)
			assert.ErrorIs(t, err, ErrInvalid)
		}
	}
}

// panicLimitSink is a BatchSink whose BatchLimit panics (a sink's bug).
type panicLimitSink struct{}

func (panicLimitSink) Deliver(int, [][]byte) error { return nil }
func (panicLimitSink) BatchLimit() (int, int)      { panic("BatchLimit: on purpose") }
func (panicLimitSink) Queue(int, [][]byte) error   { return nil }
func (panicLimitSink) Flush(int, []error)          {}

// TestTxListNextNil: Next of nil is nil, the end of an iteration, as Front of an empty list is (it
// dereferenced nil). The list is unchanged.
func TestTxListNextNil(t *testing.T) {
	var l TxList
	var tx TxReq
	l.PushBack(&tx)
	assert.NotPanics(t, func() { assert.Nil(t, l.Next(nil)) })
	assert.Equal(t, 1, l.Len())
	assert.Same(t, &tx, l.Front())
}
