package sdmaprom_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmaprom"
)

// statMetric names the metric of every EngineStats field. Faults is the sum of Halts (the
// halts_total series summed over cause) and Halts is sdma_engine_halts_total by cause.
var statMetric = map[string]string{
	"Packets":        "sdma_engine_packets_total",
	"Descs":          "sdma_engine_descriptors_total",
	"Bytes":          "sdma_engine_bytes_total",
	"RingFull":       "sdma_engine_ring_full_total",
	"Sleeps":         "sdma_engine_sleeps_total",
	"Wakeups":        "sdma_engine_wakeups_total",
	"Interrupts":     "sdma_engine_interrupts_total",
	"Passes":         "sdma_engine_completion_passes_total",
	"Completed":      "sdma_engine_completed_total",
	"Aborted":        "sdma_engine_aborted_total",
	"Faults":         "",
	"SinkErrors":     "sdma_engine_sink_errors_total",
	"Flushes":        "sdma_engine_flushes_total",
	"Recoveries":     "sdma_engine_recoveries_total",
	"CallbackPanics": "sdma_engine_callback_panics_total",
	"Halts":          "sdma_engine_halts_total",
}

// batchSink holds packets and drops them at each Flush, so that the engine counts flushes.
type batchSink struct{}

func (batchSink) Deliver(int, [][]byte) error      { return nil }
func (batchSink) BatchLimit() (packets, bytes int) { return 8, 0 }
func (batchSink) Queue(int, [][]byte) error        { return nil }
func (batchSink) Flush(int, []error)               {}

// TestEveryStatExported: every field of sdma.EngineStats (the counters Device.Vars shows) is a
// Prometheus counter, with the engine's value. Flushes and CallbackPanics were left out.
func TestEveryStatExported(t *testing.T) {
	for _, f := range reflect.VisibleFields(reflect.TypeFor[sdma.EngineStats]()) {
		_, ok := statMetric[f.Name]
		assert.True(t, ok, "EngineStats.%s has no Prometheus metric in this test's map", f.Name)
	}
	// A Manual engine: three packets sent, then one Process delivers them as one batch (one
	// flush); the second's completion panics, recovered and counted (CallbackPanics).
	dev, err := sdma.NewDevice(sdma.Config{Name: "all", Sink: batchSink{}, Manual: true})
	require.NoError(t, err)
	defer dev.Close()
	e := dev.Engine(0)
	txs := make([]sdma.TxReq, 3)
	completed := 0
	for i := range txs {
		cb := sdma.CompleterFunc(func(*sdma.TxReq, sdma.Status) {
			completed++
			if i == 1 {
				panic("boom")
			}
		})
		require.NoError(t, txs[i].Init(0, 64, cb))
		require.NoError(t, txs[i].AddKVAddr(dev, make([]byte, 64)))
		require.NoError(t, e.Send(nil, &txs[i], true))
	}
	n, err := e.Process()
	require.NoError(t, err)
	require.Equal(t, 3, n)
	e.Poll()
	require.Equal(t, 3, completed)
	require.EqualValues(t, 1, e.Stats().CallbackPanics)

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(sdmaprom.New(dev)))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		assert.Equal(t, "COUNTER", mf.GetType().String(), mf.GetName())
		for _, m := range mf.GetMetric() {
			got[mf.GetName()] += m.GetCounter().GetValue()
		}
	}
	s := e.Stats()
	assert.NotZero(t, s.Flushes)
	v := reflect.ValueOf(s)
	for name, metric := range statMetric {
		if metric == "" || name == "Halts" {
			continue
		}
		want := float64(v.FieldByName(name).Uint())
		assert.Contains(t, got, metric, "EngineStats.%s", name)
		assert.Equal(t, want, got[metric], "%s (EngineStats.%s)", metric, name)
	}
}

// deviceMetric names the metric of every counter of sdma.Device itself (a method that takes
// nothing and returns a uint64). UnmapErrors was left out.
var deviceMetric = map[string]string{
	"UnmapErrors": "sdma_device_unmap_errors_total",
}

// failUnmap is a mapper whose single unmaps undo the mapping but report a failure, so that the
// device counts each in UnmapErrors.
type failUnmap struct{ dma.Mapper }

func (m failUnmap) UnmapSingle(addr dma.Addr, size int, dir dma.Direction) error {
	_ = m.Mapper.UnmapSingle(addr, size, dir)
	return errors.New("unmap refused")
}

// TestEveryDeviceCounterExported: every counter of sdma.Device is a Prometheus counter with the
// device label only, with the device's value.
func TestEveryDeviceCounterExported(t *testing.T) {
	typ := reflect.TypeFor[*sdma.Device]()
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		if m.Type.NumIn() == 1 && m.Type.NumOut() == 1 && m.Type.Out(0).Kind() == reflect.Uint64 {
			_, ok := deviceMetric[m.Name]
			assert.True(t, ok, "Device.%s has no Prometheus metric in this test's map", m.Name)
		}
	}
	dev, err := sdma.NewDevice(sdma.Config{Name: "unmaps", Mapper: failUnmap{dma.NewDirect()}, Manual: true})
	require.NoError(t, err)
	defer dev.Close()
	e := dev.Engine(0)
	var tx sdma.TxReq
	require.NoError(t, tx.Init(0, 4096, nil))
	require.NoError(t, tx.AddKVAddr(dev, make([]byte, 4096)))
	require.NoError(t, e.Send(nil, &tx, true))
	_, err = e.Process()
	require.NoError(t, err)
	e.Poll()
	require.EqualValues(t, 1, dev.UnmapErrors())

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(sdmaprom.New(dev)))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	v := reflect.ValueOf(dev)
	for name, metric := range deviceMetric {
		want := v.MethodByName(name).Call(nil)[0].Uint()
		var found bool
		for _, mf := range mfs {
			if mf.GetName() != metric {
				continue
			}
			require.Len(t, mf.GetMetric(), 1, metric)
			m := mf.GetMetric()[0]
			require.Len(t, m.GetLabel(), 1, metric)
			assert.Equal(t, "device", m.GetLabel()[0].GetName())
			assert.Equal(t, "unmaps", m.GetLabel()[0].GetValue())
			assert.Equal(t, float64(want), m.GetCounter().GetValue(), "%s (Device.%s)", metric, name)
			found = true
		}
		assert.True(t, found, "%s (Device.%s) not gathered", metric, name)
	}
}
