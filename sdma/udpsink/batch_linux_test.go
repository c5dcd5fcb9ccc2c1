//go:build linux

package udpsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/ipv4"
)

// step is one scripted answer of a faultWriter: send the first sent messages for real, then
// return err (nil: a short count without an error, as sendmmsg answers when it stops after
// some messages). sent < 0 means send them all.
type step struct {
	sent int
	err  error
}

// faultWriter wraps the sink's sendmmsg with a script of answers, one per call; once the script
// runs out, every call goes through. It records each call's message count and GSO messages.
type faultWriter struct {
	inner  batchWriter
	script []step
	calls  []int // messages offered per call
	gso    int   // GSO messages offered
}

func (f *faultWriter) WriteBatch(ms []ipv4.Message, flags int) (int, error) {
	f.calls = append(f.calls, len(ms))
	for _, m := range ms {
		if m.OOB != nil {
			f.gso++
		}
	}
	if len(f.script) == 0 {
		return f.inner.WriteBatch(ms, flags)
	}
	st := f.script[0]
	f.script = f.script[1:]
	n := 0
	if st.sent != 0 {
		k := min(len(ms), st.sent)
		if st.sent < 0 {
			k = len(ms)
		}
		var err error
		if n, err = f.inner.WriteBatch(ms[:k], flags); err != nil {
			return n, err
		}
	}
	return n, st.err
}

// sysErr is how x/net reports an errno from sendmmsg.
func sysErr(errno syscall.Errno) error {
	return &net.OpError{Op: "write", Net: "udp", Err: fmt.Errorf("sendmmsg: %w", errno)}
}

// plainPeer is a bare loopback socket that reads the sink's datagrams.
type plainPeer struct {
	t  *testing.T
	pc *net.UDPConn
}

func newPlainPeer(t *testing.T) *plainPeer {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	return &plainPeer{t: t, pc: pc}
}

// read returns the next n datagrams.
func (p *plainPeer) read(n int) [][]byte {
	p.t.Helper()
	var out [][]byte
	buf := make([]byte, 65536)
	require.NoError(p.t, p.pc.SetReadDeadline(time.Now().Add(5*time.Second)))
	for range n {
		k, err := p.pc.Read(buf)
		require.NoError(p.t, err)
		out = append(out, append([]byte(nil), buf[:k]...))
	}
	return out
}

// none asserts that no datagram is waiting.
func (p *plainPeer) none() {
	p.t.Helper()
	require.NoError(p.t, p.pc.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err := p.pc.Read(make([]byte, 65536))
	require.Error(p.t, err, "an unexpected datagram")
}

// checkFrames asserts that dgrams are engine's frames with sequence numbers from seq0 on, in
// order, carrying want's payloads, all of one run (a nonzero run ID).
func checkFrames(t *testing.T, dgrams [][]byte, engine uint8, seq0 uint64, want [][]byte) {
	t.Helper()
	require.Len(t, dgrams, len(want))
	var run uint64
	for i, d := range dgrams {
		h, err := ParseHeader(d)
		require.NoError(t, err)
		if i == 0 {
			run = h.Run
			assert.NotZero(t, run, "the sink draws a nonzero run ID")
		}
		assert.Equal(t, Header{Engine: engine, Seq: seq0 + uint64(i), CRC: Checksum([][]byte{want[i]}), Run: run}, h, "frame %d", i)
		assert.Equal(t, want[i], d[HeaderLen:], "frame %d payload", i)
	}
}

// queueAll queues pkts (each split in two segments) on engine.
func queueAll(t *testing.T, s *Sink, engine int, pkts [][]byte) {
	t.Helper()
	for _, p := range pkts {
		h := len(p) / 3
		require.NoError(t, s.Queue(engine, [][]byte{p[:h], p[h:]}))
	}
}

// payloads makes n payloads of the given sizes (cycled), distinct per index.
func payloads(n int, sizes ...int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = packet(0, i, sizes[i%len(sizes)], 1)[0]
	}
	return out
}

