//go:build linux

package udpsink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"syscall"
	"testing"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// wire is a fake sendmmsg: it "sends" messages by recording their datagrams (a GSO message cut
// into its segments, as the kernel does), answering each call from a script.
type wire struct {
	script []byte
	dgrams [][]byte
	calls  int       // WriteBatch calls
	gso    int       // GSO messages sent
	log    []wireAns // every call's answer, in order
}

// wireAns is one WriteBatch answer as the wire gave it: an errno (0: none) and, for an error,
// the payloads of the frames in the first message (the ones the error is about).
type wireAns struct {
	errno  syscall.Errno
	frames [][]byte
	gso    bool // a message of the call is a GSO one
}

// segments cuts a message into its datagrams, as the kernel does with a GSO one.
func segments(m ipv4.Message) [][]byte {
	b := bytes.Join(m.Buffers, nil)
	if m.OOB == nil {
		return [][]byte{b}
	}
	size := int(binary.NativeEndian.Uint16(m.OOB[unix.CmsgLen(0):]))
	var out [][]byte
	for len(b) > 0 {
		k := min(size, len(b))
		out = append(out, b[:k])
		b = b[k:]
	}
	return out
}

func (w *wire) send(m ipv4.Message) {
	if m.OOB != nil {
		w.gso++
	}
	w.dgrams = append(w.dgrams, segments(m)...)
}

// anyGSO reports whether one of ms is a GSO message.
func anyGSO(ms []ipv4.Message) bool {
	for _, m := range ms {
		if m.OOB != nil {
			return true
		}
	}
	return false
}

// fail records and returns an error answer about ms[0].
func (w *wire) fail(ms []ipv4.Message, errno syscall.Errno) (int, error) {
	a := wireAns{errno: errno, gso: anyGSO(ms)}
	for _, d := range segments(ms[0]) {
		a.frames = append(a.frames, d[HeaderLen:])
	}
	w.log = append(w.log, a)
	return -1, sysErr(errno)
}

// WriteBatch answers from the script, one byte a call: low 3 bits 0-3 send everything, 4 a
// short count (the high bits pick how many), 5 ENOBUFS, 6 ECONNREFUSED, 7 EAGAIN, or EIO
// when the first message is a GSO one and bit 3 is set. Past the script, everything is sent.
func (w *wire) WriteBatch(ms []ipv4.Message, _ int) (int, error) {
	w.calls++
	if len(w.script) == 0 {
		w.log = append(w.log, wireAns{gso: anyGSO(ms)})
		for _, m := range ms {
			w.send(m)
		}
		return len(ms), nil
	}
	c := w.script[0]
	w.script = w.script[1:]
	if ms[0].OOB != nil && c&8 != 0 && c&7 >= 5 {
		return w.fail(ms, syscall.EIO)
	}
	switch c & 7 {
	case 4:
		w.log = append(w.log, wireAns{gso: anyGSO(ms)})
		k := int(c>>4) % len(ms)
		for _, m := range ms[:k] {
			w.send(m)
		}
		return k, nil
	case 5:
		return w.fail(ms, syscall.ENOBUFS)
	case 6:
		return w.fail(ms, syscall.ECONNREFUSED)
	case 7:
		return w.fail(ms, syscall.EAGAIN)
	}
	w.log = append(w.log, wireAns{gso: anyGSO(ms)})
	for _, m := range ms {
		w.send(m)
	}
	return len(ms), nil
}

