//go:build linux

package udpsink

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewRefusesNonLoopback(t *testing.T) {
	for _, bad := range []string{"192.0.2.1:18515", "[2001:db8::1]:18515"} {
		_, err := New(Config{Addr: bad})
		require.ErrorIs(t, err, ErrNotLoopback, bad)
	}
	_, err := New(Config{Addr: "127.0.0.1:9", Engines: MaxEngines + 1})
	require.ErrorIs(t, err, ErrEngine)
}

// packet returns the segments of a test packet: seq-dependent bytes split in frags pieces.
func packet(engine, seq, size, frags int) [][]byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(engine*31 + seq*7 + i)
	}
	segs := make([][]byte, 0, frags)
	step := (size + frags - 1) / frags
	for off := 0; off < size; off += step {
		segs = append(segs, b[off:min(off+step, size)])
	}
	return segs
}

// TestSinkToReceiver sends packets from several engines at once through a real loopback socket
// pair and demands that the receiver sees each exactly once, in order, with good checksums,
// and stops on the end markers.
func TestSinkToReceiver(t *testing.T) {
	const engines = 3
	perEngine := 300
	if testing.Short() {
		perEngine = 50
	}
	r, err := Listen(ReceiverConfig{Idle: 5 * time.Second})
	require.NoError(t, err)
	defer r.Close()
	s, err := New(Config{Addr: r.Addr().String(), Engines: engines})
	require.NoError(t, err)

	done := make(chan struct{})
	var rep Report
	var runErr error
	go func() { defer close(done); rep, runErr = r.Run(context.Background()) }()

	var wg sync.WaitGroup
	var total int
	for e := range engines {
		for i := range perEngine {
			total += 64 + (i%8)*100
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perEngine {
				if err := s.Deliver(e, packet(e, i, 64+(i%8)*100, 1+i%5)); err != nil {
					t.Error(err)
					return
				}
				if i%32 == 31 {
					time.Sleep(100 * time.Microsecond) // stay under a small rmem_max
				}
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	require.NoError(t, s.Close())
	<-done
	require.NoError(t, runErr)

	assert.Equal(t, Stats{Packets: uint64(engines * perEngine), Bytes: uint64(total), Syscalls: uint64(engines * perEngine)}, st)
	assert.True(t, rep.OK(), rep.String())
	assert.EqualValues(t, engines*perEngine, rep.Packets)
	assert.EqualValues(t, total, rep.Bytes)
	require.Len(t, rep.Engines, engines)
	for e, er := range rep.Engines {
		assert.Equal(t, e, er.Engine)
		assert.EqualValues(t, perEngine, er.Sent)
	}
	assert.ErrorIs(t, s.Close(), ErrClosed)
	assert.ErrorIs(t, s.Deliver(0, packet(0, 0, 8, 1)), ErrClosed)
}

// loopbackSink opens a plain UDP socket on the loopback, closed at the end of the test, and a
// Sink of cfg sending to it.
func loopbackSink(t testing.TB, cfg Config) (*net.UDPConn, *Sink) {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	cfg.Addr = pc.LocalAddr().String()
	s, err := New(cfg)
	require.NoError(t, err)
	return pc, s
}

// TestSinkSendsSegmentsVerbatim reads one datagram with a plain socket: header, then the
// segments' bytes back to back.
func TestSinkSendsSegmentsVerbatim(t *testing.T) {
	pc, s := loopbackSink(t, Config{Engines: 2})
	defer s.Close()

	segs := [][]byte{[]byte("abc"), {}, []byte("defgh"), {0, 0, 0}}
	require.NoError(t, s.Deliver(1, segs))
	require.NoError(t, s.Deliver(1, segs))

	buf := make([]byte, 100)
	require.NoError(t, pc.SetReadDeadline(time.Now().Add(5*time.Second)))
	for seq := range 2 {
		n, err := pc.Read(buf)
		require.NoError(t, err)
		h, err := ParseHeader(buf[:n])
		require.NoError(t, err)
		assert.Equal(t, Header{Engine: 1, Seq: uint64(seq), CRC: Checksum(segs), Run: s.Run()}, h)
		assert.Equal(t, bytes.Join(segs, nil), buf[HeaderLen:n])
	}
}

func TestDeliverErrors(t *testing.T) {
	_, s := loopbackSink(t, Config{Engines: 1})
	defer s.Close()

	assert.ErrorIs(t, s.Deliver(1, [][]byte{{1}}), ErrEngine)
	assert.ErrorIs(t, s.Deliver(-1, [][]byte{{1}}), ErrEngine)
	assert.ErrorIs(t, s.Deliver(0, [][]byte{make([]byte, MaxPayload+1)}), ErrTooLarge)
	assert.Error(t, s.Deliver(0, make([][]byte, iovMax)))
	assert.EqualValues(t, 2, s.Stats().Errors)
}

// TestDeliverDoesNotAllocate asserts the zero-allocation steady state. The peer socket is
// never read: loopback drops what does not fit its buffer, silently.
func TestDeliverDoesNotAllocate(t *testing.T) {
	_, s := loopbackSink(t, Config{Engines: 1})
	defer s.Close()
	segs := packet(0, 0, 4096, 4)
	require.NoError(t, s.Deliver(0, segs)) // warm up
	allocs := testing.AllocsPerRun(200, func() {
		if err := s.Deliver(0, segs); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

func BenchmarkDeliver(b *testing.B) {
	for _, size := range []int{64, 4096} {
		for _, frags := range []int{1, 4} {
			b.Run(fmt.Sprintf("size=%d/frags=%d", size, frags), func(b *testing.B) {
				_, s := loopbackSink(b, Config{})
				defer s.Close()
				segs := packet(0, 0, size, frags)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if err := s.Deliver(0, segs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// Sink implements sdma.Sink (spelled out: this package does not import sdma, so the two build
// independently).
var _ interface{ Deliver(int, [][]byte) error } = (*Sink)(nil)

// TestClosedRefusalsCounted: a packet refused because the sink is closed failed: Stats.Errors
// counts it, whether Deliver or Queue refused it (so it adds up with the engine's count of
// failed packets). Deliver and Queue used not to count it. A packet queued before Close is not
// refused: Close sends it, and the Flush after reports it sent (TestCloseSendsHeldBatches).
func TestClosedRefusalsCounted(t *testing.T) {
	_, s := loopbackSink(t, Config{Engines: 1, Batch: 4})
	require.NoError(t, s.Queue(0, [][]byte{{1}}))
	require.NoError(t, s.Close())
	errs := []error{nil}
	s.Flush(0, errs)
	require.NoError(t, errs[0], "queued before Close: sent by it")
	assert.EqualValues(t, 0, s.Stats().Errors)
	require.ErrorIs(t, s.Deliver(0, [][]byte{{1}}), ErrClosed)
	require.ErrorIs(t, s.Queue(0, [][]byte{{1}}), ErrClosed)
	assert.EqualValues(t, 2, s.Stats().Errors, "every refused packet is counted")
}

// TestCloseMarkersNotCounted: the end-of-run markers Close sends are not packets: Stats after
// Close is Stats before it (Syscalls counts "send system calls made for packets"). Close used to
// add its marker sends (up to five rounds per engine) to Syscalls.
func TestCloseMarkersNotCounted(t *testing.T) {
	_, s := loopbackSink(t, Config{Engines: 2, Batch: 1})
	for e := range 2 {
		require.NoError(t, s.Deliver(e, [][]byte{{1, 2, 3}}))
	}
	before := s.Stats()
	require.NoError(t, s.Close())
	assert.Equal(t, before, s.Stats())
	assert.EqualValues(t, 2, s.Stats().Syscalls)
}

// TestSinkRunID: every frame a sink sends, data (Deliver, and Queue with Flush) and end marker,
// carries its run ID: Config.Run, or one New draws (nonzero, another for another sink). Every
// frame of a run ID Config.Run gave has FlagRunGiven (beside FlagEnd on an end marker), and no
// frame of a drawn one: a receiver that reads a form in given IDs never reads it in a random
// one (before, the frames of both had the same flags).
func TestSinkRunID(t *testing.T) {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer pc.Close()
	s1, err := New(Config{Addr: pc.LocalAddr().String()})
	require.NoError(t, err)
	s2, err := New(Config{Addr: pc.LocalAddr().String()})
	require.NoError(t, err)
	assert.NotZero(t, s1.Run())
	assert.NotEqual(t, s1.Run(), s2.Run(), "two sinks, two runs")
	require.NoError(t, s2.Close())
	s, err := New(Config{Addr: pc.LocalAddr().String(), Batch: 4, Run: 42})
	require.NoError(t, err)
	assert.EqualValues(t, 42, s.Run())
	require.NoError(t, s.Deliver(0, [][]byte{[]byte("lone")}))
	require.NoError(t, s.Queue(0, [][]byte{[]byte("queued")}))
	s.Flush(0, make([]error, 1))
	require.NoError(t, s.Close())
	require.NoError(t, s1.Close())
	require.NoError(t, pc.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 100)
	runs := map[uint64][]uint8{}     // run → flags of its frames, in order
	for range 3*len(endDelays) + 2 { // s2's markers, s's two packets and markers, s1's markers
		n, err := pc.Read(buf)
		require.NoError(t, err)
		h, err := ParseHeader(buf[:n])
		require.NoError(t, err)
		runs[h.Run] = append(runs[h.Run], h.Flags)
	}
	ends := slices.Repeat([]uint8{FlagEnd}, len(endDelays))
	givenEnds := slices.Repeat([]uint8{FlagEnd | FlagRunGiven}, len(endDelays))
	assert.Equal(t, map[uint64][]uint8{s2.Run(): ends, 42: append([]uint8{FlagRunGiven, FlagRunGiven}, givenEnds...), s1.Run(): ends}, runs)
}

// TestRestartedSenderSupersedes: a sender that stops mid-run (no end markers) and a new one on
// the same receiver: the receiver reports the first run as superseded, not ended, and the new
// one clean. The two used to make one run of duplicates and numbers past the end count.
func TestRestartedSenderSupersedes(t *testing.T) {
	r, err := Listen(ReceiverConfig{Idle: 5 * time.Second})
	require.NoError(t, err)
	defer r.Close()
	old, err := New(Config{Addr: r.Addr().String(), Batch: 1})
	require.NoError(t, err)
	for i := range 5 {
		require.NoError(t, old.Deliver(0, packet(0, i, 64, 2)))
	}
	s, err := New(Config{Addr: r.Addr().String(), Batch: 1})
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, s.Deliver(0, packet(0, i, 64, 2)))
	}
	require.NoError(t, s.Close())
	rep, err := r.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, old.Run(), rep.Run)
	assert.True(t, rep.Superseded)
	assert.False(t, rep.OK())
	assert.EqualValues(t, 5, rep.Packets)
	assert.Zero(t, rep.Dups+rep.Beyond+rep.Lost)
	rep, err = r.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, s.Run(), rep.Run)
	assert.True(t, rep.OK(), rep.String())
	assert.EqualValues(t, 3, rep.Packets)
	assert.Zero(t, rep.Stale, "the receiver got both runs' frames in order")
	require.NoError(t, old.Close())
}
