package udpsink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	// Addr is the loopback address to listen on; "" means "127.0.0.1:0" (any free port).
	Addr string
	// Idle stops Run when no datagram arrived for this long; 0 means 5s.
	Idle time.Duration
	// ReadBuffer is the socket receive buffer in bytes; 0 means 32 MiB, a negative size is
	// ErrInvalid. A full receive buffer is where loopback UDP loses packets, and a batching sender
	// fills it in bursts. On Linux a process allowed to (CAP_NET_ADMIN) sets it with
	// SO_RCVBUFFORCE, past net.core.rmem_max; otherwise SO_RCVBUF, which the kernel caps at
	// rmem_max.
	ReadBuffer int
}

// Receiver receives the Sink's datagrams and checks them: per-engine sequence order, payload
// checksum, loss. Each Run reports one run of one sender (one Sink's run ID, Config.Run): the
// first datagram it takes of a run no Run has reported yet names the run; datagrams of the last
// eight runs it reported (late frames, repeated end markers) are counted as Report.Stale only, and a
// datagram of yet another run ends the Run (Report.Superseded: the sender restarted) and is the
// next Run's first. It expects one sender at a time. One Run (or RunWithin) at a time: a Run
// called while another runs returns an error matching ErrInvalid ("already running") at once,
// reading nothing. Addr, Received, Pending and Close are safe for concurrent use.
//
// Make one with Listen. The zero Receiver has no socket: Run, RunWithin and Close refuse it with
// an error matching ErrInvalid that says so, and so does Pending; its Addr is nil.
type Receiver struct {
	conn *net.UDPConn
	rd   batchReader // recvmmsg on conn
	idle time.Duration
	// received counts the datagrams Run has taken in: atomic add by Run (one per batch read),
	// load by Received.
	received atomic.Uint64
	// closed is set by the first Close (CAS), which alone closes the socket.
	closed atomic.Bool
	// running is set by a Run or RunWithin for its duration (CAS false to true at its start,
	// store false at its end): a second one meanwhile fails the CAS and is refused, so the
	// fields below, Run's only, have one writer.
	running atomic.Bool
	// msgs are Run's receive buffers (recvBatch datagrams of 64 KiB each), allocated by the
	// first Run. msgs[next:n] are datagrams a Run read but did not tally, because the end
	// markers before them in the same recvmmsg ended it (the next run's frames, say): the next
	// Run tallies them first. Run only.
	msgs    []ipv4.Message
	next, n int
	// done are the IDs of the last len(done) runs a Run reported (ended or not), a ring: the
	// next goes to done[ndone%len(done)]. Their datagrams are stale. Run only.
	done  [8]uint64
	ndone int
}

// EngineReport is what a Receiver saw from one engine.
type EngineReport struct {
	Engine  int    `json:"engine"`  // the engine number of the frames' headers (Header.Engine)
	Packets uint64 `json:"packets"` // data frames received, duplicates and bad checksums included
	Bytes   uint64 `json:"bytes"`   // payload bytes of those frames
	Sent    uint64 `json:"sent"`    // packets the sender says it sent (end marker), or highest seq+1
	// Lost is the sequence numbers below max(Sent, highest seq+1) that did not arrive in order:
	// never, or late (after a higher one; such a frame is counted in Dups too, since the
	// receiver keeps no list of the numbers it saw). Loopback keeps a socket's order, so a late
	// frame means a sender that reordered.
	Lost        uint64 `json:"lost"`
	Beyond      uint64 `json:"beyond"`       // how far past Sent the numbering went: highest seq+1 less Sent, with an end marker (numbers, not frames)
	Dups        uint64 `json:"dups"`         // frames whose seq was below one already seen (late or duplicate)
	BadChecksum uint64 `json:"bad_checksum"` // frames whose payload CRC-32C did not match
	Ended       bool   `json:"ended"`        // the end-of-run marker arrived
}

