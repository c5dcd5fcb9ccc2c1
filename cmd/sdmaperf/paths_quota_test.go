package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPathQuotaCountsSent: -n counts the packets a -path run sent (delivered, or flushed by a
// halt), not its tries: a send refused while a PIO context is not running (a halted one
// recovering, here a disabled one) is counted as refused and tried again. Before, each refusal
// used up one of -n: this producer returned at once with 0 of its 5 packets sent, and under
// -race on a loaded machine TestPathHaltRateIsARate's run sent 1 packet of -n 1000 (999 refused).
func TestPathQuotaCountsSent(t *testing.T) {
	cfg, err := parseConfig([]string{"-path", "pio", "-size", "64"}, new(bytes.Buffer))
	require.NoError(t, err)
	sink := &flowSink{}
	dev, closeDev, err := newPathDevice(cfg, pathPIO, sink)
	require.NoError(t, err)
	defer func() { require.NoError(t, closeBounded(t.Context(), closeDev)) }()
	for i := range dev.NumContexts() {
		dev.Context(i).Disable()
	}
	p := newPathProducer(dev, sink, 0, 64, 1, false)
	enabled := make(chan struct{})
	go func() {
		defer close(enabled)
		time.Sleep(20 * time.Millisecond)
		for i := range dev.NumContexts() {
			if err := dev.Context(i).Enable(); err != nil {
				t.Error(err)
			}
		}
	}()
	require.NoError(t, p.run(t.Context(), 5, time.Time{}))
	<-enabled
	require.EqualValues(t, 5, p.sent, "the quota is of packets sent")
	if p.refused == 0 { // the producer started after Enable: nothing was refused to retry
		t.Log("no send was refused before Enable: the run did not exercise the retry")
	}
	require.NoError(t, drainFlows(context.Background(), []*pathProducer{p}))
	require.EqualValues(t, 5, sink.total.Load())
}
