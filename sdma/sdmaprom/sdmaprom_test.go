package sdmaprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmaprom"
)

// TestCollector: the collector's counters are the engines' Stats, labelled by device and engine.
func TestCollector(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Engines: 2, Name: "promtest"})
	require.NoError(t, err)
	defer dev.Close()
	require.NoError(t, sendOne(dev.Engine(1)))

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(sdmaprom.New(dev)))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue()
		}
	}
	assert.Equal(t, 1.0, got["sdma_engine_packets_total,device=promtest,engine=1"])
	assert.Equal(t, 0.0, got["sdma_engine_packets_total,device=promtest,engine=0"])
	assert.Equal(t, 1.0, got["sdma_engine_completed_total,device=promtest,engine=1"])
	assert.Equal(t, 64.0, got["sdma_engine_bytes_total,device=promtest,engine=1"])
	assert.Contains(t, got, "sdma_engine_halts_total,cause=explicit halt,device=promtest,engine=0")
}

// sendOne sends one 64-byte packet on e and waits for its completion.
func sendOne(e *sdma.Engine) error {
	done := make(chan sdma.Status, 1)
	var tx sdma.TxReq
	if err := tx.Init(0, 64, sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) { done <- st })); err != nil {
		return err
	}
	if err := tx.AddKVAddr(e.Device(), make([]byte, 64)); err != nil {
		return err
	}
	if err := e.Send(nil, &tx, true); err != nil {
		return err
	}
	<-done
	return nil
}
