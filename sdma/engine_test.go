package sdma

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/leakcheck"
)

// engTestDevice builds a device with a capturing sink, closed at the end of the test.
func engTestDevice(t testing.TB, cfg Config) (*Device, *captureSink) {
	t.Helper()
	cs, _ := cfg.Sink.(*captureSink)
	if cfg.Sink == nil {
		cs = &captureSink{}
		cfg.Sink = cs
	}
	dev, err := NewDevice(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	return dev, cs
}

// engTestIOMMU returns an IOMMU mapper whose leak report tests can check.
func engTestIOMMU(t testing.TB) *dma.IOMMU {
	t.Helper()
	m, err := dma.NewIOMMU(dma.IOMMUConfig{})
	require.NoError(t, err)
	return m
}

// completions records each txreq's completion status and fails on a second completion.
type completions struct {
	mu   sync.Mutex
	seen map[*TxReq]Status
	n    atomic.Int64
	dup  atomic.Int64
}

func (c *completions) Complete(tx *TxReq, st Status) {
	c.mu.Lock()
	if c.seen == nil {
		c.seen = make(map[*TxReq]Status)
	}
	if _, ok := c.seen[tx]; ok {
		c.dup.Add(1)
	}
	c.seen[tx] = st
	c.mu.Unlock()
	c.n.Add(1)
}

func (c *completions) status(tx *TxReq) (Status, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.seen[tx]
	return st, ok
}

func engTestPattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// engTestBuild initialises tx for buf and adds it in one piece.
func engTestBuild(t testing.TB, dev *Device, tx *TxReq, flags Flags, buf []byte, cb Completer) {
	t.Helper()
	require.NoError(t, tx.Init(flags, len(buf), cb))
	require.NoError(t, tx.AddKVAddr(dev, buf))
}

func padded(b []byte) []byte {
	out := append([]byte(nil), b...)
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	return out
}

// engTestLoop calls f(0), f(1), ... on a goroutine counted in wg until stop is closed: the
// drivers (Process and Poll) and chaos goroutines that the concurrency tests run beside their
// senders.
func engTestLoop(stop <-chan struct{}, wg *sync.WaitGroup, f func(i int)) {
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			f(i)
		}
	})
}

// engTestNoLeak checks, at the end of the test, that no goroutine started during it is left
// (other tests of the package may leave devices open, so the ones present now are ignored).
func engTestNoLeak(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { leakcheck.VerifyNone(t, opt) })
}

func TestEngineSendProcessManual(t *testing.T) {
	dev, cs := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var c completions
	var txs [5]TxReq
	var want [][]byte
	for i := range txs {
		buf := engTestPattern(10+i*13, byte(i))
		want = append(want, padded(buf))
		engTestBuild(t, dev, &txs[i], 0, buf, &c)
		require.NoError(t, e.Send(nil, &txs[i], false))
	}
	assert.False(t, e.Empty())
	assert.Zero(t, cs.Count(), "nothing leaves before the hardware runs")
	n, err := e.Process()
	require.NoError(t, err)
	assert.Equal(t, len(txs), n)
	assert.Equal(t, want, cs.Packets(0))
	assert.EqualValues(t, len(txs), c.n.Load(), "the idle interrupt ran the completion pass")
	for i := range txs {
		st, ok := c.status(&txs[i])
		assert.True(t, ok)
		assert.Equal(t, StatusOK, st)
	}
	assert.Zero(t, c.dup.Load())
	assert.True(t, e.Empty())
	s := e.Stats()
	assert.EqualValues(t, len(txs), s.Packets)
	assert.EqualValues(t, len(txs), s.Completed)
	assert.NotZero(t, s.Interrupts)
	assert.Equal(t, 63, e.DescqFreeCnt())
}

func TestEngineGoroutineModes(t *testing.T) {
	for _, ws := range []WaitStrategy{WaitSpinPark, WaitBusyPoll, WaitPark} {
		for _, cm := range []CompletionMode{CompleteInterrupt, CompletePoll} {
			t.Run(ws.String()+"/"+cm.String(), func(t *testing.T) {
				engTestNoLeak(t)
				dev, cs := engTestDevice(t, Config{RingSize: 64, Wait: ws, Completion: cm})
				e := dev.Engine(0)
				var c completions
				const n = 200
				txs := make([]TxReq, n)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				for i := range txs {
					engTestBuild(t, dev, &txs[i], 0, engTestPattern(64, byte(i)), &c)
					require.NoError(t, e.SendWait(ctx, &txs[i]))
				}
				require.Eventually(t, func() bool {
					if cm == CompletePoll {
						e.Poll()
					}
					return c.n.Load() == n
				}, 10*time.Second, time.Millisecond)
				got := cs.Packets(0)
				require.Len(t, got, n)
				for i := range got {
					require.Equal(t, engTestPattern(64, byte(i)), got[i], "packet %d", i)
				}
				assert.True(t, e.Empty())
			})
		}
	}
}

func TestEngineSendErrors(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var tx TxReq
	assert.ErrorIs(t, e.Send(nil, &tx, false), ErrInvalid, "uninitialised")
	require.NoError(t, tx.Init(0, 8, nil))
	require.NoError(t, tx.AddKVAddr(dev, make([]byte, 4)))
	assert.ErrorIs(t, e.Send(nil, &tx, false), ErrInvalid, "unfinished")
	require.NoError(t, tx.AddKVAddr(dev, make([]byte, 4)))
	require.NoError(t, e.Send(nil, &tx, false))
	assert.ErrorIs(t, e.Send(nil, &tx, false), ErrInvalid, "double send")

	other, _ := engTestDevice(t, Config{Manual: true})
	var tx2 TxReq
	engTestBuild(t, other, &tx2, 0, make([]byte, 8), nil)
	assert.ErrorIs(t, e.Send(nil, &tx2, false), ErrInvalid, "another device's txreq")
	require.NoError(t, tx2.Clean())
}