// FuzzBatchOutcomes drives Flush through scripted kernel answers (short counts, ENOBUFS,
// ECONNREFUSED, EAGAIN, GSO refusals) over batches of frames of fuzzed sizes, GSO on or off, and
// checks the promises against the simplest model: every frame is sent or failed, exactly once;
// the frames sent arrive in order with their own bytes, numbered 0, 1, 2, ... without a hole
// (a failed frame gives its number back); the frames that fail are exactly those the documented
// policy, replayed on the wire's answers, fails, each with its answer's errno (a GSO refusal
// turns GSO off for good and resends; ENOBUFS and EAGAIN are resent up to retryLimit times in a
// row; any other error fails the first message's frames); and the counters (packets, errors,
// bytes, syscalls, batches, GSO messages, retries, GSO refusals) agree with what the wire saw.
func FuzzBatchOutcomes(f *testing.F) {
	f.Add([]byte{3, 3, 3, 40, 40, 40, 8}, []byte{4 | 2<<4, 5, 6, 0}, true)
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, []byte{6, 6, 4 | 3<<4, 7, 5, 5}, false)
	f.Add([]byte{10, 10, 10, 10}, []byte{5 | 8, 4 | 1<<4, 6}, true)
	// EAGAIN past its retries (the eleventh in a row fails the frame), then ENOBUFS on the next.
	f.Add([]byte{2, 2, 2}, append(bytes.Repeat([]byte{7}, retryLimit+1), 5, 5), false)
	f.Fuzz(func(t *testing.T, sizes, script []byte, gso bool) {
		if len(sizes) == 0 || len(sizes) > 100 || len(script) > 200 {
			return
		}
		p := newPlainPeer(t) // New needs a loopback address; nothing is sent to it
		s, err := New(Config{Addr: p.pc.LocalAddr().String(), Batch: 128, GSO: gso})
		if err != nil {
			t.Fatal(err)
		}
		defer s.conn.Close() // not Close: its end markers take 85ms of repeats
		s.retryBase = 0
		w := &wire{script: script}
		s.w = w
		var seq, payload, retried, refused uint64
		gsoOff := false
		for round := 0; round < 2; round++ { // a second batch goes on with the numbering
			var pkts [][]byte
			for i, sz := range sizes {
				b := make([]byte, 4*(1+int(sz)%16))
				for k := range b {
					b[k] = byte(round*31 + i*7 + k)
				}
				pkts = append(pkts, b)
			}
			queueAll(t, s, 0, pkts)
			errs := make([]error, len(pkts))
			before, logBefore := len(w.dgrams), len(w.log)
			s.Flush(0, errs)

			// The policy replayed on this Flush's answers: the frames it fails, in order.
			var wantFailed [][]byte
			var wantErrno []syscall.Errno
			retries := 0
			for k, a := range w.log[logBefore:] {
				if a.gso && gsoOff {
					t.Fatalf("round %d: call %d offers a GSO message after the kernel refused GSO", round, k)
				}
				switch {
				case a.errno == 0:
					retries = 0
				case a.errno == syscall.EIO && len(a.frames) > 1:
					gsoOff = true
					refused++
				case (a.errno == syscall.ENOBUFS || a.errno == syscall.EAGAIN) && retries < retryLimit:
					retries++
					retried++
				default:
					for _, fr := range a.frames {
						wantFailed = append(wantFailed, fr)
						wantErrno = append(wantErrno, a.errno)
					}
					retries = 0
				}
			}
			var failed [][]byte
			for i, err := range errs {
				if err != nil {
					failed = append(failed, pkts[i])
					if k := len(failed) - 1; k < len(wantErrno) && !errors.Is(err, wantErrno[k]) {
						t.Fatalf("round %d: frame %d failed with %v, the wire answered %v", round, i, err, wantErrno[k])
					}
				}
			}
			if len(failed) != len(wantFailed) {
				t.Fatalf("round %d: %d frames failed, the policy fails %d (errs %v)", round, len(failed), len(wantFailed), errs)
			}
			for k := range failed {
				if !bytes.Equal(failed[k], wantFailed[k]) {
					t.Fatalf("round %d: failed frame %d is not the one the wire refused", round, k)
				}
			}
			var sent [][]byte
			for i, err := range errs {
				if err == nil {
					sent = append(sent, pkts[i])
				}
			}
			got := w.dgrams[before:]
			if len(got) != len(sent) {
				t.Fatalf("round %d: %d datagrams for %d frames reported sent (errs %v)", round, len(got), len(sent), errs)
			}
			for i, d := range got {
				h, err := ParseHeader(d)
				if err != nil {
					t.Fatal(err)
				}
				if h.Seq != seq || !bytes.Equal(d[HeaderLen:], sent[i]) || h.CRC != Checksum([][]byte{sent[i]}) {
					t.Fatalf("round %d: datagram %d: seq %d (want %d), payload or checksum wrong", round, i, h.Seq, seq)
				}
				seq++
				payload += uint64(len(sent[i]))
			}
		}
		st := s.Stats()
		if st.Packets != seq || st.Packets+st.Errors != uint64(2*len(sizes)) {
			t.Fatalf("counters %+v for %d frames, %d sent", st, 2*len(sizes), seq)
		}
		if st.Bytes != payload || st.Syscalls != uint64(w.calls) || st.Batches != 2 || st.GSOMsgs != uint64(w.gso) ||
			st.Retries != retried || st.GSOOff != refused {
			t.Fatalf("counters %+v; the wire saw %d payload bytes, %d calls, %d GSO messages in 2 batches, %d retries, %d GSO refusals",
				st, payload, w.calls, w.gso, retried, refused)
		}
	})
}
