//go:build linux

package udpsink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
)

// The batched sender (sdma.BatchSink): Queue builds a packet's frame header and records its
// segments; Flush sends every queued frame with sendmmsg(2), through golang.org/x/net's
// PacketConn.WriteBatch, whose messages take the frames as gather lists: the header, then the
// packet's own segments, never copied. With GSO on, a run of consecutive frames of one size goes
// as one message with a UDP_SEGMENT control message: the kernel cuts it into one datagram per
// frame.
//
// sendmmsg sends its messages in order and stops at the first that fails; if some were sent it
// returns their number and the error is lost (the next call, which starts at the failed message,
// meets it again). So Flush resends from the first unsent message until all are sent or failed,
// and decides per message by the error (see Config.Batch for the outcomes).

// Batch defaults and bounds.
const (
	DefaultBatch      = 32        // Config.Batch 0: packets per batch
	DefaultBatchBytes = 256 << 10 // Config.BatchBytes 0: payload bytes that flush a batch
	// MaxGSOSegments is the most frames one GSO message carries (the kernel's UDP_MAX_SEGMENTS
	// was 64 until Linux 6.8 raised it to 128; the lower value works everywhere).
	MaxGSOSegments = 64
	// maxGSOBytes is the most bytes of frames one GSO message carries: one UDP datagram's
	// worth, as udp_sendmsg checks the whole before it segments.
	maxGSOBytes = 65507
	// retryLimit is how many times Flush retries a message that failed with ENOBUFS or
	// EAGAIN, sleeping retryBase, then twice that, and so on (about 10ms in all), before the
	// message fails with that error.
	retryLimit = 10
	retryBase  = 10 * time.Microsecond
)

// batchWriter is the sendmmsg seam: ipv4.PacketConn and ipv6.PacketConn (whose Message is the
// same type), or a test's fault-injecting wrapper.
type batchWriter interface {
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// queued is one frame of the batch: its gather list is bufs[start:end] of its engine (the
// header, then the packet's non-empty segments).
type queued struct {
	start, end int
	size       int // frame bytes: header and payload
}

// BatchLimit reports the batch bounds the engines hold to (sdma.BatchSink): Config.Batch packets
// and Config.BatchBytes payload bytes. A limit of one packet turns batching off.
func (s *Sink) BatchLimit() (packets, bytes int) { return s.batch, s.batchBytes }

// Queue takes one packet for the next Flush (sdma.BatchSink): it checks it, builds its frame
// header (sequence number and checksum) in the engine's batch and keeps the slice headers of its
// segments; the bytes are read by Flush. It does not allocate once the batch buffers have grown
// to the largest batch.
func (s *Sink) Queue(engine int, segs [][]byte) error {
	e, err := s.accept(engine, segs, "sendmmsg takes at most a message of")
	if err != nil {
		return err
	}
	// e.mu held: unlocked at each return, not deferred (a deferred call costs a wrapper a packet)
	k := len(e.queue)
	if (k+1)*HeaderLen > len(e.hdrs) {
		e.growHeaders(k + 1)
	}
	hdr := e.hdrs[k*HeaderLen : (k+1)*HeaderLen : (k+1)*HeaderLen]
	start := len(e.bufs)
	e.bufs = append(e.bufs, hdr)
	n := 0
	var crc uint32
	for _, sg := range segs {
		if len(sg) == 0 {
			continue
		}
		n += len(sg)
		crc = crc32.Update(crc, castagnoli, sg)
		e.bufs = append(e.bufs, sg)
	}
	if n > MaxPayload {
		clear(e.bufs[start:])
		e.bufs = e.bufs[:start]
		e.mu.Unlock()
		e.errs.Add(1)
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, n, MaxPayload)
	}
	// seq is tentative: a frame that fails at Flush gives its number back (see failFrames).
	PutHeader(hdr, Header{Flags: s.flags, Engine: uint8(engine), Seq: e.seq + uint64(k), CRC: crc, Run: s.run})
	e.queue = append(e.queue, queued{start: start, end: len(e.bufs), size: HeaderLen + n})
	e.mu.Unlock()
	return nil
}

