package udpsink

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"math"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/ipv4"

	"github.com/gosdma/gosdma/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func TestHeaderRoundTrip(t *testing.T) {
	b := make([]byte, HeaderLen)
	want := Header{Flags: FlagEnd, Engine: 7, Seq: 1<<40 + 3, CRC: 0xdeadbeef, Run: 1<<63 | 5}
	PutHeader(b, want)
	got, err := ParseHeader(b)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	_, err = ParseHeader(b[:HeaderLen-1])
	assert.ErrorIs(t, err, ErrBadFrame)
	b[0] ^= 0xff
	_, err = ParseHeader(b)
	assert.ErrorIs(t, err, ErrBadFrame)
}

func TestChecksumOfSegmentsIsChecksumOfConcatenation(t *testing.T) {
	segs := [][]byte{[]byte("hello, "), nil, []byte("gather "), []byte("world")}
	assert.Equal(t, crc32.Checksum([]byte("hello, gather world"), castagnoli), Checksum(segs))
}

func TestResolveLoopback(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:0", ":0", "127.1.2.3:9", "[::1]:9"} {
		_, err := ResolveLoopback(ok)
		assert.NoError(t, err, ok)
	}
	for _, bad := range []string{"10.1.2.3:9", "192.0.2.1:18515", "[2001:db8::1]:9", "0.0.0.0:9"} {
		_, err := ResolveLoopback(bad)
		assert.ErrorIs(t, err, ErrNotLoopback, bad)
		assert.ErrorContains(t, err, "loopback")
	}
	_, err := ResolveLoopback("127.0.0.1") // no port
	assert.Error(t, err)
}

func TestListenRefusesNonLoopback(t *testing.T) {
	_, err := Listen(ReceiverConfig{Addr: "192.0.2.1:0"})
	assert.ErrorIs(t, err, ErrNotLoopback)
}

