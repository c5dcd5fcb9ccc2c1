//go:build linux

package udpsink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/ipv4"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// randomFaults wraps the sink's sendmmsg with faulty answers: short counts, ENOBUFS,
// ECONNREFUSED and EAGAIN, on a fixed schedule of calls (every 7th call from the 4th is refused,
// so any run of a few flushes meets each kind) with the short counts' lengths drawn from a
// seeded generator. Safe for concurrent use.
type randomFaults struct {
	inner batchWriter
	mu    sync.Mutex
	calls uint64
	x     uint64
}

func (f *randomFaults) WriteBatch(ms []ipv4.Message, flags int) (int, error) {
	f.mu.Lock()
	f.calls++
	c := f.calls
	f.x = f.x*6364136223846793005 + 1442695040888963407
	r := f.x >> 33
	f.mu.Unlock()
	switch {
	case c%7 == 4:
		return -1, sysErr(syscall.ECONNREFUSED)
	case c%7 == 6:
		return -1, sysErr(syscall.ENOBUFS)
	case c%11 == 2:
		return -1, sysErr(syscall.EAGAIN)
	case c%3 == 0: // a short count: some sent, the rest not, no error
		k := int(r) % len(ms)
		if k == 0 {
			return 0, nil
		}
		return f.inner.WriteBatch(ms[:k], flags)
	}
	return f.inner.WriteBatch(ms, flags)
}

// TestDeviceBatchedExactlyOnceConcurrent runs a device (IOMMU mapper, engines with their own
// goroutines, random halts) into a batching sink (GSO on and off) whose sendmmsg answers with
// random short counts and errors, into a Receiver. Every txreq completes exactly once; the ones
// that completed OK are exactly the ones the sink sent or failed, the aborted ones never reached
// it; the receiver sees every sent frame once, in order, with its checksum right although every
// completion overwrites the packet's buffer (so none completed, and was unmapped, before its
// send); and the IOMMU has no mapping left.
func TestDeviceBatchedExactlyOnceConcurrent(t *testing.T) {
	for _, gso := range []bool{false, true} {
		t.Run(fmt.Sprintf("gso=%v", gso), func(t *testing.T) { runDeviceBatched(t, gso) })
	}
}

func runDeviceBatched(t *testing.T, gso bool) {
	const engines, producers = 2, 2
	per := 300
	if testing.Short() {
		per = 120
	}
	r, err := Listen(ReceiverConfig{Idle: 5 * time.Second})
	require.NoError(t, err)
	defer r.Close()
	sink, err := New(Config{Addr: r.Addr().String(), Engines: engines, Batch: 16, GSO: gso})
	require.NoError(t, err)
	sink.w = &randomFaults{inner: sink.w, x: 1}
	m, err := dma.NewIOMMU(dma.IOMMUConfig{})
	require.NoError(t, err)
	dev, err := sdma.NewDevice(sdma.Config{Mapper: m, Engines: engines, RingSize: 128, DescIntr: 16, Sink: sink})
	require.NoError(t, err)
	for i := range engines {
		require.NoError(t, sdmatest.SetFaults(dev.Engine(i), sdmatest.FaultPlan{HaltRate: 0.003, Seed: 3}))
	}
	done := make(chan Report)
	go func() {
		rep, err := r.Run(context.Background())
		assert.NoError(t, err)
		done <- rep
	}()

	var (
		mu       sync.Mutex
		status   = map[*sdma.TxReq]sdma.Status{}
		dups     atomic.Int64
		accepted atomic.Int64
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for p := range engines * producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := dev.Engine(p % engines)
			for i := range per {
				hdr, pay := make([]byte, 16), make([]byte, 4*(8+(i/8*13+p)%200)) // runs of one size: GSO
				for k := range pay {
					pay[k] = byte(p + i + k)
				}
				tx := new(sdma.TxReq)
				cb := func(tx *sdma.TxReq, st sdma.Status) {
					clear(pay) // poison: a send after this would carry a bad checksum
					mu.Lock()
					if _, ok := status[tx]; ok {
						dups.Add(1)
					}
					status[tx] = st
					mu.Unlock()
				}
				require.NoError(t, tx.Init(0, len(hdr)+len(pay), sdma.CompleterFunc(cb)))
				require.NoError(t, tx.AddKVAddr(dev, hdr))
				require.NoError(t, tx.AddKVAddr(dev, pay))
				switch err := e.SendWait(ctx, tx); {
				case err == nil, errors.Is(err, sdma.ErrNotRunning):
					accepted.Add(1)
				default:
					t.Error(err)
					return
				}
				if !stayWithin(t, sink, r, 1000) { // stay within the receive buffer
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, dev.Shutdown(ctx))
	st := sink.Stats()
	require.NoError(t, sink.Close())
	rep := <-done

	assert.Zero(t, dups.Load(), "completed twice")
	var ok, aborted uint64
	mu.Lock()
	assert.EqualValues(t, accepted.Load(), len(status), "every accepted txreq completed")
	for _, s := range status {
		switch s {
		case sdma.StatusOK:
			ok++
		case sdma.StatusAborted:
			aborted++
		default:
			t.Errorf("status %v", s)
		}
	}
	mu.Unlock()
	var sinkErrs, halts uint64
	for i := range engines {
		es := dev.Engine(i).Stats()
		sinkErrs += es.SinkErrors
		halts += es.Faults
	}
	assert.Equal(t, st.Packets+st.Errors, ok, "OK completions are exactly the packets the sink sent or failed")
	assert.Equal(t, st.Errors, sinkErrs, "one sink error per failed packet")
	assert.True(t, rep.OK(), rep.String())
	assert.Equal(t, st.Packets, rep.Packets)
	assert.Zero(t, rep.BadChecksum, "a packet's buffer changed before its send")
	assert.Empty(t, m.Live(), "IOMMU mappings left")
	assert.NotZero(t, st.Errors, "the faults reached the sink")
	t.Logf("ok %d (sent %d, failed %d), aborted %d, halts %d; %+v", ok, st.Packets, st.Errors, aborted, halts, st)
}
