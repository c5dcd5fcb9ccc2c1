package sdmaprom_test

import (
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
