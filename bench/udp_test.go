//go:build linux

package bench

import (
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
	"github.com/gosdma/gosdma/sdma/udpsink"
)

// udpDrain is a loopback receiver for the UDP benchmarks: a goroutine reading with recvmmsg(2)
// as fast as it can, so that every variant sends into a socket that is being read. It calls
// recvmmsg itself rather than through x/net's ReadBatch, which allocates each datagram's source
// address: the benchmarks' allocs/op are then the sender's alone.
type udpDrain struct {
	conn *net.UDPConn
	got  atomic.Uint64 // datagrams read (atomic add by the reader, load by the benchmark)
	done chan struct{}
}

func newUDPDrain(b *testing.B) *udpDrain {
	b.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	_ = conn.SetReadBuffer(4 << 20)
	d := &udpDrain{conn: conn, done: make(chan struct{})}
	rc, err := conn.SyscallConn()
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		defer close(d.done)
		const batch = 64
		bufs := make([]byte, batch*65536)
		iovs := make([]unix.Iovec, batch)
		hs := make([]mmsghdr, batch)
		for i := range hs {
			iovs[i].Base = &bufs[i*65536]
			iovs[i].SetLen(65536)
			hs[i].hdr.Iov = &iovs[i]
			hs[i].hdr.SetIovlen(1)
		}
		var n int
		read := func(fd uintptr) bool {
			r, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&hs[0])), batch, unix.MSG_DONTWAIT, 0, 0)
			if errno == unix.EAGAIN {
				return false // wait for the socket to be readable
			}
			n = int(r)
			if errno != 0 {
				n = 0
			}
			return true
		}
		for {
			if err := rc.Read(read); err != nil {
				return // closed
			}
			d.got.Add(uint64(n))
		}
	}()
	return d
}

// mmsghdr is struct mmsghdr (recvmmsg's vector); Go pads it to the msghdr's alignment as C does
// (64 bytes on 64-bit systems, 32 on 32-bit ones).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

func (d *udpDrain) close() {
	d.conn.Close()
	<-d.done
}

// udpPacket returns a packet of size bytes in two segments (a 40-byte header and the payload;
// for 64 bytes, 24 and 40), as an engine hands them to its sink.
func udpPacket(size int) [][]byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i * 7)
	}
	h := min(40, size/2)
	return [][]byte{b[:h:h], b[h:]}
}

// threadCPU is the CPU time (user and system) the calling OS thread has used. The benchmarks
// lock their goroutine to its thread and report the sending thread's CPU time per packet
// beside the wall time: on a shared machine the wall time also counts the time the thread
// waited for a CPU, the CPU time only the work (the kernel's loopback path included).
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// udpMeter measures a UDP benchmark: wall and thread CPU time from start to stop.
type udpMeter struct {
	wall time.Time
	cpu  time.Duration
}

// start locks the goroutine to its thread (unlocked by stop) and starts the clocks.
func (m *udpMeter) start() {
	runtime.LockOSThread()
	m.wall, m.cpu = time.Now(), threadCPU()
}

// stop reports ns per packet (ns/op: one op is one packet), GB/s of payload, the sending
// thread's CPU ns per packet and the send system calls per packet.
func (m *udpMeter) stop(b *testing.B, size int, syscalls uint64) {
	elapsed, cpu := time.Since(m.wall), threadCPU()-m.cpu
	runtime.UnlockOSThread()
	b.SetBytes(int64(size))
	if b.N > 0 && elapsed > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/float64(elapsed.Nanoseconds()), "GB/s")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/pkt")
		if syscalls > 0 {
			b.ReportMetric(float64(syscalls)/float64(b.N), "syscalls/pkt")
		}
	}
}

// BenchmarkUDPSink measures the UDP sink's send path alone, one packet of two segments per op
// to a loopback receiver that drains with recvmmsg: batch=1 is Deliver, one sendmsg(2) a packet
// (the unbatched sink); batch=32 queues 32 packets and flushes them with one sendmmsg(2)
// (gso=off), or with runs of equal frames as UDP GSO messages (gso=on); impl=net is the plain Go
// baseline, net.UDPConn.WriteMsgUDP of the same bytes (frame header and payload) from one
// contiguous buffer. GSO needs batching, so there is no batch=1/gso=on.
func BenchmarkUDPSink(b *testing.B) {
	for _, size := range []int{64, 1024, 8192} {
		for _, v := range []struct {
			batch int
			gso   bool
		}{{1, false}, {32, false}, {32, true}} {
			gso := map[bool]string{false: "off", true: "on"}[v.gso]
			b.Run(fmt.Sprintf("size=%d/batch=%d/gso=%s", size, v.batch, gso), func(b *testing.B) {
				benchUDPSink(b, size, v.batch, v.gso)
			})
		}
		b.Run(fmt.Sprintf("size=%d/impl=net", size), func(b *testing.B) { benchUDPNet(b, size) })
	}
}

