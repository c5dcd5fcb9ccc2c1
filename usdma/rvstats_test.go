package usdma

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
)

// TestStatsCountOnlyPacketsHandedOver: Stats says AHGPackets and FullHeaders are "of which"
// Packets, the packets handed to the engine. A request cut short while its packets wait for
// ring room has built packets that never reach the engine (stop frees them): they must not be
// counted as AHG or full-header packets. They were counted when built, so a request of 20
// packets stopped on a full ring read Packets 0 with AHGPackets 15 and FullHeaders 1.
func TestStatsCountOnlyPacketsHandedOver(t *testing.T) {
	for _, ahg := range []bool{true, false} {
		dev := testDevice(t, sdma.Config{Manual: true, RingSize: 64})
		e := dev.Engine(0)
		pq := testQueue(t, Config{Device: dev, DisableAHG: !ahg, Timeout: time.Hour})
		// Fill the ring: nobody drives the engine, so no room comes.
		small := make([]byte, 64)
		for e.DescqFreeCnt() > 0 {
			tx := new(sdma.TxReq)
			require.NoError(t, tx.Init(0, len(small), nil))
			require.NoError(t, tx.AddKVAddr(dev, small))
			require.NoError(t, e.Send(nil, tx, true))
		}
		data := pattern(20*256, 1)
		info, hdr := Message(0, 256, testTemplate, data)
		ctx, cancel := context.WithCancel(context.Background())
		deferred := deferrals(pq)
		errc := make(chan error, 1)
		go func() { errc <- pq.Submit(ctx, info, &hdr, data) }()
		awaitDeferred(t, pq, deferred, errc)
		cancel()
		require.Error(t, submitResult(t, pq, errc))
		for range 100 { // the chip and its completions: the filler packets go
			_, _ = e.Process()
			e.Poll()
		}
		require.Error(t, waitSlot(t, pq, 0))
		st := pq.Stats()
		assert.Equal(t, st.Packets, st.AHGPackets+st.FullHeaders,
			"ahg=%v: AHGPackets %d + FullHeaders %d, of Packets %d handed over", ahg, st.AHGPackets, st.FullHeaders, st.Packets)
	}
}
