package bench

import (
	"context"
	"strconv"
	"testing"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/verbs"
)

// verbsDone counts a verbs packet's completions (a pointer type: Send allocates nothing).
type verbsDone struct{ n int }

func (c *verbsDone) Done(verbs.Path, error) { c.n++ }

// BenchmarkVerbsSend sends one packet per op through a verbs.Flow (Send, then Drain), driven
// inline (a Manual SDMA device, ManualPIO): path=pio a 64-byte packet (hfi1_verbs_send_pio),
// path=sdma a 1024-byte one (hfi1_verbs_send_dma: a txreq from the Device's pool, one mapping,
// SendWait, the hardware and completion passes that Drain runs), against the same packet sent by
// hand on the path's own package (impl=hand: BenchmarkSmallPacket's calls; by SDMA with verbs'
// txreq flags, none, where BenchmarkSmallPacket's is urgent and pays the interrupt that asks), so
// that the verbs layer's own cost per packet is the difference. Steady state allocates nothing.
func BenchmarkVerbsSend(b *testing.B) {
	for _, path := range []struct {
		name string
		size int
	}{{"pio", 64}, {"sdma", 1024}} {
		for _, impl := range []string{"verbs", "hand"} {
			b.Run("path="+path.name+"/size="+strconv.Itoa(path.size)+"/impl="+impl, func(b *testing.B) {
				payload := make([]byte, path.size)
				sink := &countSink{}
				var send func()
				switch {
				case impl == "verbs":
					send = verbsSend(b, sink, payload, path.name)
				case path.name == "pio":
					send = smallPIO(b, sink, payload)
				default:
					send = smallSDMA(b, sink, payload, 0) // verbs' flags: not urgent
				}
				b.SetBytes(int64(path.size))
				b.ReportAllocs()
				for b.Loop() {
					send()
				}
				if sink.pkts != b.N+sinkWarm {
					b.Fatalf("sink got %d packets for %d", sink.pkts, b.N+sinkWarm)
				}
				reportPkt(b)
			})
		}
	}
}

// verbsSend returns the send of one packet of payload through a flow of a verbs.Device on a
// Manual SDMA device, by path (pio or sdma, which the packet's size picks), and sends one.
func verbsSend(b *testing.B, sink *countSink, payload []byte, path string) func() {
	sd, err := sdma.NewDevice(sdma.Config{Manual: true, Sink: sink})
	if err != nil {
		b.Fatal(err)
	}
	d, err := verbs.New(verbs.Config{SDMA: sd, ManualPIO: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close(); sd.Close() })
	want := verbs.PathPIO
	if path == "sdma" {
		want = verbs.PathSDMA
	}
	f := d.NewFlow(0, 0)
	ctx := context.Background()
	segs := [][]byte{payload}
	c := &verbsDone{}
	send := func() {
		n := c.n
		p, err := f.Send(ctx, segs, c)
		if err != nil || p != want {
			b.Fatalf("Send: %v by %v, want %v", err, p, want)
		}
		if err := f.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		if c.n != n+1 {
			b.Fatalf("Done told %d times for one packet", c.n-n)
		}
	}
	send()
	return send
}
