package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// BenchmarkPacket measures one packet's whole way: Init, two adds (a 40-byte header and a
// 256-byte payload), Send, the hardware model, and the completion pass with its callback.
// hw=inline drives the hardware with Process on the benchmark goroutine; hw=goroutine lets the
// engine's own goroutine (busy-poll) do it, with a window of txreqs in flight.
func BenchmarkPacket(b *testing.B) {
	hdr, payload := make([]byte, 40), make([]byte, 256)
	b.Run("hw=inline", func(b *testing.B) {
		dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 1024, Sink: &sdmatest.DiscardSink{}})
		if err != nil {
			b.Fatal(err)
		}
		defer dev.Close()
		e := dev.Engine(0)
		var tx sdma.TxReq
		done := 0
		var cb sdma.CompleterFunc = func(*sdma.TxReq, sdma.Status) { done++ }
		b.ReportAllocs()
		for b.Loop() {
			if err := tx.Init(0, len(hdr)+len(payload), cb); err != nil {
				b.Fatal(err)
			}
			if err := tx.AddKVAddr(dev, hdr); err != nil {
				b.Fatal(err)
			}
			if err := tx.AddKVAddr(dev, payload); err != nil {
				b.Fatal(err)
			}
			if err := e.Send(nil, &tx, false); err != nil {
				b.Fatal(err)
			}
			if _, err := e.Process(); err != nil {
				b.Fatal(err)
			}
		}
		if done != b.N {
			b.Fatalf("%d completions for %d packets", done, b.N)
		}
	})
	b.Run("hw=goroutine", func(b *testing.B) {
		dev, err := sdma.NewDevice(sdma.Config{RingSize: 1024, Wait: sdma.WaitBusyPoll, Sink: &sdmatest.DiscardSink{}})
		if err != nil {
			b.Fatal(err)
		}
		defer dev.Close()
		e := dev.Engine(0)
		const window = 128 // txreqs in flight at most
		var txs [window]sdma.TxReq
		// Each slot has its own buffers: a buffer mapped by one txreq while another unmaps it is a
		// legal overlap, but it is not what a sender does, and it is slower in the mapper.
		var hdrs, payloads [window][]byte
		for k := range hdrs {
			hdrs[k], payloads[k] = make([]byte, len(hdr)), make([]byte, len(payload))
		}
		var free [window]atomic.Bool
		cbs := make([]sdma.CompleterFunc, window)
		for i := range cbs {
			free[i].Store(true)
			cbs[i] = func(*sdma.TxReq, sdma.Status) { free[i].Store(true) }
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			k := i % window
			i++
			for !free[k].Load() {
				runtime.Gosched()
			}
			free[k].Store(false)
			tx := &txs[k]
			if err := tx.Init(0, len(hdr)+len(payload), cbs[k]); err != nil {
				b.Fatal(err)
			}
			if err := tx.AddKVAddr(dev, hdrs[k]); err != nil {
				b.Fatal(err)
			}
			if err := tx.AddKVAddr(dev, payloads[k]); err != nil {
				b.Fatal(err)
			}
			for {
				err := e.Send(nil, tx, false)
				if err == nil {
					break
				}
				if err != sdma.ErrBusy {
					b.Fatal(err)
				}
				runtime.Gosched()
			}
		}
		for k := range free {
			for !free[k].Load() {
				runtime.Gosched()
			}
		}
	})
}

// copySink copies every packet into one reused buffer: the capturing sink of BenchmarkPayload.
type copySink struct{ dst []byte }

func (s *copySink) Deliver(_ int, segs [][]byte) error {
	n := 0
	for _, seg := range segs {
		n += copy(s.dst[n:], seg)
	}
	return nil
}