// growHeaders makes room for n frame headers. Rare: the batch is larger than ever before.
func (e *engineState) growHeaders(n int) {
	hdrs := make([]byte, max(n, 2*len(e.hdrs)/HeaderLen)*HeaderLen)
	copy(hdrs, e.hdrs)
	// The queued frames' gather lists point into the old headers: repoint them.
	for i, q := range e.queue {
		e.bufs[q.start] = hdrs[i*HeaderLen : (i+1)*HeaderLen : (i+1)*HeaderLen]
	}
	e.hdrs = hdrs
}

// Flush sends every frame Queue took on engine since the last Flush (sdma.BatchSink), in order,
// with as few sendmmsg calls as the kernel allows, and sets errs[i] for each frame it could not
// send. When it returns, nothing refers to the packets' bytes any more: sendmmsg copies them
// into socket buffers before it returns (no MSG_ZEROCOPY), so the engine may unmap them.
//
// errs must have an entry for each packet queued (the sdma engine's always has). A shorter errs
// is a programmer error: Flush then panics, before sending anything, naming both lengths; the
// batch's packets fail (Stats.Errors) and are dropped, as the engine fails a batch whose Flush
// panicked.
//
// After a Close that sent the batch (Close sends what the engines hold), Flush sends nothing and
// reports what Close did with each packet.
func (s *Sink) Flush(engine int, errs []error) {
	if uint(engine) >= uint(len(s.engines)) {
		err := fmt.Errorf("%w: engine %d, sink built for %d", ErrEngine, engine, len(s.engines))
		if s.conn == nil {
			err = errZeroSink()
		}
		for i := range errs {
			errs[i] = err
		}
		return
	}
	e := &s.engines[engine]
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.drained != nil {
		drained := e.drained
		e.drained = nil
		if len(errs) < len(drained) {
			panic(fmt.Sprintf("udpsink: Flush of engine %d with %d error entries for %d packets queued (sent by Close)", engine, len(errs), len(drained)))
		}
		copy(errs, drained)
		return
	}
	defer e.resetBatch()
	if len(e.queue) == 0 {
		return
	}
	if len(errs) < len(e.queue) {
		e.errs.Add(uint64(len(e.queue)))
		panic(fmt.Sprintf("udpsink: Flush of engine %d with %d error entries for %d packets queued", engine, len(errs), len(e.queue)))
	}
	e.batches.Add(1)
	// No closed check: Queue refuses packets once Close began, and Close sends the batch held
	// then (drain) before it closes the socket, so a batch here is one the socket can send.
	s.sendBatch(e, errs)
}

// sendBatch sends e's queued frames, from frame 0, until every one is sent or failed.
func (s *Sink) sendBatch(e *engineState, errs []error) {
	from := 0 // the first frame not yet sent or failed
	retries := 0
	for from < len(e.queue) {
		msgs := s.buildMsgs(e, from)
		sent, err := s.w.WriteBatch(msgs, 0)
		e.syscalls.Add(1)
		sent = max(sent, 0) // x/net passes the syscall's -1 through with the error
		for _, m := range msgs[:sent] {
			from = e.sentFrames(from, m)
		}
		if sent == len(msgs) {
			break
		}
		if sent > 0 || err == nil {
			retries = 0
			continue // the kernel lost the error of the first unsent message, if any: resend
		}
		m := &msgs[0]
		count := e.framesIn(from, m)
		switch {
		case count > 1 && gsoRefused(err):
			// The kernel or the route refuses UDP GSO: turn it off and resend these
			// frames one message each.
			s.gso.Store(false)
			e.gsoOff.Add(1)
		case (errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.EAGAIN)) && retries < retryLimit:
			// Transient: no buffer memory in the stack (ENOBUFS), or a send buffer still full
			// (EAGAIN: the poller normally waits for room itself). Wait and resend.
			time.Sleep(s.retryBase << retries)
			retries++
			e.retries.Add(1)
		default:
			// ECONNREFUSED (the receiver's port is closed: the kernel reports the ICMP of an
			// earlier datagram on this send and drops this one), EMSGSIZE, a closed socket,
			// or a transient error past its retries: these frames fail, the rest go on.
			e.failFrames(from, count, fmt.Errorf("udpsink: sendmmsg to %s: %w", s.conn.RemoteAddr(), err), errs)
			from += count
			retries = 0
		}
	}
}