func benchUDPSink(b *testing.B, size, batch int, gso bool) {
	d := newUDPDrain(b)
	defer d.close()
	s, err := udpsink.New(udpsink.Config{Addr: d.conn.LocalAddr().String(), Batch: batch, GSO: gso})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	segs := udpPacket(size)
	errs := make([]error, batch)
	queued := 0
	b.ReportAllocs()
	var m udpMeter
	m.start()
	for b.Loop() {
		if batch == 1 {
			if err := s.Deliver(0, segs); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if err := s.Queue(0, segs); err != nil {
			b.Fatal(err)
		}
		if queued++; queued == batch {
			s.Flush(0, errs[:queued])
			queued = 0
		}
	}
	if queued > 0 {
		s.Flush(0, errs[:queued])
	}
	st := s.Stats()
	m.stop(b, size, st.Syscalls)
	if st.Errors != 0 {
		b.Fatalf("%d send errors", st.Errors)
	}
}

func benchUDPNet(b *testing.B, size int) {
	d := newUDPDrain(b)
	defer d.close()
	conn, err := net.DialUDP("udp", nil, d.conn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetWriteBuffer(4 << 20)
	buf := make([]byte, udpsink.HeaderLen+size) // the same frame, contiguous
	segs := udpPacket(size)
	udpsink.PutHeader(buf, udpsink.Header{CRC: udpsink.Checksum(segs)})
	copy(buf[udpsink.HeaderLen:], segs[0])
	copy(buf[udpsink.HeaderLen+len(segs[0]):], segs[1])
	b.ReportAllocs()
	var m udpMeter
	m.start()
	for b.Loop() {
		if _, _, err := conn.WriteMsgUDP(buf, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	m.stop(b, size, uint64(b.N))
}

// BenchmarkUDPIdle is one packet on an idle engine, submit to completion, through a device
// whose sink is the UDP sink: batch=1 delivers it with sendmsg(2) as it is gathered; with
// batch=32 the engine sees no batch held and nothing published behind the packet, and delivers
// it at once the same way: the deferred head must not make a lone packet slower.
// The hardware pass runs inline (a Manual engine: Send, then Process, whose interrupt completes
// the packet), so that ns/op is the path's own cost and not a goroutine hand-off's.
func BenchmarkUDPIdle(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("size=1024/batch=%d", batch), func(b *testing.B) {
			d := newUDPDrain(b)
			defer d.close()
			s, err := udpsink.New(udpsink.Config{Addr: d.conn.LocalAddr().String(), Batch: batch})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			dev, err := sdma.NewDevice(sdma.Config{Manual: true, Sink: s})
			if err != nil {
				b.Fatal(err)
			}
			defer dev.Close()
			benchIdle(b, dev, 1024)
			if st := s.Stats(); st.Errors != 0 || st.Packets < uint64(b.N) || st.Batches != 0 {
				b.Fatalf("sink: %+v for %d lone packets (none batched)", st, b.N)
			}
		})
	}
}

// BenchmarkIdlePacket is BenchmarkUDPIdle without the socket, the model's own cost: one packet
// on an idle engine (inline, as there), submit to completion, into a sink that drops it
// (sink=deliver: a plain Sink; sink=batch: a BatchSink of 32 packets, which the engine hands a
// lone packet with Deliver too).
func BenchmarkIdlePacket(b *testing.B) {
	for _, name := range []string{"deliver", "batch"} {
		b.Run("sink="+name, func(b *testing.B) {
			var sink sdma.Sink = &sdmatest.DiscardSink{}
			if name == "batch" {
				sink = &discardBatch{}
			}
			dev, err := sdma.NewDevice(sdma.Config{Manual: true, Sink: sink})
			if err != nil {
				b.Fatal(err)
			}
			defer dev.Close()
			benchIdle(b, dev, 64)
		})
	}
}

// benchIdle sends one urgent packet of two segments at a time on a Manual engine and runs the
// hardware pass that sends and completes it, all on the benchmark's thread, whose CPU time per
// packet it reports beside the wall time.
func benchIdle(b *testing.B, dev *sdma.Device, size int) {
	e := dev.Engine(0)
	segs := udpPacket(size)
	var done atomic.Bool
	var cb sdma.CompleterFunc = func(*sdma.TxReq, sdma.Status) { done.Store(true) }
	var tx sdma.TxReq
	b.ReportAllocs()
	var m udpMeter
	m.start()
	defer m.stop(b, size, 0)
	for b.Loop() {
		if err := tx.Init(sdma.FlagUrgent, size, cb); err != nil {
			b.Fatal(err)
		}
		for _, sg := range segs {
			if err := tx.AddKVAddr(dev, sg); err != nil {
				b.Fatal(err)
			}
		}
		done.Store(false)
		if err := e.Send(nil, &tx, false); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Process(); err != nil {
			b.Fatal(err)
		}
		if !done.Load() {
			b.Fatal("the packet did not complete in its pass")
		}
	}
}

// discardBatch is a BatchSink that drops what it is given.
type discardBatch struct{ held int }

func (d *discardBatch) Deliver(int, [][]byte) error { return nil }
func (d *discardBatch) BatchLimit() (int, int)      { return 32, 0 }
func (d *discardBatch) Queue(int, [][]byte) error   { d.held++; return nil }
func (d *discardBatch) Flush(_ int, errs []error)   { d.held -= len(errs) }