// TestBatchSendsFramesInOrder: one Flush of a batch of mixed sizes sends every frame in order,
// with the packets' bytes, in one sendmmsg; with GSO the runs of one size go as GSO messages
// and the receiver still sees one datagram a frame.
func TestBatchSendsFramesInOrder(t *testing.T) {
	for _, gso := range []bool{false, true} {
		t.Run(fmt.Sprintf("gso=%v", gso), func(t *testing.T) {
			p := newPlainPeer(t)
			s, err := New(Config{Addr: p.pc.LocalAddr().String(), Engines: 2, Batch: 64, GSO: gso})
			require.NoError(t, err)
			defer s.Close()
			fw := &faultWriter{inner: s.w}
			s.w = fw
			// Sizes: a run of 5 of 100 bytes, 1 of 40, a run of 3 of 200, 1 of 100.
			sizes := []int{100, 100, 100, 100, 100, 40, 200, 200, 200, 100}
			var pkts [][]byte
			for i, n := range sizes {
				pkts = append(pkts, packet(1, i, n, 1)[0])
			}
			queueAll(t, s, 1, pkts)
			errs := make([]error, len(pkts))
			s.Flush(1, errs)
			assert.Equal(t, make([]error, len(pkts)), errs)
			checkFrames(t, p.read(len(pkts)), 1, 0, pkts)
			p.none()
			st := s.Stats()
			assert.EqualValues(t, len(pkts), st.Packets)
			assert.EqualValues(t, 1, st.Syscalls)
			assert.EqualValues(t, 1, st.Batches)
			if gso {
				assert.Equal(t, []int{4}, fw.calls, "GSO: 5×100, 40, 3×200, 100")
				assert.EqualValues(t, 2, st.GSOMsgs)
			} else {
				assert.Equal(t, []int{10}, fw.calls)
				assert.Zero(t, st.GSOMsgs)
			}
			// The next batch goes on with the sequence.
			queueAll(t, s, 1, pkts[:2])
			s.Flush(1, errs[:2])
			checkFrames(t, p.read(2), 1, uint64(len(pkts)), pkts[:2])
		})
	}
}

// TestBatchGSOBounds: GSO runs stop at MaxGSOSegments frames and at one datagram's bytes.
func TestBatchGSOBounds(t *testing.T) {
	p := newPlainPeer(t)
	s, err := New(Config{Addr: p.pc.LocalAddr().String(), Batch: 200, GSO: true})
	require.NoError(t, err)
	defer s.Close()
	fw := &faultWriter{inner: s.w}
	s.w = fw
	small := payloads(MaxGSOSegments+6, 48)
	queueAll(t, s, 0, small)
	errs := make([]error, len(small))
	s.Flush(0, errs)
	assert.Equal(t, []int{2}, fw.calls, "64 + 6 frames")
	checkFrames(t, p.read(len(small)), 0, 0, small)
	big := payloads(20, 8000) // 8024-byte frames: 8 fit in 65507 bytes
	queueAll(t, s, 0, big)
	s.Flush(0, errs[:len(big)])
	assert.Equal(t, []int{2, 3}, fw.calls, "8 + 8 + 4 frames")
	checkFrames(t, p.read(len(big)), 0, uint64(len(small)), big)
}

