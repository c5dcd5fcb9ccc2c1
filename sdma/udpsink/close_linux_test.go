//go:build linux

package udpsink

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCloseSendsHeldBatches: packets an engine holds (queued, not flushed) when the sink closes
// are sent by Close, before the end markers, whose counts include them; the engine's Flush after
// Close reports each one's outcome once (nil: sent; a send error: failed and counted). Close left
// them to a Flush that might never come: with none, they were neither sent nor failed (the
// markers counted 0, the receiver saw an empty clean run), and with one, they failed ErrClosed
// although the socket could have sent them.
func TestCloseSendsHeldBatches(t *testing.T) {
	s, _, done := sinkToReceiver(t, Config{Engines: 2, Batch: 8})
	queueAll(t, s, 0, payloads(3, 40))
	queueAll(t, s, 1, payloads(2, 50))
	require.NoError(t, s.Close())
	rep := <-done
	assert.True(t, rep.OK(), rep.String())
	require.Len(t, rep.Engines, 2)
	assert.EqualValues(t, 3, rep.Engines[0].Sent)
	assert.EqualValues(t, 3, rep.Engines[0].Packets)
	assert.EqualValues(t, 2, rep.Engines[1].Sent)
	assert.EqualValues(t, 2, rep.Engines[1].Packets)
	errs := []error{ErrInvalid, ErrInvalid, ErrInvalid}
	s.Flush(0, errs)
	assert.Equal(t, []error{nil, nil, nil}, errs, "sent by Close")
	errs = []error{ErrInvalid, ErrInvalid}
	s.Flush(1, errs)
	assert.Equal(t, []error{nil, nil}, errs)
	errs = []error{ErrInvalid}
	s.Flush(0, errs) // nothing held: reported once only
	assert.Equal(t, []error{ErrInvalid}, errs)
	assert.Equal(t, Stats{Packets: 5, Bytes: 3*40 + 2*50, Syscalls: 2, Batches: 2}, s.Stats())
}

// TestCloseFailsHeldPacketItCannotSend: a held packet whose send fails at Close fails as at a
// Flush (counted, renumbered so the receiver sees no hole), and the engine's Flush reports it.
func TestCloseFailsHeldPacketItCannotSend(t *testing.T) {
	p := newPlainPeer(t)
	s, err := New(Config{Addr: p.pc.LocalAddr().String(), Batch: 8})
	require.NoError(t, err)
	s.w = &faultWriter{inner: s.w, script: []step{{err: sysErr(syscall.EMSGSIZE)}}}
	pkts := payloads(3, 40)
	queueAll(t, s, 0, pkts)
	require.NoError(t, s.Close())
	errs := make([]error, 3)
	s.Flush(0, errs)
	assert.ErrorIs(t, errs[0], syscall.EMSGSIZE)
	assert.NoError(t, errs[1])
	assert.NoError(t, errs[2])
	d := p.read(3)
	checkFrames(t, d[:2], 0, 0, pkts[1:])
	h, err := ParseHeader(d[2])
	require.NoError(t, err)
	assert.Equal(t, FlagEnd, h.Flags)
	assert.EqualValues(t, 2, h.Seq, "the end marker counts the two sent")
	assert.Equal(t, Stats{Packets: 2, Bytes: 80, Errors: 1, Syscalls: 2, Batches: 1}, s.Stats())
}

