//go:build linux

package udpsink

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// iovMax is the kernel's UIO_MAXIOV: the most iovec entries one sendmsg takes.
const iovMax = 1024

// Sink sends each packet as one UDP datagram whose gather list is a frame header and the
// packet's segments (no copy). It implements sdma.BatchSink: with batching on (Config.Batch, the
// default) the engines Queue packets and Flush them, many frames a sendmmsg(2) call, optionally
// with UDP GSO; with Batch 1 they Deliver, one sendmsg(2) a packet.
//
// Deliver, Queue and Flush are safe for concurrent use by different engines; each engine must
// call them one at a time, and not mix Deliver with a batch it holds (Deliver refuses that),
// which is what the sdma engine guarantees. Stats is safe at any time, and so is Close: it waits
// for each engine's call in progress, sends the packets the engine holds (see Close), and refuses
// the calls after it.
//
// Make one with New. The zero Sink has no socket: Deliver, Queue and Close refuse it with an
// error matching ErrInvalid that says so, Flush sets that error in each entry of errs, and its
// addresses are nil.
type Sink struct {
	conn       *net.UDPConn
	rc         syscall.RawConn
	w          batchWriter // sendmmsg: the ipv4 or ipv6 PacketConn of conn (a test may wrap it)
	engines    []engineState
	batch      int           // Config.Batch: BatchLimit's packets (read-only after New)
	batchBytes int           // Config.BatchBytes: BatchLimit's bytes (read-only after New)
	gso        atomic.Bool   // Config.GSO, cleared by a Flush whose GSO send the kernel refused
	retryBase  time.Duration // the first pause before a resend (retryBase; a test may shorten it)
	run        uint64        // the run ID every frame carries (Config.Run or drawn by New; read-only after New)
	flags      uint8         // FlagRunGiven when Config.Run gave run, else 0: in every frame's flags (read-only after New)
	// closed is set by Close, before it takes each engine's mu; Deliver and Queue read it under
	// their engine's mu and refuse a packet once it is set, so that none is taken after Close
	// drained that engine.
	closed atomic.Bool
}

// engineState is one engine's sender state. Every field but the counters is guarded by mu, which
// the engine's Deliver, Queue and Flush hold (one engine calls them one at a time, so mu is
// uncontended) and Close takes to drain the batch and send the end markers; packets and bytes
// are written under it and read by Stats.
type engineState struct {
	mu    sync.Mutex
	hdr   [HeaderLen]byte // the frame header scratch buffer, the first iovec entry
	iov   []unix.Iovec    // header + segments, reused across packets (grown, never shrunk)
	msg   unix.Msghdr     // points at iov; connected socket, so no name
	errno syscall.Errno   // result of the last sendmsg, set by send
	send  func(fd uintptr) bool
	seq   uint64 // packets sent so far: the next packet's sequence number (owner only)

	// The batch (Queue, Flush): queue[i] is the i-th frame queued, its gather list
	// bufs[queue[i].start:queue[i].end], its header hdrs[i*HeaderLen:]; msgs are the wire
	// messages of the Flush in progress, oob their GSO control messages. All owner only,
	// reused across batches (grown, never shrunk), and cleared after each Flush.
	queue []queued
	bufs  [][]byte
	hdrs  []byte
	msgs  []ipv4.Message
	oob   []byte
	// drained is the outcome of each packet of the batch Close sent for the engine (nil: sent),
	// which the engine's next Flush reports; nil when Close drained no batch. Under mu.
	drained []error

	// Counters: atomic add (or store) by the owner, load by Stats.
	packets  atomic.Uint64 // datagrams sent (store by owner, load by Stats)
	bytes    atomic.Uint64 // payload bytes sent, headers excluded
	errs     atomic.Uint64 // failed packets
	syscalls atomic.Uint64 // sendmsg and sendmmsg calls for packets
	batches  atomic.Uint64 // Flushes with packets
	gsoMsgs  atomic.Uint64 // GSO messages sent
	retries  atomic.Uint64 // resends after ENOBUFS or EAGAIN
	gsoOff   atomic.Uint64 // GSO refusals

	_ [64]byte // keep neighbouring engines' hot fields off this cache line
}