func TestEngineRingFullNoWait(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	e := dev.Engine(0)
	var c completions
	txs := make([]TxReq, 64)
	sent := 0
	var err error
	for i := range txs {
		engTestBuild(t, dev, &txs[i], 0, make([]byte, 6), &c) // 2 descriptors: data + pad
		if err = e.Send(nil, &txs[i], false); err != nil {
			break
		}
		sent++
	}
	require.ErrorIs(t, err, ErrBusy)
	assert.Equal(t, 31, sent, "63 usable slots hold 31 two-descriptor packets")
	assert.EqualValues(t, 1, e.Stats().RingFull)
	// The refused txreq is still the caller's and can be sent once there is room.
	_, err = e.Process()
	require.NoError(t, err)
	require.NoError(t, e.Send(nil, &txs[sent], false))
	_, err = e.Process()
	require.NoError(t, err)
	assert.EqualValues(t, sent+1, c.n.Load())
	for i := sent + 1; i < len(txs); i++ {
		require.NoError(t, txs[i].Clean())
	}
}

func TestEngineCompletePollMode(t *testing.T) {
	dev, cs := engTestDevice(t, Config{Manual: true, Completion: CompletePoll})
	e := dev.Engine(0)
	var c completions
	var tx TxReq
	engTestBuild(t, dev, &tx, 0, engTestPattern(100, 1), &c)
	require.NoError(t, e.Send(nil, &tx, false))
	_, err := e.Process()
	require.NoError(t, err)
	assert.Equal(t, 1, cs.Count())
	assert.Zero(t, c.n.Load(), "polled: nothing completes until Poll")
	assert.Equal(t, 1, e.Poll())
	assert.EqualValues(t, 1, c.n.Load())
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Engines: 17}, "Engines"},
		{Config{Engines: -1}, "Engines"},
		{Config{RingSize: 100}, "RingSize"},
		{Config{RingSize: 32}, "RingSize"},
		{Config{RingSize: 65536}, "RingSize"},
		{Config{DescIntr: -3}, "DescIntr"},
		{Config{RingSize: 64, DescIntr: 65}, "DescIntr"},
		{Config{Wait: 7}, "Wait"},
		{Config{Completion: 9}, "Completion"},
		{Config{NumVLs: 2}, "NumVLs"},
		{Config{Engines: 16, NumVLs: 9}, "NumVLs"},
		{Config{Engines: 4, NumVLs: 2, VLEngines: []int{1}}, "VLEngines"},
		{Config{Engines: 4, NumVLs: 2, VLEngines: []int{0, 2}}, "VLEngines"},
		{Config{Engines: 4, NumVLs: 2, VLEngines: []int{3, 2}}, "VLEngines"},
		{Config{Sink: (*captureSink)(nil)}, "Sink"},
		{Config{Sink: (*faultSink)(nil)}, "Sink"},
		{Config{Sink: nilFuncSink(nil)}, "Sink"},
	} {
		_, err := NewDevice(tc.cfg)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, "%+v", tc.cfg)
		assert.Equal(t, tc.field, ce.Field)
		assert.ErrorIs(t, err, ErrConfig)
		assert.ErrorIs(t, err, ErrInvalid)
		assert.Contains(t, err.Error(), tc.field)
	}
}

// nilFuncSink is a Sink whose nil value is a nil func: a typed nil that is not a pointer.
type nilFuncSink func(int, [][]byte) error

func (f nilFuncSink) Deliver(engine int, segs [][]byte) error { return f(engine, segs) }

func TestSelectEngine(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, Engines: 16, RingSize: 64})
	// 16 engines over 8 VLs: two each, VL i gets engines 2i and 2i+1.
	for vl := 0; vl < 8; vl++ {
		for sel := uint32(0); sel < 4; sel++ {
			assert.Equal(t, 2*vl+int(sel&1), dev.SelectEngine(sel, uint8(vl)).Index())
		}
	}
	assert.Equal(t, 0, dev.SelectEngine(5, 8).Index(), "a VL past the map gets engine 0")

	dev3, _ := engTestDevice(t, Config{Manual: true, Engines: 5, NumVLs: 3, RingSize: 64})
	// 5/3: one each, the extra two to the highest VLs: VL0 {0}, VL1 {1,2}, VL2 {3,4}; VL3 reuses VL0.
	assert.Equal(t, 0, dev3.SelectEngine(1, 0).Index())
	assert.Equal(t, 1, dev3.SelectEngine(0, 1).Index())
	assert.Equal(t, 2, dev3.SelectEngine(1, 1).Index())
	assert.Equal(t, 4, dev3.SelectEngine(3, 2).Index())

	dev4, _ := engTestDevice(t, Config{Manual: true, Engines: 4, NumVLs: 2, VLEngines: []int{3, 1}, RingSize: 64})
	// VL0 has 3 engines rounded up to 4 slots: 0,1,2,0.
	got := []int{}
	for sel := uint32(0); sel < 4; sel++ {
		got = append(got, dev4.SelectEngine(sel, 0).Index())
	}
	assert.Equal(t, []int{0, 1, 2, 0}, got)
	assert.Equal(t, 3, dev4.SelectEngine(7, 1).Index())
}

var _ = errors.Is
var _ = desc.MaxDesc