// Report is what a Receiver saw in one run.
type Report struct {
	Packets     uint64         `json:"packets"`      // data frames received, all engines (the sum of EngineReport.Packets)
	Bytes       uint64         `json:"bytes"`        // their payload bytes (the sum of EngineReport.Bytes)
	Lost        uint64         `json:"lost"`         // sequence numbers missing or late, all engines (the sum of EngineReport.Lost)
	Beyond      uint64         `json:"beyond"`       // sequence numbers past the engines' end-marker counts, up to the highest received (EngineReport.Beyond)
	Dups        uint64         `json:"dups"`         // late or duplicate frames (the sum of EngineReport.Dups)
	BadChecksum uint64         `json:"bad_checksum"` // frames whose payload CRC-32C did not match (the sum of EngineReport.BadChecksum)
	BadFrames   uint64         `json:"bad_frames"`   // datagrams too short or with a wrong magic
	Engines     []EngineReport `json:"engines"`      // engines heard from, by number
	Ended       bool           `json:"ended"`        // end markers arrived from every engine of the run
	IdleTimeout bool           `json:"idle_timeout"` // Run ended because no datagram arrived for ReceiverConfig.Idle
	Elapsed     time.Duration  `json:"elapsed_ns"`   // first datagram to last
	// Run is the run ID of the run reported (Header.Run); 0 when no frame of a run arrived.
	Run uint64 `json:"run"`
	// RunGiven says the run's first frame carried FlagRunGiven: its sender gave the run ID
	// (Config.Run), so that a form the ID has is the sender's, not chance.
	RunGiven bool `json:"run_given"`
	// Stale counts the datagrams of runs that earlier Runs reported (late frames, repeated end
	// markers), which are not counted anywhere else.
	Stale uint64 `json:"stale"`
	// StaleEnds counts the end markers among Stale. A Sink repeats its end markers after its
	// run ended (Close), so a Run after another usually counts a few; Stale less StaleEnds are
	// packets of runs already reported (a superseded run's sender still sending, a late frame).
	StaleEnds uint64 `json:"stale_ends"`
	// Superseded says a datagram of another run arrived before this run's end markers (a
	// sender restarted): the Run ended there, and that datagram opens the next Run.
	Superseded bool `json:"superseded"`
}

// OK reports whether the run ended cleanly with nothing lost, duplicated or corrupted.
func (r *Report) OK() bool {
	return r.Ended && r.Lost == 0 && r.Beyond == 0 && r.Dups == 0 && r.BadChecksum == 0 && r.BadFrames == 0
}

// String summarises the report on one line.
func (r *Report) String() string {
	end := "end marker"
	switch {
	case r.Ended:
	case r.Superseded:
		end = "superseded by a new run"
	case r.IdleTimeout:
		end = "idle timeout"
	default:
		end = "no end marker"
	}
	if r.Stale != 0 {
		end += fmt.Sprintf("; %d stale datagrams of earlier runs", r.Stale)
	}
	beyond := ""
	if r.Beyond != 0 {
		beyond = fmt.Sprintf(", numbered %d past the end count", r.Beyond)
	}
	return fmt.Sprintf("received %d packets, %d bytes from %d engine(s) in %v: lost %d%s, dups %d, bad checksum %d, bad frames %d (%s)",
		r.Packets, r.Bytes, len(r.Engines), r.Elapsed.Round(time.Microsecond), r.Lost, beyond, r.Dups, r.BadChecksum, r.BadFrames, end)
}

// Listen opens a receiver on a loopback address. It refuses other addresses with an error
// matching ErrNotLoopback.
func Listen(cfg ReceiverConfig) (*Receiver, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Idle == 0 {
		cfg.Idle = 5 * time.Second
	}
	if cfg.Idle < 0 {
		return nil, fmt.Errorf("%w: negative idle timeout %v", ErrInvalid, cfg.Idle)
	}
	if cfg.ReadBuffer == 0 {
		cfg.ReadBuffer = 32 << 20
	}
	if cfg.ReadBuffer < 0 {
		return nil, fmt.Errorf("%w: ReadBuffer %d bytes, want a positive size (0: 32 MiB)", ErrInvalid, cfg.ReadBuffer)
	}
	ua, err := ResolveLoopback(cfg.Addr)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("udpsink: listen %s: %w", ua, err)
	}
	if cfg.ReadBuffer > 0 {
		setReadBuffer(conn, cfg.ReadBuffer)
	}
	r := &Receiver{conn: conn, idle: cfg.Idle}
	if ua.IP.To4() != nil {
		r.rd = ipv4.NewPacketConn(conn)
	} else {
		r.rd = ipv6.NewPacketConn(conn)
	}
	return r, nil
}

