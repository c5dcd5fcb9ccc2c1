package udpsink

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"slices"
	"testing"
)

// FuzzReceiverFrames feeds arbitrary datagrams (split from the input at 0xff 0xfe, some made
// into well-formed frames) to the Receiver's tally: it never panics, every datagram is counted
// once (a data frame, a bad frame, or an end marker), every counter (per engine: packets, bytes,
// bad checksums, dups, sent, ended; bad frames) equals a model's tally of the frames taken, and
// the per-engine counts add up: lost plus distinct frames is the end marker's count plus the
// numbers past it (Beyond, which the model computes: the highest seq+1 less the end marker's
// count), and the run's totals are the engines' sums. The first frame names the run; a frame of another run supersedes it
// and is not taken.
func FuzzReceiverFrames(f *testing.F) {
	f.Add([]byte{0x44, 0x53, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(endFrame(0, 3, 1))
	f.Add(append(frame(0, 2, 1<<63, []byte("x"), 0), append([]byte{0xff, 0xfe}, endFrame(2, 0, 300)...)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		st := &runState{want: -1}
		n, data, ends, wrapped := 0, uint64(0), 0, false
		// The model: per engine, the counters the doc defines, tallied frame by frame.
		type engModel struct {
			seen, ended                 bool
			packets, bytes, badCk, dups uint64
			seqs                        []uint64 // data frames' seqs, in arrival order
			sent                        uint64   // the first valid end marker's count
		}
		var em [256]engModel
		var badFrames uint64
		var run uint64 // the run's ID, from its first frame
		haveRun := false
		for _, d := range bytes.Split(in, []byte{0xff, 0xfe}) {
			if len(d) >= HeaderLen && d[0]&1 == 1 { // make it well formed but for its fields
				binary.LittleEndian.PutUint16(d, FrameMagic)
				binary.LittleEndian.PutUint32(d[12:], crc32.Checksum(d[HeaderLen:], castagnoli))
				binary.LittleEndian.PutUint64(d[16:], uint64(d[16]&d[17]&1)) // mostly one run
			}
			if h, err := ParseHeader(d); err == nil {
				if !haveRun {
					haveRun, run = true, h.Run
				} else if h.Run != run {
					if !st.frame(d) || !st.rep.Superseded {
						t.Fatalf("a frame of run %#x in run %#x did not supersede it: %+v", h.Run, run, st.rep)
					}
					break
				}
			}
			n++
			if h, err := ParseHeader(d); err != nil {
				badFrames++
			} else if e, pl := &em[h.Engine], d[HeaderLen:]; h.Flags&FlagEnd != 0 {
				e.seen = true
				if len(pl) != 4 || crc32.Checksum(pl, castagnoli) != h.CRC {
					badFrames++
				} else if !e.ended {
					e.ended, e.sent = true, h.Seq
				}
			} else {
				e.seen = true
				e.packets++
				e.bytes += uint64(len(pl))
				if crc32.Checksum(pl, castagnoli) != h.CRC {
					e.badCk++
				}
				// Late or duplicate: an earlier frame of the engine had a seq at or above it.
				for _, q := range e.seqs {
					if q >= h.Seq {
						e.dups++
						break
					}
				}
				e.seqs = append(e.seqs, h.Seq)
			}
			if h, err := ParseHeader(d); err == nil && h.Flags&FlagEnd == 0 {
				data++
				wrapped = wrapped || h.Seq == math.MaxUint64 // highest seq+1 wraps to 0
			} else if err == nil {
				ends++
			}
			if st.frame(d) {
				break
			}
		}
		st.finish()
		if st.rep.Run != run {
			t.Fatalf("run %#x, the model says %#x", st.rep.Run, run)
		}
		var pk, dups uint64
		var seen []int
		for i := range em {
			if em[i].seen {
				seen = append(seen, i)
			}
		}
		if len(seen) != len(st.rep.Engines) || badFrames != st.rep.BadFrames {
			t.Fatalf("engines %v, bad frames %d; the model says engines %v, bad frames %d", st.rep.Engines, st.rep.BadFrames, seen, badFrames)
		}
		var mb, mck uint64
		for k, e := range st.rep.Engines {
			m := &em[seen[k]]
			mb, mck = mb+m.bytes, mck+m.badCk
			sent := m.sent
			if !m.ended && len(m.seqs) > 0 {
				sent = slices.Max(m.seqs) + 1
			}
			// Beyond: with an end marker, how far the highest seq+1 went past its count.
			var beyond uint64
			if m.ended && len(m.seqs) > 0 && slices.Max(m.seqs)+1 > m.sent {
				beyond = slices.Max(m.seqs) + 1 - m.sent
			}
			if e.Engine != seen[k] || e.Packets != m.packets || e.Bytes != m.bytes || e.BadChecksum != m.badCk ||
				e.Dups != m.dups || e.Ended != m.ended || (!wrapped && (e.Sent != sent || e.Beyond != beyond)) {
				t.Fatalf("engine report %+v; the model says engine %d %+v (beyond %d)", e, seen[k], *m, beyond)
			}
		}
		if st.rep.Bytes != mb || st.rep.BadChecksum != mck {
			t.Fatalf("totals %+v; the model says bytes %d, bad checksums %d", st.rep, mb, mck)
		}
		var lost, beyond uint64
		for _, e := range st.rep.Engines {
			pk += e.Packets
			dups += e.Dups
			lost += e.Lost
			beyond += e.Beyond
			// Every number below max(Sent, highest seq+1) is received once or lost, and the
			// numbers past Sent are Beyond.
			if !wrapped && e.Lost+e.Packets-e.Dups != e.Sent+e.Beyond {
				t.Fatalf("engine %d: lost %d + distinct %d != sent %d + beyond %d", e.Engine, e.Lost, e.Packets-e.Dups, e.Sent, e.Beyond)
			}
			if !e.Ended && e.Beyond != 0 {
				t.Fatalf("engine %d: beyond %d without an end marker", e.Engine, e.Beyond)
			}
		}
		if pk != st.rep.Packets || dups != st.rep.Dups || lost != st.rep.Lost || beyond != st.rep.Beyond || st.rep.Packets > data {
			t.Fatalf("counts do not add up: %+v (data frames %d)", st.rep, data)
		}
	})
}
