package main

import (
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma/udpsink"
)

// TestServerRunWithoutEndFails: a -server run whose packets stop before the client's end-of-run
// marker (the client killed mid-run, or quiet past -idle) fails (exit 1) naming what happened:
// it warned and exited 0, as if the run had been whole. With -sweep too.
func TestServerRunWithoutEndFails(t *testing.T) {
	for _, sweep := range [][]string{nil, {"-sweep", "-size", "8"}} {
		addr, stderr, done := startServer(t, io.Discard, append([]string{"-idle", "300ms"}, sweep...)...)
		c, err := net.Dial("udp", addr)
		require.NoError(t, err)
		payload := make([]byte, 4) // a 2-byte packet's, the sweep's first size (padded to a dword)
		for seq := range uint64(5) {
			d := make([]byte, udpsink.HeaderLen+len(payload))
			udpsink.PutHeader(d, udpsink.Header{Seq: seq, CRC: udpsink.Checksum([][]byte{payload}), Run: 7})
			copy(d[udpsink.HeaderLen:], payload)
			_, err := c.Write(d)
			require.NoError(t, err)
		}
		c.Close()
		assert.Equal(t, exitFail, <-done, "%v: %s", sweep, stderr.String())
		assert.Contains(t, stderr.String(), "the run did not end: 5 packets arrived, then no end-of-run marker within 300ms", "%v", sweep)
	}
}