// Addr returns the address the receiver listens on (with the port chosen, for ":0").
func (r *Receiver) Addr() *net.UDPAddr {
	if r.conn == nil {
		return nil
	}
	return r.conn.LocalAddr().(*net.UDPAddr)
}

// errZeroReceiver refuses a call of the zero Receiver, which has no socket.
func errZeroReceiver(name string) error {
	return fmt.Errorf("udpsink: Receiver.%s: the zero Receiver, not made by Listen: it has no socket: %w", name, ErrInvalid)
}

// Received returns the number of datagrams a Run has read so far (all runs, every kind of
// frame): a sender may pace itself on it. Safe for concurrent use.
func (r *Receiver) Received() uint64 { return r.received.Load() }

// Close closes the socket; a Run in progress returns. Closing a closed Receiver does nothing and
// returns nil (it used to return the socket's "use of closed network connection").
func (r *Receiver) Close() error {
	if r.conn == nil {
		return errZeroReceiver("Close")
	}
	if !r.closed.CompareAndSwap(false, true) {
		return nil
	}
	return r.conn.Close()
}

// engineTrack is the receiver's per-engine state.
type engineTrack struct {
	seen bool
	// next is the highest seq seen + 1; when that seq was math.MaxUint64 (a frame numbered at
	// the very top, whose header is not under the checksum), next stays MaxUint64 and top is
	// set: next then stands for 2^64, and every later frame is below one already seen.
	next     uint64
	top      bool
	distinct uint64 // frames whose seq was at or above next when they arrived
	rep      EngineReport
}

// recvBatch is how many datagrams one recvmmsg(2) may return (ReadBatch).
const recvBatch = 32

// batchReader is the recvmmsg seam: ipv4.PacketConn and ipv6.PacketConn (same Message type).
type batchReader interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
}

// runState is one Run's tally.
type runState struct {
	rep    Report
	tracks [MaxEngines]engineTrack
	want   int // engines in the run, from the end markers; -1 before the first
	ended  int // engines whose end marker arrived
	// haveRun is set by the first frame of a run not in done, whose ID goes to rep.Run.
	haveRun bool
	done    []uint64 // the IDs of the runs earlier Runs reported (Receiver.done)
	// over is when a RunWithin with no run begun first found its wait over (a read failed on its
	// deadline): it reads what waits for its wait again from then at most (drainable).
	over time.Time
}

// Run receives until the end-of-run markers of every engine arrived (nil error), a datagram of
// another run arrived first (nil error, Report.Superseded), no datagram arrived for the idle
// timeout (nil error, Report.IdleTimeout), ctx is done (ctx.Err()) or the receiver is closed
// (ErrClosed). It returns what it saw in every case. It reads up to 32 datagrams a system call
// (recvmmsg(2) through x/net's ReadBatch) into buffers the first Run allocates. The datagrams
// read after the end markers that end a run, or from the one that superseded it on, are not
// dropped: the next Run takes them first. A nil ctx is ErrInvalid, and nothing is read; so is a
// Run while another Run or RunWithin of r runs ("already running"). A Run ended by ctx returns
// once ctx's wake of its read (a past deadline) is done, so it cannot end the next Run's read.
// The idle timeout is a time with nothing to read: datagrams already waiting in the socket when
// it is found over (a Run held up past its deadline on a loaded machine) are read first, on the
// systems with MSG_DONTWAIT (Linux, macOS, the BSDs, Solaris).
func (r *Receiver) Run(ctx context.Context) (Report, error) {
	return r.run(ctx, "Run", time.Time{}, 0)
}