// TestCloseRacesDeliverConcurrent: engines deliver (Deliver, and Queue with Flush) while Close
// runs; two of them hold a batch when it starts, and go on once the sink is closed. Every packet
// is reported once, sent or refused; every packet reported sent arrives exactly once, in order,
// and the end markers count exactly those. Close used to require that no Deliver ran with it (it
// wrote the header and gather list an engine's Deliver may be using), and the batches held at
// Close failed ErrClosed at the next Flush, though the socket was still open.
func TestCloseRacesDeliverConcurrent(t *testing.T) {
	const engines = 3
	p := newPlainPeer(t)
	require.NoError(t, p.pc.SetReadBuffer(1<<20)) // loopback drops what a full buffer cannot take
	s, err := New(Config{Addr: p.pc.LocalAddr().String(), Engines: engines, Batch: 8})
	require.NoError(t, err)

	// The reader: every data frame and each engine's first end marker, until all engines' came.
	type got struct {
		ids  []uint32 // payload ids of the data frames, in arrival order
		seqs []uint64
		end  int64 // the first end marker's count, -1 before it
	}
	var seen [engines]got
	var read atomic.Uint64 // data frames read: the senders stay within the receive buffer
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for i := range seen {
			seen[i].end = -1
		}
		buf := make([]byte, 65536)
		for ended := 0; ended < engines; {
			_ = p.pc.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := p.pc.Read(buf)
			if !assert.NoError(t, err) {
				return
			}
			h, err := ParseHeader(buf[:n])
			if !assert.NoError(t, err) || !assert.Less(t, int(h.Engine), engines) {
				return
			}
			g := &seen[h.Engine]
			switch {
			case h.Flags&FlagEnd != 0 && g.end < 0:
				g.end = int64(h.Seq)
				ended++
			case h.Flags&FlagEnd == 0:
				g.ids = append(g.ids, binary.LittleEndian.Uint32(buf[HeaderLen:]))
				g.seqs = append(g.seqs, h.Seq)
				read.Add(1)
			}
		}
	}()

	var sent [engines][]uint32 // ids each engine was told were sent, in order
	var refused [engines]int
	var wg sync.WaitGroup
	// Engines 0 and 1 park holding a batch once parkNow is set, until release.
	const holders = 2
	var parkNow atomic.Bool
	var parked sync.WaitGroup
	parked.Add(holders)
	release := make(chan struct{})
	for e := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pkt := func(id uint32) [][]byte {
				b := binary.LittleEndian.AppendUint32(nil, id)
				return [][]byte{b, {byte(e), 0xee}}
			}
			errs := make([]error, 8)
			var held []uint32
			park := e < holders
			for id := uint32(0); ; id++ {
				for s.Stats().Packets > read.Load()+64 {
					time.Sleep(50 * time.Microsecond)
				}
				if park && id%4 == 2 && parkNow.Load() { // holding packet id-1
					park = false
					parked.Done()
					<-release
				}
				if id%4 == 0 { // a lone packet
					err := s.Deliver(e, pkt(id))
					if err != nil {
						assert.ErrorIs(t, err, ErrClosed)
						refused[e]++
						return
					}
					sent[e] = append(sent[e], id)
					continue
				}
				err := s.Queue(e, pkt(id))
				if err == nil {
					held = append(held, id)
				} else {
					assert.ErrorIs(t, err, ErrClosed)
					refused[e]++
				}
				if len(held) > 0 && (err != nil || id%4 == 3) {
					clear(errs)
					s.Flush(e, errs[:len(held)])
					for i, id := range held {
						if assert.NoError(t, errs[i], "packet %d of engine %d", id, e) {
							sent[e] = append(sent[e], id)
						}
					}
					held = held[:0]
				}
				if err != nil {
					return
				}
			}
		}()
	}
	for s.Stats().Packets < 300 {
		time.Sleep(50 * time.Microsecond)
	}
	parkNow.Store(true)
	parked.Wait()
	closed := make(chan error)
	go func() { closed <- s.Close() }()
	for !s.closed.Load() {
		time.Sleep(10 * time.Microsecond)
	}
	close(release) // the holders go on against a closing sink, engine 2 never stopped
	require.NoError(t, <-closed)
	wg.Wait()
	<-readDone
	st := s.Stats()
	var total uint64
	for e := range engines {
		g := &seen[e]
		assert.Equal(t, sent[e], g.ids, "engine %d: the packets reported sent, each once, in order", e)
		for i, q := range g.seqs {
			if !assert.EqualValues(t, i, q, "engine %d", e) {
				break
			}
		}
		assert.EqualValues(t, len(sent[e]), g.end, "engine %d: the end marker counts the packets sent", e)
		assert.Equal(t, 1, refused[e], "engine %d", e)
		total += uint64(len(sent[e]))
	}
	assert.Equal(t, total, st.Packets)
	assert.EqualValues(t, engines, st.Errors, "the refusals")
	assert.True(t, errors.Is(s.Close(), ErrClosed))
}