func TestReceiverIdleTimeout(t *testing.T) {
	r, err := Listen(ReceiverConfig{Idle: 50 * time.Millisecond})
	require.NoError(t, err)
	defer r.Close()
	start := time.Now()
	rep, err := r.Run(context.Background())
	require.NoError(t, err)
	assert.True(t, rep.IdleTimeout)
	assert.False(t, rep.Ended)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestReceiverContextCancel(t *testing.T) {
	r, err := Listen(ReceiverConfig{Idle: time.Minute})
	require.NoError(t, err)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err = r.Run(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// frame builds a datagram by hand.
func frame(flags, engine uint8, seq uint64, payload []byte, crc uint32) []byte {
	b := make([]byte, HeaderLen+len(payload))
	PutHeader(b, Header{Flags: flags, Engine: engine, Seq: seq, CRC: crc})
	copy(b[HeaderLen:], payload)
	return b
}

// inRun sets the run ID of frame d (run 0 as frame and endFrame build them).
func inRun(run uint64, d []byte) []byte {
	binary.LittleEndian.PutUint64(d[16:], run)
	return d
}

func endFrame(engine uint8, sent uint64, engines uint32) []byte {
	p := binary.LittleEndian.AppendUint32(nil, engines)
	return frame(FlagEnd, engine, sent, p, crc32.Checksum(p, castagnoli))
}

// TestReceiverCountsLossDupsAndCorruption sends hand-made frames: a gap, a duplicate, a bad
// checksum, a bad magic, a short datagram, then the end markers of two engines (one repeated).
func TestReceiverCountsLossDupsAndCorruption(t *testing.T) {
	r, err := Listen(ReceiverConfig{Idle: 5 * time.Second})
	require.NoError(t, err)
	defer r.Close()
	c, err := net.DialUDP("udp", nil, r.Addr())
	require.NoError(t, err)
	defer c.Close()

	p := []byte("payload!")
	good := crc32.Checksum(p, castagnoli)
	dgrams := [][]byte{
		frame(0, 0, 0, p, good),
		frame(0, 0, 1, p, good),
		frame(0, 0, 3, p, good),                         // seq 2 lost
		frame(0, 0, 3, p, good),                         // duplicate
		frame(0, 0, 4, p, good^1),                       // bad checksum
		{0x00, 0x01, 0x02},                              // short
		append([]byte{0xff, 0xff}, make([]byte, 20)...), // bad magic
		frame(0, 1, 0, p, good),
		endFrame(0, 6, 2), // engine 0 sent 6: seq 2 and 5 lost
		endFrame(0, 6, 2), // a repeat, ignored
		endFrame(1, 1, 2),
	}
	done := make(chan struct{})
	var rep Report
	var runErr error
	go func() { defer close(done); rep, runErr = r.Run(context.Background()) }()
	for _, d := range dgrams {
		_, err := c.Write(d)
		require.NoError(t, err)
	}
	<-done
	require.NoError(t, runErr)
	assert.True(t, rep.Ended)
	assert.False(t, rep.OK())
	assert.EqualValues(t, 6, rep.Packets)
	assert.EqualValues(t, 6*len(p), rep.Bytes)
	assert.EqualValues(t, 2, rep.Lost)
	assert.EqualValues(t, 1, rep.Dups)
	assert.EqualValues(t, 1, rep.BadChecksum)
	assert.EqualValues(t, 2, rep.BadFrames)
	require.Len(t, rep.Engines, 2)
	assert.Equal(t, EngineReport{Engine: 0, Packets: 5, Bytes: 40, Sent: 6, Lost: 2, Dups: 1, BadChecksum: 1, Ended: true}, rep.Engines[0])
	assert.Equal(t, EngineReport{Engine: 1, Packets: 1, Bytes: 8, Sent: 1, Ended: true}, rep.Engines[1])
	assert.Contains(t, rep.String(), "lost 2")
}

// TestReceiverSeqBeyondEndCount: an engine whose frames skip a sequence number and go one past
// the count its end marker gives (seqs 0, 1, 3 with "sent 3": frame 2 lost, and a frame the
// sender says it never sent) is not a clean run. The receiver counts distinct frames only, so
// the extra frame hid the lost one and the report said OK: the hole a sink that failed to
// renumber after a failed frame (failFrames) would leave went unseen. Lost now counts the
// numbers never received below max(Sent, highest+1), and Beyond the numbers past Sent.
func TestReceiverSeqBeyondEndCount(t *testing.T) {
	p := []byte("payload!")
	good := crc32.Checksum(p, castagnoli)
	st := &runState{want: -1}
	for _, d := range [][]byte{frame(0, 0, 0, p, good), frame(0, 0, 1, p, good), frame(0, 0, 3, p, good)} {
		require.False(t, st.frame(d))
	}
	require.True(t, st.frame(endFrame(0, 3, 1)))
	st.finish()
	assert.False(t, st.rep.OK(), "frame 2 lost, frame 3 never sent: %s", st.rep.String())
	assert.EqualValues(t, 1, st.rep.Lost)
	assert.EqualValues(t, 1, st.rep.Beyond)
	// No hole, one frame past the count: not clean either.
	st = &runState{want: -1}
	for seq := range uint64(4) {
		require.False(t, st.frame(frame(0, 0, seq, p, good)))
	}
	require.True(t, st.frame(endFrame(0, 3, 1)))
	st.finish()
	assert.False(t, st.rep.OK(), "frame 3 never sent: %s", st.rep.String())
	assert.EqualValues(t, 0, st.rep.Lost)
	assert.EqualValues(t, 1, st.rep.Beyond)
	assert.Contains(t, st.rep.String(), "numbered 1 past the end count")
}

// oneBatch is a batchReader whose first ReadBatch returns dgrams, all at once (as one recvmmsg
// does when they wait in the socket), and whose later ones time out (no more datagrams).
type oneBatch struct {
	dgrams [][]byte
	calls  int
}

func (b *oneBatch) ReadBatch(ms []ipv4.Message, _ int) (int, error) {
	b.calls++
	if b.calls > 1 {
		return 0, os.ErrDeadlineExceeded
	}
	for i, d := range b.dgrams {
		ms[i].N = copy(ms[i].Buffers[0], d)
	}
	return len(b.dgrams), nil
}

// TestReceiverKeepsDatagramsPastTheEnd: a Run ends on the end markers, and the datagrams that
// one recvmmsg read after them go to the next Run (as a sweep's next size reaches the receiver
// behind the previous size's markers). Run dropped the rest of its last batch as "repeats": the
// next run's frames and markers there were lost, and that Run idled out having seen nothing.
// The repeat of run 1's marker was a run of its own before frames carried a run ID; it is now
// a stale datagram of the next Run.
func TestReceiverKeepsDatagramsPastTheEnd(t *testing.T) {
	r, err := Listen(ReceiverConfig{Idle: 5 * time.Second})
	require.NoError(t, err)
	defer r.Close()
	p := []byte("payload!")
	good := crc32.Checksum(p, castagnoli)
	// Run 1 (no packets, one engine), a repeat of its marker, then run 2 (two packets), read
	// by one recvmmsg.
	dgrams := [][]byte{inRun(1, endFrame(0, 0, 1)), inRun(1, endFrame(0, 0, 1)),
		inRun(2, frame(0, 0, 0, p, good)), inRun(2, frame(0, 0, 1, p, good)), inRun(2, endFrame(0, 2, 1))}
	r.rd = &oneBatch{dgrams: dgrams}
	want := []Report{
		{Ended: true, Run: 1, Engines: []EngineReport{{Ended: true}}},
		{Ended: true, Run: 2, Stale: 1, StaleEnds: 1, Packets: 2, Bytes: 16, Engines: []EngineReport{{Packets: 2, Bytes: 16, Sent: 2, Ended: true}}}, // the repeat: stale
	}
	for i, w := range want {
		rep, err := r.Run(context.Background())
		require.NoError(t, err, "run %d", i)
		rep.Elapsed = 0
		assert.Equal(t, w, rep, "run %d", i)
		assert.True(t, rep.OK(), "run %d: %s", i, rep.String())
	}
	assert.EqualValues(t, len(dgrams), r.Received())
	// Nothing is left: the next Run reads, and idles out.
	rep, err := r.Run(context.Background())
	require.NoError(t, err)
	assert.True(t, rep.IdleTimeout)
	assert.Zero(t, rep.Packets)
}

// TestReceiverTopSequenceNumber: a frame numbered math.MaxUint64 (its header is not under the
// checksum) is the highest there can be. Its seq+1 wrapped to 0: every later frame counted as
// new (the duplicates below went uncounted), Beyond read 0 however far past the end count the
// numbering went, Sent without an end marker read 0, and Lost could underflow (frames 0, 1 and
// 2^64-1 with "sent 2" read lost 2^64-1).
func TestReceiverTopSequenceNumber(t *testing.T) {
	p := []byte("x")
	good := crc32.Checksum(p, castagnoli)
	st := &runState{want: -1}
	for _, seq := range []uint64{0, 1, math.MaxUint64, 1, math.MaxUint64} {
		require.False(t, st.frame(frame(0, 0, seq, p, good)))
	}
	require.True(t, st.frame(endFrame(0, 2, 1)))
	st.finish()
	// Received: 0, 1 and 2^64-1; the numbers 2 .. 2^64-2 never arrived; 2 .. 2^64-1 are past
	// the count of 2.
	assert.Equal(t, EngineReport{Packets: 5, Bytes: 5, Sent: 2, Lost: math.MaxUint64 - 2, Beyond: math.MaxUint64 - 1, Dups: 2, Ended: true}, st.rep.Engines[0])
	// Without an end marker, Sent is highest+1 saturated.
	st = &runState{want: -1}
	require.False(t, st.frame(frame(0, 3, math.MaxUint64, p, good)))
	st.finish()
	assert.Equal(t, EngineReport{Engine: 3, Packets: 1, Bytes: 1, Sent: math.MaxUint64, Lost: math.MaxUint64}, st.rep.Engines[0])
}

// TestReceiverLateFrame: a frame that arrives after a higher one (0, 2, 1 with "sent 3") is
// counted in Dups, and its number in Lost, as EngineReport's doc says: the receiver keeps no
// list of the numbers it saw. Lost's doc said "numbers that never arrived", which 1 did.
func TestReceiverLateFrame(t *testing.T) {
	p := []byte("x")
	good := crc32.Checksum(p, castagnoli)
	st := &runState{want: -1}
	for _, seq := range []uint64{0, 2, 1} {
		require.False(t, st.frame(frame(0, 0, seq, p, good)))
	}
	require.True(t, st.frame(endFrame(0, 3, 1)))
	st.finish()
	assert.Equal(t, EngineReport{Packets: 3, Bytes: 3, Sent: 3, Lost: 1, Dups: 1, Ended: true}, st.rep.Engines[0])
	assert.False(t, st.rep.OK())
}

// batches is a batchReader whose ReadBatch calls return its batches in turn (each as one
// recvmmsg returns the datagrams waiting), then time out.
type batches [][][]byte

func (b *batches) ReadBatch(ms []ipv4.Message, _ int) (int, error) {
	if len(*b) == 0 {
		return 0, os.ErrDeadlineExceeded
	}
	next := (*b)[0]
	*b = (*b)[1:]
	for i, d := range next {
		ms[i].N = copy(ms[i].Buffers[0], d)
	}
	return len(next), nil
}

// TestReceiverTellsRunsApart: the receiver counts a datagram in the run its run ID names. Before
// frames carried one, an earlier run's datagrams counted in the current run: the repeat of run
// A's engine 0 marker (its engine 1 repeat lost) ended engine 0 of run B at A's count, and B's
// frames then read as numbered past it; A's late frame counted as B's; and a sender restarted
// mid-run (C, then D from seq 0 again) read as duplicates and numbers past D's count in one run.
// Now A's datagrams in B's Run are stale, and D's first frame ends C's Run (superseded) and
// opens the next.
func TestReceiverTellsRunsApart(t *testing.T) {
	const a, b, c, d = 0xa, 0xb, 0xc, 0xd
	p := []byte("payload!")
	good := crc32.Checksum(p, castagnoli)
	r, err := Listen(ReceiverConfig{Idle: 5 * time.Second})
	require.NoError(t, err)
	defer r.Close()
	script := batches{
		{ // run A, two engines, ends
			inRun(a, frame(0, 0, 0, p, good)), inRun(a, frame(0, 1, 0, p, good)),
			inRun(a, endFrame(0, 1, 2)), inRun(a, endFrame(1, 1, 2)),
		},
		{ // a repeat of A's engine 0 marker, run B, and a late frame of A within it
			inRun(a, endFrame(0, 1, 2)),
			inRun(b, frame(0, 0, 0, p, good)), inRun(b, frame(0, 0, 1, p, good)),
			inRun(a, frame(0, 1, 0, p, good)),
			inRun(b, endFrame(0, 2, 2)), inRun(b, endFrame(1, 0, 2)),
		},
		{ // run C: two frames, then its sender restarts as run D
			inRun(c, frame(0, 0, 0, p, good)), inRun(c, frame(0, 0, 1, p, good)),
			inRun(d, frame(0, 0, 0, p, good)), inRun(d, endFrame(0, 1, 1)),
			inRun(c, endFrame(0, 2, 1)), // C's sender, late: stale
		},
	}
	r.rd = &script
	one := func(packets uint64, sent uint64) EngineReport {
		return EngineReport{Packets: packets, Bytes: packets * uint64(len(p)), Sent: sent, Ended: true}
	}
	e1 := func(er EngineReport) EngineReport { er.Engine = 1; return er }
	want := []Report{
		{Run: a, Ended: true, Packets: 2, Bytes: 16, Engines: []EngineReport{one(1, 1), e1(one(1, 1))}},
		{Run: b, Ended: true, Stale: 2, StaleEnds: 1, Packets: 2, Bytes: 16, Engines: []EngineReport{one(2, 2), e1(one(0, 0))}},
		{Run: c, Superseded: true, Packets: 2, Bytes: 16, Engines: []EngineReport{{Packets: 2, Bytes: 16, Sent: 2}}},
		{Run: d, Ended: true, Packets: 1, Bytes: 8, Engines: []EngineReport{one(1, 1)}},
		{Stale: 1, StaleEnds: 1, IdleTimeout: true}, // C's late marker, nothing else
	}
	for i, w := range want {
		rep, err := r.Run(context.Background())
		require.NoError(t, err, "run %d", i)
		rep.Elapsed = 0
		assert.Equal(t, w, rep, "run %d", i)
		assert.Equal(t, i < 4 && i != 2, rep.OK(), "run %d: %s", i, rep.String())
	}
	assert.EqualValues(t, 15, r.Received())
	assert.Contains(t, (&want[2]).String(), "superseded by a new run")
	assert.Contains(t, (&want[1]).String(), "2 stale datagrams")
}

// TestReceiverReportsRunGiven: Report.RunGiven is the FlagRunGiven of the run's frames (a run
// ID its sender gave, not drawn at random), and a flag bit the receiver does not know (0x80)
// changes nothing in the tally, as the package documentation promises a sender of a later
// bit: the frame is a packet, its marker ends the run.
func TestReceiverReportsRunGiven(t *testing.T) {
	p := []byte("payload!")
	good := crc32.Checksum(p, castagnoli)
	end := func(flags uint8) []byte {
		d := endFrame(0, 1, 1)
		d[2] |= flags
		return d
	}
	script := batches{{
		inRun(0xa, frame(FlagRunGiven|0x80, 0, 0, p, good)), inRun(0xa, end(FlagRunGiven|0x80)),
		inRun(0xb, frame(0, 0, 0, p, good)), inRun(0xb, end(0)),
	}}
	r, err := Listen(ReceiverConfig{Idle: 5 * time.Second})
	require.NoError(t, err)
	defer r.Close()
	r.rd = &script
	for _, w := range []struct {
		run   uint64
		given bool
	}{{0xa, true}, {0xb, false}} {
		rep, err := r.Run(context.Background())
		require.NoError(t, err)
		assert.Equal(t, w.run, rep.Run)
		assert.Equal(t, w.given, rep.RunGiven, "run %#x", w.run)
		assert.True(t, rep.OK(), rep.String())
		assert.EqualValues(t, 1, rep.Packets, "run %#x", w.run)
	}
}