// RunWithin is Run with a limit on the wait for the run to begin: when no datagram of a run
// arrived within begin of the call (stale datagrams of the runs reported and bad frames do not
// begin one), it returns as at the idle timeout (Report.IdleTimeout, nil error), Report.Stale
// and BadFrames counting what came. A run that began within begin is received as Run receives
// it, under the idle timeout alone, however long it lasts: a caller whose idle timeout is long
// (to wait for a slow sender) looks for a run that may follow without waiting that long. The
// datagrams waiting in the socket when the wait is found over are read first, however late the
// first read came (as Run's at its idle timeout): one in the socket before the call is read even
// by RunWithin(ctx, time.Nanosecond). It reads them for at most begin again from then (one batch
// of up to 32 at least), so that datagrams that begin no run, coming faster than it reads them (a
// superseded sender still sending, another program's), cannot hold it past its wait for longer.
// A begin not above zero is ErrInvalid, as a nil ctx is, and nothing is read.
func (r *Receiver) RunWithin(ctx context.Context, begin time.Duration) (Report, error) {
	if begin <= 0 {
		return Report{}, fmt.Errorf("udpsink: Receiver.RunWithin: wait %v, want above zero: %w", begin, ErrInvalid)
	}
	return r.run(ctx, "RunWithin", time.Now().Add(begin), begin)
}

// run is Run and, with a non-zero begin (when the wait for a run to begin ends, wait after the
// call), RunWithin; name is the method's, for its error.
func (r *Receiver) run(ctx context.Context, name string, begin time.Time, wait time.Duration) (Report, error) {
	if ctx == nil {
		return Report{}, fmt.Errorf("udpsink: Receiver.%s: nil context: %w", name, ErrInvalid)
	}
	if r.conn == nil {
		return Report{}, errZeroReceiver(name)
	}
	if !r.running.CompareAndSwap(false, true) {
		return Report{}, fmt.Errorf("udpsink: Receiver.%s: already running (one Run or RunWithin at a time): %w", name, ErrInvalid)
	}
	defer r.running.Store(false)
	st := &runState{want: -1, done: r.done[:min(r.ndone, len(r.done))]}
	if r.msgs == nil {
		r.msgs = make([]ipv4.Message, recvBatch)
		for i := range r.msgs {
			r.msgs[i].Buffers = [][]byte{make([]byte, 65536)}
		}
	}
	msgs := r.msgs
	var (
		first, last, setAt time.Time
		runErr             error
	)
	// The wake: ctx's end sets a past deadline, which ends the ReadBatch that waits. A wake that
	// began is waited for before Run returns (and clears running): ran late, after the next Run
	// pushed its deadline, it would end that Run's read as an idle timeout.
	woke := make(chan struct{})
	stopped := context.AfterFunc(ctx, func() {
		defer close(woke)
		if testHooks.wake != nil {
			testHooks.wake()
		}
		_ = r.conn.SetReadDeadline(time.Now())
	})
	defer func() {
		if !stopped() { // the wake began: wait for its deadline to be set
			if testHooks.waitWake != nil {
				testHooks.waitWake()
			}
			<-woke
		}
	}()
	for !st.rep.Ended && !st.rep.Superseded {
		if r.next < r.n { // the rest of the last batch, which the previous Run did not tally
			last = time.Now()
			if first.IsZero() {
				first = last
			}
			st.tally(msgs, &r.next, r.n)
			continue
		}
		// Push the idle deadline forward at most every idle/8: the deadline is then between
		// 7/8 and 1 idle period after the last datagram, without a timer reset per packet.
		now := time.Now()
		switch {
		case !begin.IsZero() && !st.haveRun: // RunWithin, no run begun (setAt zero): the earlier
			_ = r.conn.SetReadDeadline(earliest(begin, now.Add(r.idle)))
		case now.Sub(setAt) > r.idle/8:
			setAt = now
			_ = r.conn.SetReadDeadline(now.Add(r.idle))
		}
		if err := ctx.Err(); err != nil { // after the deadline was pushed: see AfterFunc above
			runErr = err
			break
		}
		n, err := r.rd.ReadBatch(msgs, 0)
		if err != nil {
			if st.drainable(begin, wait) {
				n, err = r.readWaiting(ctx, msgs, err)
			}
			if err != nil {
				runErr = r.readErr(ctx, err, &st.rep)
				break
			}
			setAt = time.Time{} // readWaiting cleared the deadline: the next read sets it
		}
		r.received.Add(uint64(n))
		last = time.Now()
		if first.IsZero() {
			first = last
		}
		r.next, r.n = 0, n
		st.tally(msgs, &r.next, r.n)
	}
	st.finish()
	if st.haveRun { // reported: its datagrams are stale from now on
		r.done[r.ndone%len(r.done)] = st.rep.Run
		r.ndone++
	}
	if !first.IsZero() {
		st.rep.Elapsed = last.Sub(first)
	}
	return st.rep, runErr
}