// New connects a sink to the receiver at cfg.Addr. It refuses non-loopback addresses with an
// error matching ErrNotLoopback, an Engines count out of range with one matching ErrEngine, and
// another bad Config field (GSO with Batch 1, an address with port 0 among them) with one
// matching ErrInvalid.
func New(cfg Config) (*Sink, error) {
	if cfg.Engines == 0 {
		cfg.Engines = 1
	}
	if cfg.Engines < 0 || cfg.Engines > MaxEngines {
		return nil, fmt.Errorf("%w: %d engines, want 1..%d", ErrEngine, cfg.Engines, MaxEngines)
	}
	if cfg.WriteBuffer == 0 {
		cfg.WriteBuffer = 4 << 20
	}
	if cfg.WriteBuffer < 0 {
		return nil, fmt.Errorf("%w: WriteBuffer %d bytes, want a positive size (0: 4 MiB)", ErrInvalid, cfg.WriteBuffer)
	}
	switch {
	case cfg.Batch == 0:
		cfg.Batch = DefaultBatch
	case cfg.Batch < 0 || cfg.Batch > iovMax:
		return nil, fmt.Errorf("%w: batch of %d packets, want 1..%d (0: %d)", ErrInvalid, cfg.Batch, iovMax, DefaultBatch)
	case cfg.GSO && cfg.Batch == 1:
		return nil, fmt.Errorf("%w: GSO with Batch 1: GSO needs batching (Batch 0 or 2..%d), Batch 1 sends each packet alone", ErrInvalid, iovMax)
	}
	switch {
	case cfg.BatchBytes == 0:
		cfg.BatchBytes = DefaultBatchBytes
	case cfg.BatchBytes < 0:
		cfg.BatchBytes = 0 // no byte bound
	}
	ua, err := ResolveLoopback(cfg.Addr)
	if err != nil {
		return nil, err
	}
	if ua.Port == 0 {
		// No receiver listens on port 0: the kernel takes a sendmsg there and drops it, so every
		// Deliver would report a packet sent that went nowhere.
		return nil, fmt.Errorf("%w: address %q has port 0; the sink needs the receiver's port", ErrInvalid, cfg.Addr)
	}
	conn, err := net.DialUDP("udp", nil, ua)
	if err != nil {
		return nil, fmt.Errorf("udpsink: dial %s: %w", ua, err)
	}
	if cfg.WriteBuffer > 0 {
		_ = conn.SetWriteBuffer(cfg.WriteBuffer) // best effort: the kernel caps it anyway
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("udpsink: %w", err)
	}
	s := &Sink{conn: conn, rc: rc, engines: make([]engineState, cfg.Engines), batch: cfg.Batch, batchBytes: cfg.BatchBytes, retryBase: retryBase, run: cfg.Run}
	if s.run != 0 {
		s.flags = FlagRunGiven
	}
	for s.run == 0 {
		s.run = rand.Uint64() // randomly seeded: two sinks draw one ID with odds of 2^-64
	}
	if ua.IP.To4() != nil {
		s.w = ipv4.NewPacketConn(conn)
	} else {
		s.w = ipv6.NewPacketConn(conn)
	}
	s.gso.Store(cfg.GSO && cfg.Batch > 1)
	for i := range s.engines {
		e := &s.engines[i]
		e.iov = make([]unix.Iovec, 0, 2+2*64) // header + up to MAX_DESC segments and pads
		e.send = e.sendmsg                    // method value made once: Deliver must not allocate
		if cfg.Batch > 1 {
			e.queue = make([]queued, 0, cfg.Batch)
			e.bufs = make([][]byte, 0, cfg.Batch*3) // header + two segments a packet, grown if need be
			e.hdrs = make([]byte, cfg.Batch*HeaderLen)
			e.msgs = make([]ipv4.Message, 0, cfg.Batch)
		}
	}
	return s, nil
}

// LocalAddr returns the sink's own address.
func (s *Sink) LocalAddr() net.Addr {
	if s.conn == nil {
		return nil
	}
	return s.conn.LocalAddr()
}

// errZeroSink refuses a call of the zero Sink, which has no socket and no engines.
func errZeroSink() error {
	return fmt.Errorf("udpsink: the zero Sink, not made by New: it has no socket: %w", ErrInvalid)
}

