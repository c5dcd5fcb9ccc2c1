package udpsink

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"testing"
)

// FuzzReceiverFrames feeds arbitrary datagrams (split from the input at 0xff 0xfe, some made
// into well-formed frames) to the Receiver's tally: it never panics, every datagram is counted
// once (a data frame, a bad frame, or an end marker), and the per-engine counts add up: lost plus
// distinct frames is the end marker's count plus the frames numbered past it.
func FuzzReceiverFrames(f *testing.F) {
	f.Add([]byte{0x44, 0x53, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(endFrame(0, 3, 1))
	f.Add(append(frame(0, 2, 1<<63, []byte("x"), 0), append([]byte{0xff, 0xfe}, endFrame(2, 0, 300)...)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		st := &runState{want: -1}
		n, data, ends, wrapped := 0, uint64(0), 0, false
		for _, d := range bytes.Split(in, []byte{0xff, 0xfe}) {
			if len(d) >= HeaderLen && d[0]&1 == 1 { // make it well formed but for its fields
				binary.LittleEndian.PutUint16(d, FrameMagic)
				binary.LittleEndian.PutUint32(d[12:], crc32.Checksum(d[HeaderLen:], castagnoli))
			}
			n++
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
		var pk, dups uint64
		for _, e := range st.rep.Engines {
			pk += e.Packets
			dups += e.Dups
			// Every number below max(Sent, highest seq+1) is received once or lost, and the
			// numbers past Sent are Beyond.
			if !wrapped && e.Lost+e.Packets-e.Dups != e.Sent+e.Beyond {
				t.Fatalf("engine %d: lost %d + distinct %d != sent %d + beyond %d", e.Engine, e.Lost, e.Packets-e.Dups, e.Sent, e.Beyond)
			}
			if !e.Ended && e.Beyond != 0 {
				t.Fatalf("engine %d: beyond %d without an end marker", e.Engine, e.Beyond)
			}
		}
		if pk != st.rep.Packets || dups != st.rep.Dups || st.rep.Packets > data {
			t.Fatalf("counts do not add up: %+v (data frames %d)", st.rep, data)
		}
	})
}