// testHooks are set by tests only, before the Runs they watch: wake runs in ctx's wake before
// its deadline is set, waitWake in a Run that waits for a wake that began.
var testHooks struct{ wake, waitWake func() }

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// tally takes the datagrams msgs[*next:n] in order, advancing *next past each, until the run
// ends (every engine's end marker) or is superseded: the datagrams after that stay for the next
// Run (repeats of the markers, or the next run's frames), the superseding one among them.
func (st *runState) tally(msgs []ipv4.Message, next *int, n int) {
	for *next < n {
		m := &msgs[*next]
		*next++
		if st.frame(m.Buffers[0][:m.N]) {
			if st.rep.Superseded {
				*next-- // the next run's first datagram
			}
			return
		}
	}
}

// drainable reports whether the read that failed may be followed by readWaiting's: always in a
// Run, and in a RunWithin whose run began. In a RunWithin with no run begun, its read failed on
// its deadline (begin, wait after the call, or the idle timeout if sooner), for wait again from
// the first such failure on (one read at least): datagrams that begin no run, stale ones or bad
// frames, sent without pause by a sender faster than the Run (a loaded machine) keep the socket
// from emptying, and readWaiting would read them past the wait for as long as they came.
func (st *runState) drainable(begin time.Time, wait time.Duration) bool {
	if begin.IsZero() || st.haveRun {
		return true
	}
	now := time.Now()
	if st.over.IsZero() {
		st.over = now
		return true
	}
	return now.Sub(st.over) <= wait
}

// readWaiting is the read after one that failed with err. A read whose deadline passed before it
// began fails without looking at the socket (Go's poller checks the deadline first), so a Run
// held up past its idle deadline, or RunWithin past its wait (a loaded machine), would report an
// idle timeout with datagrams waiting that arrived in time. After such a timeout, with ctx live
// (ctx's wake sets a past deadline too), readWaiting clears the deadline and reads once without
// waiting (MSG_DONTWAIT): it returns what waited, or err when nothing did (or the read failed,
// a close say: that error). Other errors, and systems without MSG_DONTWAIT, return err as it is.
// Once per idle timeout, not per packet.
func (r *Receiver) readWaiting(ctx context.Context, msgs []ipv4.Message, err error) (int, error) {
	if msgDontWait == 0 || ctx.Err() != nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, err
	}
	_ = r.conn.SetReadDeadline(time.Time{})
	n, rerr := r.rd.ReadBatch(msgs, msgDontWait)
	switch {
	case rerr == nil && n > 0:
		return n, nil
	case rerr == nil, errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, os.ErrDeadlineExceeded):
		return 0, err // nothing waited (or ctx's wake came since: readErr sees ctx's end)
	}
	return 0, rerr
}

// readErr turns a receive error into Run's result: nil for the idle timeout (recorded in rep).
func (r *Receiver) readErr(ctx context.Context, err error, rep *Report) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, os.ErrDeadlineExceeded):
		rep.IdleTimeout = true
		return nil
	case errors.Is(err, net.ErrClosed):
		return ErrClosed
	}
	return fmt.Errorf("udpsink: receive: %w", err)
}

