package verbs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/pio"
	"github.com/gosdma/gosdma/sdma"
)

// orderSink checks that each flow's packets arrive in order: each starts with the flow id and a
// sequence number (8 bytes each). It keeps a copy of every packet.
type orderSink struct {
	mu   sync.Mutex
	last map[uint64]uint64
	pkts map[uint64][][]byte
	bad  []string
}

func newOrderSink() *orderSink {
	return &orderSink{last: map[uint64]uint64{}, pkts: map[uint64][][]byte{}}
}

func (s *orderSink) Deliver(_ int, segs [][]byte) error {
	var p []byte
	for _, b := range segs {
		p = append(p, b...)
	}
	flow, seq := binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.last[flow]; ok && seq <= prev {
		s.bad = append(s.bad, "flow "+itoa(flow)+": "+itoa(seq)+" after "+itoa(prev))
	}
	s.last[flow] = seq
	s.pkts[flow] = append(s.pkts[flow], p)
	return nil
}

func itoa(n uint64) string { return string(binary.AppendUvarint(nil, n)) }

func packet(flow, seq uint64, n int) []byte {
	p := make([]byte, n)
	binary.LittleEndian.PutUint64(p, flow)
	binary.LittleEndian.PutUint64(p[8:], seq)
	for i := 16; i < n; i++ {
		p[i] = byte(i*31) ^ byte(seq)
	}
	return p
}

func newDevice(t testing.TB, sink sdma.Sink, mapper dma.Mapper, cfg Config) *Device {
	t.Helper()
	sd, err := sdma.NewDevice(sdma.Config{Sink: sink, Mapper: mapper, Engines: 2})
	if err != nil {
		t.Fatal(err)
	}
	cfg.SDMA = sd
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		sd.Close()
	})
	return d
}