// BenchmarkPayload compares the payload bandwidth of a packet's whole way into a copying sink
// (impl=sdma: Init, AddKVAddr, Send, Process, completion, and the sink's copy) with a plain copy
// of the same bytes (impl=copy), in the same run; impl=sdma/mem=registered sends from memory
// registered with the device (no mapping per packet).
func BenchmarkPayload(b *testing.B) {
	for _, size := range []int{256, 4096, 16380} {
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(i)
		}
		for _, mem := range pathMems {
			b.Run(fmt.Sprintf("impl=sdma%s/size=%d", mem.key, size), func(b *testing.B) {
				sink := &copySink{dst: make([]byte, size+4)}
				dev, err := sdma.NewDevice(sdma.Config{Manual: true, Sink: sink})
				if err != nil {
					b.Fatal(err)
				}
				defer dev.Close()
				if mem.registered {
					defer registerBench(b, dev, payload)()
				}
				e := dev.Engine(0)
				var tx sdma.TxReq
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if err := tx.Init(0, size, nil); err != nil {
						b.Fatal(err)
					}
					if err := tx.AddKVAddr(dev, payload); err != nil {
						b.Fatal(err)
					}
					if err := e.Send(nil, &tx, false); err != nil {
						b.Fatal(err)
					}
					if _, err := e.Process(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("impl=copy/size=%d", size), func(b *testing.B) {
			dst := make([]byte, size+4)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				copy(dst, payload)
			}
		})
	}
}

// BenchmarkLatency measures submit-to-completion latency through an engine whose goroutine
// busy-polls (impl=sdma: Send, then spin until the callback ran), against a cache-line
// ping-pong between two goroutines with atomics (impl=pingpong: one round trip), in the same run.
// It reports the p50 and p99 in ns from an HDR histogram. impl=sdma/mem=registered sends from
// memory registered with the device.
func BenchmarkLatency(b *testing.B) {
	quantiles := func(b *testing.B, h *hdrhistogram.Histogram) {
		b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-ns")
		b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-ns")
	}
	for _, mem := range pathMems {
		b.Run("impl=sdma"+mem.key, func(b *testing.B) {
			dev, err := sdma.NewDevice(sdma.Config{Wait: sdma.WaitBusyPoll, Sink: &sdmatest.DiscardSink{}})
			if err != nil {
				b.Fatal(err)
			}
			defer dev.Close()
			e := dev.Engine(0)
			payload := make([]byte, 64)
			if mem.registered {
				defer registerBench(b, dev, payload)()
			}
			var done atomic.Bool
			var cb sdma.CompleterFunc = func(*sdma.TxReq, sdma.Status) { done.Store(true) }
			var tx sdma.TxReq
			h := hdrhistogram.New(1, int64(time.Second), 3)
			b.ReportAllocs()
			for b.Loop() {
				if err := tx.Init(sdma.FlagUrgent, len(payload), cb); err != nil {
					b.Fatal(err)
				}
				if err := tx.AddKVAddr(dev, payload); err != nil {
					b.Fatal(err)
				}
				done.Store(false)
				start := time.Now()
				if err := e.Send(nil, &tx, false); err != nil {
					b.Fatal(err)
				}
				for spin := 1; !done.Load(); spin++ {
					if spin&63 == 0 {
						runtime.Gosched() // in case the engine goroutine shares our P
					}
				}
				_ = h.RecordValue(int64(time.Since(start)))
			}
			quantiles(b, h)
		})
	}
	b.Run("impl=pingpong", func(b *testing.B) {
		var line struct {
			_    [64]byte
			ping atomic.Uint64
			_    [64]byte
			pong atomic.Uint64
			_    [64]byte
		}
		stop := make(chan struct{})
		go func() {
			var last uint64
			for spin := 1; ; spin++ {
				v := line.ping.Load()
				if v != last {
					last = v
					line.pong.Store(v)
					continue
				}
				if spin&63 == 0 {
					select {
					case <-stop:
						return
					default:
					}
					runtime.Gosched()
				}
			}
		}()
		h := hdrhistogram.New(1, int64(time.Second), 3)
		var i uint64
		b.ReportAllocs()
		for b.Loop() {
			i++
			start := time.Now()
			line.ping.Store(i)
			for spin := 1; line.pong.Load() != i; spin++ {
				if spin&63 == 0 {
					runtime.Gosched()
				}
			}
			_ = h.RecordValue(int64(time.Since(start)))
		}
		close(stop)
		quantiles(b, h)
	})
}

// registerBench registers buf with dev and returns the deregistration.
func registerBench(b *testing.B, dev *sdma.Device, buf []byte) func() {
	reg, err := dev.Register(buf)
	if err != nil {
		b.Fatal(err)
	}
	return func() {
		if err := dev.Deregister(context.Background(), reg); err != nil {
			b.Error(err)
		}
	}
}