// frame tallies one datagram; it reports whether the run has ended (every engine's end marker)
// or is superseded (a datagram of a new run, which it does not tally: rep.Superseded).
func (st *runState) frame(frame []byte) bool {
	h, err := ParseHeader(frame)
	if err != nil {
		st.rep.BadFrames++
		return false
	}
	switch {
	case slices.Contains(st.done, h.Run):
		st.rep.Stale++
		if h.Flags&FlagEnd != 0 {
			st.rep.StaleEnds++
		}
		return false
	case !st.haveRun:
		st.haveRun, st.rep.Run, st.rep.RunGiven = true, h.Run, h.Flags&FlagRunGiven != 0
	case h.Run != st.rep.Run:
		st.rep.Superseded = true
		return true
	}
	payload := frame[HeaderLen:]
	t := &st.tracks[h.Engine]
	t.seen = true
	t.rep.Engine = int(h.Engine)
	if h.Flags&FlagEnd != 0 {
		return st.end(t, h, payload)
	}
	t.rep.Packets++
	t.rep.Bytes += uint64(len(payload))
	if crc32.Checksum(payload, castagnoli) != h.CRC {
		t.rep.BadChecksum++
	}
	switch {
	case h.Seq >= t.next && !t.top:
		t.distinct++
		t.next = h.Seq + 1
		if h.Seq == math.MaxUint64 {
			t.next, t.top = math.MaxUint64, true // 2^64: saturated, see engineTrack
		}
	default:
		t.rep.Dups++
	}
	return false
}

// end tallies an end-of-run marker.
func (st *runState) end(t *engineTrack, h Header, payload []byte) bool {
	if len(payload) != 4 || crc32.Checksum(payload, castagnoli) != h.CRC {
		st.rep.BadFrames++
		return false
	}
	if t.rep.Ended {
		return false // a repeat
	}
	t.rep.Ended = true
	t.rep.Sent = h.Seq
	st.ended++
	if n := int(binary.LittleEndian.Uint32(payload)); st.want < 0 || n > st.want {
		st.want = n
	}
	if st.want > 0 && st.ended >= st.want && allEnded(&st.tracks, st.want) {
		st.rep.Ended = true
	}
	return st.rep.Ended
}

// finish sums the per-engine tallies into the report.
func (st *runState) finish() {
	rep := &st.rep
	for i := range st.tracks {
		t := &st.tracks[i]
		if !t.seen {
			continue
		}
		if !t.rep.Ended {
			t.rep.Sent = t.next // MaxUint64 for 2^64 (top): saturated
		}
		// Every distinct frame moved next past its own seq and past the seqs it skipped: the
		// numbers below next that never arrived are next - distinct, and those from next up to
		// the end marker's count are lost too. Numbers at or past that count were never sent,
		// says the sender: how far the numbering went past it is Beyond (counted in numbers: the
		// receiver keeps no list of the frames), and a frame there cannot hide a hole below it.
		// So a stray frame 5 after 0..2 with "sent 3" reads lost 2 (3 and 4), beyond 3.
		switch {
		case t.top: // next is 2^64: the sums below, kept in range (Beyond saturates at 2^64)
			t.rep.Lost = math.MaxUint64 - t.distinct + 1
			if t.rep.Ended {
				t.rep.Beyond = math.MaxUint64 - max(t.rep.Sent, 1) + 1
			}
		default:
			t.rep.Lost = max(t.rep.Sent, t.next) - t.distinct
			if t.next > t.rep.Sent {
				t.rep.Beyond = t.next - t.rep.Sent
			}
		}
		rep.Packets += t.rep.Packets
		rep.Bytes += t.rep.Bytes
		rep.Lost += t.rep.Lost
		rep.Beyond += t.rep.Beyond
		rep.Dups += t.rep.Dups
		rep.BadChecksum += t.rep.BadChecksum
		rep.Engines = append(rep.Engines, t.rep)
	}
}

// allEnded reports whether engines 0..n-1 all sent their end marker.
func allEnded(tracks *[MaxEngines]engineTrack, n int) bool {
	for i := 0; i < n && i < MaxEngines; i++ {
		if !tracks[i].rep.Ended {
			return false
		}
	}
	return true
}