// accept checks one packet handed to Deliver or Queue: an engine the sink was built for
// (ErrEngine), a sink not closed (ErrClosed), and room for its segments and the frame header in
// one message's gather list (ErrTooLarge; limit names the system call's limit in the error). It
// returns the engine's state with its mu held, which the caller unlocks; on an error, mu is not
// held.
func (s *Sink) accept(engine int, segs [][]byte, limit string) (*engineState, error) {
	if uint(engine) >= uint(len(s.engines)) {
		if s.conn == nil {
			return nil, errZeroSink()
		}
		return nil, fmt.Errorf("%w: engine %d, sink built for %d", ErrEngine, engine, len(s.engines))
	}
	e := &s.engines[engine]
	e.mu.Lock()
	if s.closed.Load() {
		e.mu.Unlock()
		e.errs.Add(1) // a failed packet
		return nil, ErrClosed
	}
	if len(segs)+1 > iovMax {
		e.mu.Unlock()
		e.errs.Add(1)
		return nil, fmt.Errorf("%w: %d segments, %s %d (with the frame header, one gather list of %d entries)", ErrTooLarge, len(segs), limit, iovMax-1, iovMax)
	}
	return e, nil
}

// Engines returns the number of engines the sink takes packets from, engine numbers
// 0..Engines()-1 (Config.Engines; 0 for the zero Sink). The users of a sink check it once, when
// they are built, and refuse a sink too small for them (ErrInvalid): sdma.NewDevice one with
// fewer than its Engines, pio.New one with no number for its Index, verbs.New one without a lane
// for each PIO context past the SDMA engines. sdmatest.FaultSink and FaultBatchSink pass it on.
func (s *Sink) Engines() int { return len(s.engines) }

// Run returns the run ID the sink's frames carry (Config.Run, or the one New drew).
func (s *Sink) Run() uint64 { return s.run }

// RemoteAddr returns the receiver's address.
func (s *Sink) RemoteAddr() net.Addr {
	if s.conn == nil {
		return nil
	}
	return s.conn.RemoteAddr()
}

// Deliver sends one packet as one datagram now, with one sendmsg(2) (sdma.Sink; an engine whose
// sink batches calls Queue and Flush instead). segs are read during the call only. It does not
// allocate on success. A Deliver on an engine that holds queued packets (Queue with no Flush
// since) is refused with an error matching ErrInvalid: the sdma engine never does that.
func (s *Sink) Deliver(engine int, segs [][]byte) error {
	e, err := s.accept(engine, segs, "sendmsg takes at most")
	if err != nil {
		return err
	}
	// e.mu held: unlocked at each return, not deferred (a deferred call costs a wrapper a packet)
	if len(e.queue) > 0 {
		// The queued frames hold the next sequence numbers: sent now, this packet would take
		// the first one's number and leave ahead of them.
		e.mu.Unlock()
		e.errs.Add(1)
		return fmt.Errorf("%w: Deliver on engine %d while it holds %d queued packets (Flush them first)", ErrInvalid, engine, len(e.queue))
	}
	if cap(e.iov) < len(segs)+1 {
		e.iov = make([]unix.Iovec, 0, len(segs)+1) // rare: more segments than ever before
	}
	iov := e.iov[:1]
	var n int
	var crc uint32
	for _, sg := range segs {
		if len(sg) == 0 {
			continue
		}
		n += len(sg)
		crc = crc32.Update(crc, castagnoli, sg)
		iov = append(iov, unix.Iovec{Base: &sg[0]})
		iov[len(iov)-1].SetLen(len(sg))
	}
	if n > MaxPayload {
		e.mu.Unlock()
		e.errs.Add(1)
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, n, MaxPayload)
	}
	PutHeader(e.hdr[:], Header{Flags: s.flags, Engine: uint8(engine), Seq: e.seq, CRC: crc, Run: s.run})
	if err := s.write(e, iov); err != nil {
		e.mu.Unlock()
		return err
	}
	e.seq++
	e.packets.Store(e.seq)
	e.bytes.Add(uint64(n))
	e.mu.Unlock()
	return nil
}

// write sends the gather list iov (whose entry 0 is filled here with e.hdr) on the socket,
// waiting for room in the send buffer if the kernel says EAGAIN.
func (s *Sink) write(e *engineState, iov []unix.Iovec) error {
	iov[0].Base = &e.hdr[0]
	iov[0].SetLen(HeaderLen)
	e.msg.Iov = &iov[0]
	e.msg.SetIovlen(len(iov))
	e.errno = 0
	err := s.rc.Write(e.send)
	e.syscalls.Add(1)
	clear(iov) // drop the references to the caller's memory
	e.msg.Iov = nil
	if err == nil && e.errno != 0 {
		err = e.errno
	}
	if err != nil {
		e.errs.Add(1)
		return fmt.Errorf("udpsink: sendmsg to %s: %w", s.conn.RemoteAddr(), err)
	}
	return nil
}

