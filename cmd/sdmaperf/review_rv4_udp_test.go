package main

import (
	"bytes"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPerSizeUDPSinkKeepsBatchAndGSO: a sweep to an external receiver (-udp-addr with several
// sizes) opens a UDP sink per size; each takes -udp-batch and -udp-gso as the one sink of a
// single-size run does. sizeSink built them from Addr and Engines alone, so -udp-batch 1 (the
// unbatched sink) and -udp-batch 8 ran batched by 32, and -udp-gso was dropped, silently.
func TestPerSizeUDPSinkKeepsBatchAndGSO(t *testing.T) {
	peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer peer.Close()
	for _, c := range []struct {
		args  []string
		batch int
		gso   bool
	}{
		{[]string{"-udp-batch", "1"}, 1, false},
		{[]string{"-udp-batch", "8", "-udp-gso"}, 8, true},
	} {
		args := append([]string{"-sink", "udp", "-udp-addr", peer.LocalAddr().String(), "-sweep", "-size", "8"}, c.args...)
		cfg, err := parseConfig(args, new(bytes.Buffer))
		require.NoError(t, err, args)
		require.Greater(t, len(cfg.Sizes), 1, args)
		cs, err := openSink(t.Context(), cfg)
		require.NoError(t, err, args)
		require.True(t, cs.perSize, args)
		_, err = cs.sizeSink(cfg)
		require.NoError(t, err, args)
		pkts, _ := cs.udp.BatchLimit()
		assert.Equal(t, c.batch, pkts, "%v: the per-size sink's batch", args)
		if c.gso { // two frames of one size: one GSO message
			for range 2 {
				require.NoError(t, cs.udp.Queue(0, [][]byte{make([]byte, 8)}))
			}
			errs := make([]error, 2)
			cs.udp.Flush(0, errs)
			require.Equal(t, make([]error, 2), errs)
			assert.EqualValues(t, 1, cs.udp.Stats().GSOMsgs, "%v: the per-size sink's GSO", args)
		}
		require.NoError(t, cs.sizeDone(), args)
	}
}