// buildMsgs lays out the wire messages for the frames from index from on: one message a frame,
// or with GSO one message for each run of at least two consecutive frames of one size (at most
// MaxGSOSegments frames, maxGSOBytes bytes and iovMax gather entries). The messages' Buffers
// are subslices of e.bufs, so the frames' bytes are the packets' own.
func (s *Sink) buildMsgs(e *engineState, from int) []ipv4.Message {
	gso := s.gso.Load()
	msgs := e.msgs[:0]
	for i := from; i < len(e.queue); {
		q := e.queue[i]
		j := i + 1
		if gso {
			for j < len(e.queue) && j-i < MaxGSOSegments && e.queue[j].size == q.size &&
				(j-i+1)*q.size <= maxGSOBytes && e.queue[j].end-q.start <= iovMax {
				j++
			}
		}
		m := ipv4.Message{Buffers: e.bufs[q.start:e.queue[j-1].end]}
		if j-i > 1 {
			m.OOB = e.gsoCmsg(len(msgs), q.size)
		}
		msgs = append(msgs, m)
		i = j
	}
	e.msgs = msgs
	return msgs
}

// framesIn is the number of frames of message m, which starts at frame from.
func (e *engineState) framesIn(from int, m *ipv4.Message) int {
	n, end := 0, from
	for k := 0; k < len(m.Buffers); n++ {
		q := e.queue[end]
		k += q.end - q.start
		end++
	}
	return n
}

// sentFrames accounts for message m, sent, whose first frame is from; it returns the next
// frame's index.
func (e *engineState) sentFrames(from int, m ipv4.Message) int {
	count := e.framesIn(from, &m)
	payload := 0
	for _, q := range e.queue[from : from+count] {
		payload += q.size - HeaderLen
	}
	e.seq += uint64(count)
	e.packets.Store(e.seq)
	e.bytes.Add(uint64(payload))
	if m.OOB != nil {
		e.gsoMsgs.Add(1)
	}
	return from + count
}

// failFrames fails count frames from index from with err, and gives their sequence numbers
// back: the frames queued after them are renumbered, so the receiver's sequence has no hole
// for a packet that never left (the sink counts it in Errors instead).
func (e *engineState) failFrames(from, count int, err error, errs []error) {
	for i := from; i < from+count; i++ {
		errs[i] = err
	}
	e.errs.Add(uint64(count))
	for i := from + count; i < len(e.queue); i++ {
		binary.LittleEndian.PutUint64(e.bufs[e.queue[i].start][4:], e.seq+uint64(i-from-count))
	}
}

// resetBatch empties e's batch and drops every reference to the packets' memory.
func (e *engineState) resetBatch() {
	clear(e.bufs)
	e.bufs = e.bufs[:0]
	e.queue = e.queue[:0]
	for i := range e.msgs {
		e.msgs[i] = ipv4.Message{}
	}
	e.msgs = e.msgs[:0]
}

// gsoRefused reports whether err is the kernel refusing a GSO send as such (no UDP_SEGMENT
// support, or a route or device that cannot offload or segment it).
func gsoRefused(err error) bool {
	return errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOPROTOOPT)
}
