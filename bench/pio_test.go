package bench

import (
	"bytes"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/gosdma/gosdma/internal/pioimpl"
	"github.com/gosdma/gosdma/pio"
	"github.com/gosdma/gosdma/sdma"
)

// aligned64 returns n bytes at a 64-byte-aligned address (as the PIO send buffer is).
func aligned64(n int) []byte {
	b := make([]byte, n+64)
	off := (64 - int(uintptr(unsafe.Pointer(&b[0]))%64)) % 64
	return b[off : off+n]
}

// BenchmarkPIOCopy compares the PIO copy's quadword writer (pio.WriteQWords: impl=asm, the
// non-temporal assembly, AVX VMOVNTDQ where available; impl=asm-movnti, 8-byte MOVNTI; impl=go,
// 8-byte stores in Go) with copy (impl=copy, memmove) on the same 64-byte-aligned destination,
// for packet sizes from 64 bytes to 4 KiB. The goal is the asm writer within 1.2× of copy.
func BenchmarkPIOCopy(b *testing.B) {
	impls := append(pio.Implementations(), "copy")
	for _, impl := range impls {
		b.Run("impl="+impl, func(b *testing.B) {
			for _, size := range []int{64, 128, 256, 512, 1024, 2048, 4096} {
				b.Run("size="+strconv.Itoa(size), func(b *testing.B) {
					src, dst := make([]byte, size), aligned64(size)
					for i := range src {
						src[i] = byte(i)
					}
					if impl != "copy" {
						restore, err := pioimpl.Set(impl)
						if err != nil {
							b.Fatal(err)
						}
						defer restore()
					}
					b.SetBytes(int64(size))
					b.ReportAllocs()
					if impl == "copy" {
						for b.Loop() {
							copy(dst, src)
						}
					} else {
						for b.Loop() {
							pio.WriteQWords(dst, src)
						}
					}
					if !bytes.Equal(dst, src) {
						b.Fatal("destination differs from the source")
					}
				})
			}
		})
	}
}

// countSink counts packets and bytes (single-threaded use: the benchmarks drive inline).
type countSink struct{ pkts, bytes int }

func (s *countSink) Deliver(_ int, segs [][]byte) error {
	s.pkts++
	for _, g := range segs {
		s.bytes += len(g)
	}
	return nil
}

// BenchmarkSmallPacket sends the same small packets by PIO and by SDMA, one at a time, each
// from the send call until the packet has reached the sink and its resources came back: path=pio
// is BufferAlloc, Copy behind the PBC, the chip's pass (sink, credit return, release); path=sdma
// is Init, AddKVAddr (a mapping), Send, the hardware model (sink) and the completion pass
// (unmap, callback). Both are driven inline on the benchmark goroutine (Manual), so the figures
// are the paths' own cost, not goroutine hand-offs. It reports ns/pkt and the p50-ns and
// p99-ns of the per-packet times. The bar: PIO at most 0.7× SDMA's ns/pkt at 64 bytes.
func BenchmarkSmallPacket(b *testing.B) {
	for _, path := range []string{"pio", "sdma"} {
		b.Run("path="+path, func(b *testing.B) {
			for _, size := range []int{64, 256} {
				b.Run("size="+strconv.Itoa(size), func(b *testing.B) {
					payload := make([]byte, size)
					sink := &countSink{}
					h := hdrhistogram.New(1, int64(time.Second), 3)
					var send func()
					switch path {
					case "pio":
						send = smallPIO(b, sink, payload)
					default:
						send = smallSDMA(b, sink, payload, sdma.FlagUrgent)
					}
					b.SetBytes(int64(size))
					b.ReportAllocs()
					start := time.Now()
					for b.Loop() {
						t0 := time.Now()
						send()
						_ = h.RecordValue(int64(time.Since(t0)))
					}
					if sink.pkts != b.N+sinkWarm {
						b.Fatalf("sink got %d packets for %d", sink.pkts, b.N+sinkWarm)
					}
					b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N), "ns/pkt")
					b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-ns")
					b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-ns")
				})
			}
		})
	}
}

// sinkWarm is the packets each setup sends before the timed loop (one, to warm every path).
const sinkWarm = 1

func smallPIO(b *testing.B, sink *countSink, payload []byte) func() {
	sc, err := pio.New(pio.Config{Type: pio.Kernel, Sink: sink, Manual: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sc.Close() })
	dw := 2 + (len(payload)+3)/4
	pbc := pio.CreatePBC(0, 0, 0, uint32(dw))
	send := func() {
		buf, err := sc.BufferAlloc(dw, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := buf.Copy(pbc, payload); err != nil {
			b.Fatal(err)
		}
		sc.Process()
	}
	send()
	return send
}

// smallSDMA returns the send of one packet of payload by SDMA, by hand on a Manual device (Init
// with flags, AddKVAddr, Send, the hardware and completion passes), and sends one.
func smallSDMA(b *testing.B, sink *countSink, payload []byte, flags sdma.Flags) func() {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, Sink: sink})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dev.Close() })
	e := dev.Engine(0)
	var tx sdma.TxReq
	done := 0
	var cb sdma.CompleterFunc = func(*sdma.TxReq, sdma.Status) { done++ }
	send := func() {
		want := done + 1
		if err := tx.Init(flags, len(payload), cb); err != nil {
			b.Fatal(err)
		}
		if err := tx.AddKVAddr(dev, payload); err != nil {
			b.Fatal(err)
		}
		if err := e.Send(nil, &tx, false); err != nil {
			b.Fatal(err)
		}
		for done != want {
			if _, err := e.Process(); err != nil {
				b.Fatal(err)
			}
			e.Poll()
		}
	}
	send()
	return send
}