// TestBatchPartialAndErrors drives Flush through each answer the kernel can give, scripted, and
// checks the exact outcome per frame: which were sent (in order, numbered without holes), which
// failed and with what, and how many system calls it took.
func TestBatchPartialAndErrors(t *testing.T) {
	econn, enobufs, eagain := sysErr(syscall.ECONNREFUSED), sysErr(syscall.ENOBUFS), sysErr(syscall.EAGAIN)
	cases := []struct {
		name     string
		gso      bool
		script   []step
		failed   map[int]error // frame → the errno it fails with
		syscalls int
		retries  int
		gsoOff   bool
	}{
		{name: "partial", script: []step{{sent: 3}, {sent: 2}}, syscalls: 3},
		{name: "partial-then-refused", script: []step{{sent: 3}, {err: econn}},
			failed: map[int]error{3: syscall.ECONNREFUSED}, syscalls: 3},
		{name: "refused-first", script: []step{{err: econn}}, failed: map[int]error{0: syscall.ECONNREFUSED}, syscalls: 2},
		{name: "enobufs-transient", script: []step{{sent: 4}, {err: enobufs}, {err: enobufs}}, syscalls: 4, retries: 2},
		{name: "eagain-transient", script: []step{{err: eagain}}, syscalls: 2, retries: 1},
		{name: "enobufs-persistent", script: append([]step{{sent: 5}}, repeat(step{err: enobufs}, retryLimit+1)...),
			failed: map[int]error{5: syscall.ENOBUFS}, syscalls: 1 + retryLimit + 1 + 1, retries: retryLimit},
		{name: "gso-refused", gso: true, script: []step{{err: sysErr(syscall.EIO)}}, syscalls: 2, gsoOff: true},
		{name: "gso-partial-refused", gso: true, script: []step{{sent: 1}, {err: econn}},
			// Messages: frames 0-3 (GSO), 4, 5-7 (GSO). The second, frame 4, is refused.
			failed: map[int]error{4: syscall.ECONNREFUSED}, syscalls: 3},
		{name: "gso-run-refused", gso: true, script: []step{{sent: 0, err: econn}},
			failed: map[int]error{0: syscall.ECONNREFUSED, 1: syscall.ECONNREFUSED, 2: syscall.ECONNREFUSED, 3: syscall.ECONNREFUSED}, syscalls: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPlainPeer(t)
			s, err := New(Config{Addr: p.pc.LocalAddr().String(), Batch: 16, GSO: c.gso})
			require.NoError(t, err)
			defer s.Close()
			s.w = &faultWriter{inner: s.w, script: c.script}
			pkts := payloads(8, 64, 64, 64, 64, 32, 64, 64, 64) // GSO: 4×64, 32, 3×64
			queueAll(t, s, 0, pkts)
			errs := make([]error, len(pkts))
			s.Flush(0, errs)
			var sent [][]byte
			for i, err := range errs {
				if want, ok := c.failed[i]; ok {
					assert.ErrorIs(t, err, want, "frame %d", i)
					continue
				}
				assert.NoError(t, err, "frame %d", i)
				sent = append(sent, pkts[i])
			}
			checkFrames(t, p.read(len(sent)), 0, 0, sent) // numbered without holes
			p.none()
			st := s.Stats()
			assert.EqualValues(t, len(sent), st.Packets)
			assert.EqualValues(t, len(c.failed), st.Errors)
			assert.EqualValues(t, c.syscalls, st.Syscalls)
			assert.EqualValues(t, c.retries, st.Retries)
			assert.Equal(t, c.gsoOff, st.GSOOff == 1)
			assert.Equal(t, c.gso && !c.gsoOff, s.gso.Load())
			// The batch is gone: the next Flush sends nothing.
			s.Flush(0, nil)
			assert.EqualValues(t, c.syscalls, s.Stats().Syscalls)
		})
	}
}

func repeat(s step, n int) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestBatchRealConnRefused: with nobody listening, the kernel answers some sends with
// ECONNREFUSED (the ICMP of an earlier datagram); each frame is sent or fails with it, once, and
// the counters agree.
func TestBatchRealConnRefused(t *testing.T) {
	p := newPlainPeer(t)
	addr := p.pc.LocalAddr().String()
	require.NoError(t, p.pc.Close())
	s, err := New(Config{Addr: addr, Batch: 16})
	require.NoError(t, err)
	defer s.Close()
	pkts := payloads(16, 64)
	refused := 0
	for range 4 {
		queueAll(t, s, 0, pkts)
		errs := make([]error, len(pkts))
		s.Flush(0, errs)
		for _, err := range errs {
			if err != nil {
				require.ErrorIs(t, err, syscall.ECONNREFUSED)
				refused++
			}
		}
	}
	st := s.Stats()
	assert.NotZero(t, refused, "loopback reports the closed port")
	assert.EqualValues(t, refused, st.Errors)
	assert.EqualValues(t, 4*len(pkts), st.Packets+st.Errors)
}

// TestQueueFlushErrors: bad engines, oversized packets and a closed sink.
func TestQueueFlushErrors(t *testing.T) {
	p := newPlainPeer(t)
	s, err := New(Config{Addr: p.pc.LocalAddr().String(), Batch: 4})
	require.NoError(t, err)
	assert.ErrorIs(t, s.Queue(1, [][]byte{{1}}), ErrEngine)
	assert.ErrorIs(t, s.Queue(0, [][]byte{make([]byte, MaxPayload+1)}), ErrTooLarge)
	assert.Error(t, s.Queue(0, make([][]byte, iovMax)))
	errs := []error{nil}
	s.Flush(1, errs)
	assert.ErrorIs(t, errs[0], ErrEngine)
	// The refused packets left nothing behind: one good packet goes out as seq 0.
	queueAll(t, s, 0, payloads(1, 12))
	errs[0] = nil
	s.Flush(0, errs)
	require.NoError(t, errs[0])
	checkFrames(t, p.read(1), 0, 0, payloads(1, 12))
	// A packet held at Close: Close sends it (seq 1), and the Flush after reports it sent.
	queueAll(t, s, 0, payloads(1, 12))
	require.NoError(t, s.Close())
	errs[0] = ErrInvalid
	s.Flush(0, errs)
	assert.NoError(t, errs[0])
	checkFrames(t, p.read(1), 0, 1, payloads(1, 12))
	assert.ErrorIs(t, s.Queue(0, [][]byte{{1}}), ErrClosed)
	for _, bad := range []int{-1, iovMax + 1} {
		_, err := New(Config{Addr: p.pc.LocalAddr().String(), Batch: bad})
		assert.Error(t, err, "batch %d", bad)
	}
}