// Packets up to the threshold go by PIO, larger ones by SDMA (get_send_routine); the kernel's
// default threshold is 256 and its ceiling 4096.
func TestChooseByThreshold(t *testing.T) {
	sink := newOrderSink()
	d := newDevice(t, sink, nil, Config{})
	if d.PIOThreshold() != pio.DefaultThreshold {
		t.Fatalf("default threshold %d", d.PIOThreshold())
	}
	f := d.NewFlow(0, 0)
	ctx := context.Background()
	for i, c := range []struct {
		n    int
		want Path
	}{{64, PathPIO}, {256, PathPIO}, {257, PathSDMA}, {2048, PathSDMA}} {
		got, err := f.Send(ctx, [][]byte{packet(1, uint64(i), c.n)}, nil)
		if err != nil || got != c.want {
			t.Fatalf("%d bytes: %v %v, want %v", c.n, got, err, c.want)
		}
		if err := f.Drain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if f.Sent(PathPIO) != 2 || f.Sent(PathSDMA) != 2 {
		t.Fatalf("sent pio %d sdma %d", f.Sent(PathPIO), f.Sent(PathSDMA))
	}
	// A small packet behind SDMA packets still in flight goes by SDMA (iowait_sdma_pending).
	f.sdmaBusy.Add(1)
	if f.choose(64) != PathSDMA {
		t.Fatal("PIO chosen with SDMA in flight")
	}
	f.sdmaBusy.Add(-1)
	for _, bad := range []int{-1, pio.ThresholdCeiling + 1} {
		if _, err := New(Config{SDMA: d.SDMA(), PIOThreshold: bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("threshold %d: %v", bad, err)
		}
	}
	if _, err := New(Config{}); !errors.Is(err, ErrInvalid) {
		t.Error("nil SDMA accepted")
	}
}

// The same sink sees both kinds of packet byte for byte the same: every size once by PIO, once
// by SDMA, including lengths that are not whole dwords (both paths pad to 4 bytes with zeros).
func TestPathsByteIdentical(t *testing.T) {
	sink := newOrderSink()
	allPIO := newDevice(t, sink, nil, Config{PIOThreshold: pio.ThresholdCeiling, Credits: 200})
	allSDMA := newDevice(t, sink, nil, Config{DisablePIO: true})
	ctx := context.Background()
	fp, fs := allPIO.NewFlow(0, 0), allSDMA.NewFlow(0, 0)
	seq := uint64(0)
	for _, n := range []int{16, 17, 19, 20, 63, 64, 65, 255, 256, 1000, 4093, 4096} {
		p := packet(1, seq, n)
		q := packet(2, seq, n)
		seq++
		// In several pieces, cut unevenly.
		segs := func(b []byte) [][]byte { return [][]byte{b[:5], b[5 : n/2], b[n/2:]} }
		if path, err := fp.Send(ctx, segs(p), nil); err != nil || path != PathPIO {
			t.Fatalf("%d: %v %v", n, path, err)
		}
		if path, err := fs.Send(ctx, segs(q), nil); err != nil || path != PathSDMA {
			t.Fatalf("%d: %v %v", n, path, err)
		}
	}
	if err := fp.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fs.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	a, b := sink.pkts[1], sink.pkts[2]
	if len(a) != 12 || len(b) != 12 {
		t.Fatalf("got %d PIO and %d SDMA packets", len(a), len(b))
	}
	for i := range a {
		x, y := a[i][8:], b[i][8:] // past the flow id
		if !bytes.Equal(x, y) {
			t.Fatalf("packet %d: PIO %x\nSDMA %x", i, x, y)
		}
		if len(a[i])%4 != 0 {
			t.Fatalf("packet %d: %d bytes, not padded to dwords", i, len(a[i]))
		}
	}
}

// Many flows, each from its own goroutine, with sizes on both sides of the threshold: the sink
// sees every flow's packets in order and none lost, whichever path each took.
func TestConcurrentFlowsInOrder(t *testing.T) {
	for _, faults := range []bool{false, true} {
		sink := newOrderSink()
		cfg := Config{Contexts: 2}
		if faults {
			cfg.PIOFaults = pio.FaultPlan{HaltEvery: 53}
		}
		d := newDevice(t, sink, nil, cfg)
		const flows = 6
		per := 2000
		if testing.Short() {
			per = 300
		}
		var lost atomic.Int64
		var wg sync.WaitGroup
		for fl := range flows {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f := d.NewFlow(uint32(fl), uint8(fl%2))
				rng := rand.New(rand.NewPCG(uint64(fl), 9))
				ctx := context.Background()
				for i := range per {
					// Mostly small: once an SDMA packet is in flight, the flow's small ones
					// follow it by SDMA until it completes (iowait_sdma_pending), so the
					// flow drains now and then to give PIO its share.
					n := 16 + rng.IntN(240)
					if rng.IntN(8) == 0 {
						n = 300 + rng.IntN(1200)
					}
					if i%50 == 49 {
						if err := f.Drain(ctx); err != nil {
							t.Error(err)
							return
						}
					}
					_, err := f.Send(ctx, [][]byte{packet(uint64(fl), uint64(i), n)}, nil)
					if errors.Is(err, pio.ErrNotRunning) {
						lost.Add(1) // the context was recovering from a halt: not sent
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
				if err := f.Drain(ctx); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		sink.mu.Lock()
		if len(sink.bad) > 0 {
			t.Fatalf("out of order: %v", sink.bad[:min(5, len(sink.bad))])
		}
		total := 0
		for _, p := range sink.pkts {
			total += len(p)
		}
		sink.mu.Unlock()
		if !faults && total != flows*per {
			t.Fatalf("sink got %d packets, want %d", total, flows*per)
		}
		if faults && (d.Context(0).Stats().Halts == 0 || total > flows*per) {
			t.Fatalf("faults: %d halts, %d delivered", d.Context(0).Stats().Halts, total)
		}
	}
}

// countingMapper counts what the device side of each path asks of the mapper.
type countingMapper struct {
	dma.Mapper
	maps, translates atomic.Int64
}

func (m *countingMapper) MapSingle(buf []byte, dir dma.Direction) (dma.Addr, error) {
	m.maps.Add(1)
	return m.Mapper.MapSingle(buf, dir)
}

func (m *countingMapper) Translate(a dma.Addr, n int, dir dma.Direction) ([]byte, error) {
	m.translates.Add(1)
	return m.Mapper.Translate(a, n, dir)
}

// Seed 004's reason for interposition: the PIO path reads the caller's memory through its CPU
// address (the identity, no mapping at all), the SDMA path through a mapping the device
// translates. One send call serves both, and the bytes on the wire are the same.
func TestSeed004PIOIsIdentitySDMAIsMapped(t *testing.T) {
	iommu, err := dma.NewIOMMU(dma.IOMMUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m := &countingMapper{Mapper: iommu}
	sink := newOrderSink()
	d := newDevice(t, sink, m, Config{})
	f := d.NewFlow(0, 0)
	ctx := context.Background()
	small := packet(7, 0, 200)
	if _, err := f.Send(ctx, [][]byte{small[:100], small[100:]}, nil); err != nil {
		t.Fatal(err)
	}
	f.Drain(ctx)
	if m.maps.Load() != 0 || m.translates.Load() != 0 {
		t.Fatalf("PIO packet: %d maps, %d translates; PIO reads through the CPU address", m.maps.Load(), m.translates.Load())
	}
	big := packet(7, 1, 1000)
	if _, err := f.Send(ctx, [][]byte{big[:100], big[100:]}, nil); err != nil {
		t.Fatal(err)
	}
	f.Drain(ctx)
	if m.maps.Load() != 2 || m.translates.Load() < 2 {
		t.Fatalf("SDMA packet: %d maps, %d translates; want each piece mapped and translated", m.maps.Load(), m.translates.Load())
	}
	// The bus address the IOMMU gave is not the CPU address: only Translate leads back.
	a, err := iommu.MapSingle(big, dma.ToDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer iommu.UnmapSingle(a, len(big), dma.ToDevice)
	if uint64(a) == uint64(cpuAddr(big)) {
		t.Fatal("IOMMU address equals the CPU address")
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	got := sink.pkts[7]
	if len(got) != 2 || !bytes.Equal(got[0], small) || !bytes.Equal(got[1], big) {
		t.Fatalf("wire bytes differ from the caller's")
	}
}

// done counts completions.
type done struct {
	n   atomic.Int64
	err atomic.Int64
}

func (d *done) Done(_ Path, err error) {
	d.n.Add(1)
	if err != nil {
		d.err.Add(1)
	}
}

// Every accepted packet's Completion is told exactly once, on both paths.
func TestCompletionOnce(t *testing.T) {
	d := newDevice(t, newOrderSink(), nil, Config{})
	f := d.NewFlow(3, 0)
	var c done
	ctx := context.Background()
	for i := range 200 {
		if _, err := f.Send(ctx, [][]byte{packet(3, uint64(i), 16+i*5)}, &c); err != nil {
			t.Fatal(err)
		}
	}
	f.Drain(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for c.n.Load() != 200 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if c.n.Load() != 200 || c.err.Load() != 0 {
		t.Fatalf("%d completions, %d errors", c.n.Load(), c.err.Load())
	}
	if _, err := f.Send(ctx, nil, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty packet: %v", err)
	}
}

// A manual device: the caller drives the chips, and Drain drives the engine.
func TestManual(t *testing.T) {
	sink := newOrderSink()
	sd, err := sdma.NewDevice(sdma.Config{Sink: sink, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	d, err := New(Config{SDMA: sd, ManualPIO: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f := d.NewFlow(0, 0)
	ctx := context.Background()
	for i := range 50 {
		if _, err := f.Send(ctx, [][]byte{packet(1, uint64(i), 16+(i%3)*200)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	d.Process()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.pkts[1]) != 50 || len(sink.bad) != 0 {
		t.Fatalf("%d packets, %v", len(sink.pkts[1]), sink.bad)
	}
}