// Stats returns the counters summed over engines. Safe for concurrent use.
func (s *Sink) Stats() Stats {
	var st Stats
	for i := range s.engines {
		e := &s.engines[i]
		st.Packets += e.packets.Load()
		st.Bytes += e.bytes.Load()
		st.Errors += e.errs.Load()
		st.Syscalls += e.syscalls.Load()
		st.Batches += e.batches.Load()
		st.GSOMsgs += e.gsoMsgs.Load()
		st.Retries += e.retries.Load()
		st.GSOOff += e.gsoOff.Load()
	}
	return st
}

// endDelays are the pauses before each repeat of the end-of-run markers: they are datagrams
// too, and a receive buffer still full of the run's last packets drops them, so Close sends
// them again as the receiver drains it, for up to 85ms in all; the receiver ignores repeats.
// A receiver that stopped and closed its socket turns the next repeat into ECONNREFUSED, which
// ends the repeats early.
var endDelays = [...]time.Duration{0, time.Millisecond, 4 * time.Millisecond, 16 * time.Millisecond, 64 * time.Millisecond}

// Close ends the run: it refuses every Deliver and Queue after it (ErrClosed), sends the packets
// each engine holds (queued, not yet flushed), then the end-of-run markers (each engine's packet
// count, those packets included, repeated len(endDelays) times at growing intervals until the
// receiver is gone), and closes the socket. A packet the sink accepted is never dropped: Close
// sends the held batches as Flush would (a send error fails a packet as at Flush, counted in
// Stats.Errors), and the engine's next Flush reports each of those packets' outcome, nil for
// the ones sent, so that each is reported once. (Failing them instead would lose packets that
// could go; their segments are valid until that Flush returns, by sdma.BatchSink's contract.)
//
// Close is safe concurrently with Deliver, Queue and Flush: it waits for each engine's call in
// progress, so that call's packets go out before the markers and are counted in them. The
// markers are best effort: an error sending the first round is returned, after the socket is
// closed; errors sending the repeats end them and are not returned. A second Close returns
// ErrClosed at once, without waiting for the first to finish.
func (s *Sink) Close() error {
	if s.conn == nil {
		return errZeroSink()
	}
	if s.closed.Swap(true) {
		return ErrClosed
	}
	for i := range s.engines {
		s.drain(&s.engines[i])
	}
	var first error
rounds:
	for r, d := range endDelays {
		time.Sleep(d)
		for i := range s.engines {
			if err := s.sendEndLocked(i); err != nil {
				// Only the first round's errors count: a receiver that got that round
				// stops, and the repeats then come back as ECONNREFUSED.
				if r == 0 {
					first = err
				}
				break rounds
			}
		}
	}
	if err := s.conn.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// drain sends the batch e holds, for Close, and keeps the packets' outcomes for the engine's
// next Flush to report.
func (s *Sink) drain(e *engineState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.queue) == 0 {
		return
	}
	errs := make([]error, len(e.queue))
	e.batches.Add(1)
	s.sendBatch(e, errs)
	e.resetBatch()
	e.drained = errs
}

// sendEndLocked is sendEnd under engine i's mu.
func (s *Sink) sendEndLocked(i int) error {
	e := &s.engines[i]
	e.mu.Lock()
	defer e.mu.Unlock()
	return s.sendEnd(i)
}

// sendEnd sends engine i's end-of-run marker: Seq is its packet count, the payload the number
// of engines in the run (uint32, little-endian).
func (s *Sink) sendEnd(i int) error {
	e := &s.engines[i]
	var payload [4]byte
	binary.LittleEndian.PutUint32(payload[:], uint32(len(s.engines)))
	PutHeader(e.hdr[:], Header{Flags: FlagEnd | s.flags, Engine: uint8(i), Seq: e.seq, CRC: crc32.Checksum(payload[:], castagnoli), Run: s.run})
	iov := e.iov[:2]
	iov[1] = unix.Iovec{Base: &payload[0]}
	iov[1].SetLen(len(payload))
	err := s.write(e, iov)
	e.syscalls.Add(^uint64(0)) // markers are not packets: keep Syscalls and Errors about packets
	if err != nil {
		e.errs.Add(^uint64(0))
	}
	return err
}