// TestBatchGrowsPastLimit: a sink used with larger batches than configured grows its buffers
// and keeps every frame's header right.
func TestBatchGrowsPastLimit(t *testing.T) {
	p := newPlainPeer(t)
	s, err := New(Config{Addr: p.pc.LocalAddr().String(), Batch: 2})
	require.NoError(t, err)
	defer s.Close()
	pkts := payloads(40, 24, 36)
	queueAll(t, s, 0, pkts)
	errs := make([]error, len(pkts))
	s.Flush(0, errs)
	checkFrames(t, p.read(len(pkts)), 0, 0, pkts)
}

// TestBatchToReceiverConcurrent: engines queue and flush concurrently into a Receiver reading
// with recvmmsg; it sees every frame once, in order, with good checksums.
func TestBatchToReceiverConcurrent(t *testing.T) {
	for _, gso := range []bool{false, true} {
		t.Run(fmt.Sprintf("gso=%v", gso), func(t *testing.T) {
			const engines = 3
			per := 600
			if testing.Short() {
				per = 200
			}
			s, r, done := sinkToReceiver(t, Config{Engines: engines, Batch: 32, GSO: gso})
			var wg sync.WaitGroup
			for e := range engines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs := make([]error, 32)
					for i := 0; i < per; {
						k := min(1+(i*7)%32, per-i)
						for j := range k {
							if err := s.Queue(e, packet(e, i+j, 64+((i+j)/5%3)*400, 2)); err != nil {
								t.Error(err)
								return
							}
						}
						clear(errs)
						s.Flush(e, errs[:k])
						for _, err := range errs[:k] {
							assert.NoError(t, err)
						}
						i += k
						if !stayWithin(t, s, r, 1000) { // stay within the receive buffer
							return
						}
					}
				}()
			}
			wg.Wait()
			st := s.Stats()
			require.NoError(t, s.Close())
			rep := <-done
			assert.True(t, rep.OK(), rep.String())
			assert.EqualValues(t, engines*per, rep.Packets)
			assert.EqualValues(t, engines*per, st.Packets)
			assert.Less(t, st.Syscalls, st.Packets/4, "batched: far fewer syscalls than packets")
			t.Logf("%+v", st)
		})
	}
}

// sinkToReceiver starts a Receiver, a Sink of cfg that sends to it, and the Receiver's Run, whose
// report comes on the channel. The Receiver closes with the test.
func sinkToReceiver(t *testing.T, cfg Config) (*Sink, *Receiver, <-chan Report) {
	t.Helper()
	r, err := Listen(ReceiverConfig{Idle: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	cfg.Addr = r.Addr().String()
	s, err := New(cfg)
	require.NoError(t, err)
	done := make(chan Report, 1)
	go func() {
		rep, err := r.Run(context.Background())
		assert.NoError(t, err)
		done <- rep
	}()
	return s, r, done
}

// TestBatchFramesMatchDeliver: a batch of one and Deliver put the same bytes on the wire.
func TestBatchFramesMatchDeliver(t *testing.T) {
	p := newPlainPeer(t)
	a, err := New(Config{Addr: p.pc.LocalAddr().String()})
	require.NoError(t, err)
	defer a.Close()
	segs := [][]byte{[]byte("abcd"), {}, []byte("efgh")}
	require.NoError(t, a.Deliver(0, segs))
	require.NoError(t, a.Queue(0, segs))
	errs := []error{errors.New("unset")}
	errs[0] = nil
	a.Flush(0, errs)
	require.NoError(t, errs[0])
	d := p.read(2)
	assert.Equal(t, d[0][HeaderLen:], d[1][HeaderLen:])
	h0, _ := ParseHeader(d[0])
	h1, _ := ParseHeader(d[1])
	assert.Equal(t, h0.CRC, h1.CRC)
	assert.Equal(t, []uint64{0, 1}, []uint64{h0.Seq, h1.Seq})
	assert.True(t, bytes.Equal(d[0][HeaderLen:], []byte("abcdefgh")))
}
