package bench

import (
	"context"
	"fmt"
	"math/bits"
	"syscall"
	"testing"

	"github.com/gosdma/gosdma/alloc"
	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
	"github.com/gosdma/gosdma/usdma"
)

// BenchmarkMessage sends one message of size bytes in 8 KiB packets per op, through a usdma
// packet queue (impl=pq: Submit, then the hardware model and completions until the slot is
// COMPLETE) and by hand with sdma's API (impl=hand: the same headers built per packet, the same
// page pieces added by bus address, Send per packet, the same engine passes), with AHG header
// updates (ahg=on) or full headers (ahg=off). Both register the message with the device once
// (the queue's pin cache does it on the first Submit; hand before the loop) and add its page
// pieces with AddKVAddr, which maps nothing in registered memory, so the difference is
// the queue's own work: validation, the slot, the request bookkeeping, the completion ring.
// Both get their txreqs from an alloc.Slab (the queue's default allocator; hand Puts them back
// in its completion), so neither gets the other's allocator cost for free. Manual engine, one goroutine. descB/pkt is the descriptor bytes per packet
// (16 per descriptor), hdrB/pkt the header bytes read from host memory per packet (64 for a
// full header, 0 for an AHG-built one), cpu-ns/op the process's CPU time per message (steadier
// than ns/op on a loaded machine).
func BenchmarkMessage(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		for _, ahg := range []bool{true, false} {
			for _, impl := range []string{"pq", "hand"} {
				name := fmt.Sprintf("size=%dKiB/ahg=%s/impl=%s", size>>10, map[bool]string{true: "on", false: "off"}[ahg], impl)
				b.Run(name, func(b *testing.B) { benchMessage(b, size, ahg, impl) })
			}
		}
	}
}

const msgFrag = 8192

var msgTemplate = usdma.Template{DLID: 7, SLID: 3, Opcode: 0xc0, PKey: 0xffff, DestQP: 0x80, PSN: 100, JKey: 1}

func benchMessage(b *testing.B, size int, ahg bool, impl string) {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 2048, Sink: &sdmatest.DiscardSink{}})
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	e := dev.Engine(0)
	msg := make([]byte, size)
	npkts := (size + msgFrag - 1) / msgFrag
	var step func() error
	var hdrs func() uint64 // full headers sent
	switch impl {
	case "pq":
		pq, err := usdma.New(usdma.Config{Device: dev, DisableAHG: !ahg})
		if err != nil {
			b.Fatal(err)
		}
		defer pq.Close(context.Background())
		info, hdr := usdma.Message(0, msgFrag, msgTemplate, msg)
		step = func() error {
			if err := pq.Submit(context.Background(), info, &hdr, msg); err != nil {
				return err
			}
			for pq.Comp(0).Status == usdma.Queued {
				if _, err := e.Process(); err != nil {
					return err
				}
				e.Poll()
			}
			return nil
		}
		hdrs = func() uint64 { return pq.Stats().FullHeaders }
	case "hand":
		h := newHandMsg(dev, msg, npkts, ahg)
		defer h.close()
		step = h.send
		hdrs = func() uint64 { return h.hdrs }
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if err := step(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// CPU time (user+system, the whole process) per message: on a shared machine, wall time
	// includes the time the process waited for a core; the work itself is closer to this.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	st := e.Stats()
	pkts := float64(st.Packets)
	b.ReportMetric(float64(st.Descs*16)/pkts, "descB/pkt")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/pkts, "ns/pkt")
	b.ReportMetric(float64(hdrs()*usdma.HeaderSize)/pkts, "hdrB/pkt")
}

// cpuTime returns the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// handMsg sends a message packet by packet with sdma's API: what a caller without a packet
// queue writes.
type handMsg struct {
	dev   *sdma.Device
	e     *sdma.Engine
	msg   []byte
	reg   *dma.Registration
	ahg   bool
	slab  *alloc.Slab[handTx]
	npkts int
	done  int
	hdrs  uint64
	words [6]uint32
}

type handTx struct {
	sdma.TxReq
	hdr usdma.Header
	m   *handMsg
}

func (t *handTx) Complete(*sdma.TxReq, sdma.Status) {
	m := t.m
	m.done++
	_ = m.slab.Put(t)
}

func newHandMsg(dev *sdma.Device, msg []byte, npkts int, ahg bool) *handMsg {
	reg, err := dev.Register(msg)
	if err != nil {
		panic(err)
	}
	h := &handMsg{dev: dev, e: dev.Engine(0), msg: msg, reg: reg, ahg: ahg, npkts: npkts}
	if h.slab, err = alloc.NewSlab(alloc.SlabConfig[handTx]{ObjectsPerSlab: 256, Init: func(t *handTx) { t.m = h }}); err != nil {
		panic(err)
	}
	return h
}

func (h *handMsg) close() { _ = h.dev.Deregister(context.Background(), h.reg) }

func (h *handMsg) send() error {
	h.done = 0
	entry := -1
	if h.ahg && h.npkts > 1 {
		if i, err := h.e.AHGAlloc(); err == nil {
			entry = i
		}
	}
	first := min(len(h.msg), msgFrag)
	for k := range h.npkts {
		tx, err := h.slab.Get()
		if err != nil {
			return err
		}
		off := k * msgFrag
		n := min(msgFrag, len(h.msg)-off)
		switch {
		case entry >= 0 && k > 0:
			err = h.ahgHeader(tx, entry, k, off, n, first)
		default:
			t := msgTemplate
			t.PSN += uint32(k)
			t.Offset = uint32(off)
			tx.hdr, _ = t.Header(n) // n is at most the fragment size: no error
			if k == h.npkts-1 && k > 0 {
				tx.hdr[24] |= 0x80 // BTH.A
			}
			flags, ahg := sdma.Flags(0), sdma.AHG{}
			if entry >= 0 {
				flags, ahg = sdma.FlagAHGCopy, sdma.AHG{Entry: entry}
			}
			if err = tx.InitAHG(flags, usdma.HeaderSize+n, ahg, tx); err == nil {
				err = tx.AddKVAddr(h.dev, tx.hdr[:])
			}
			h.hdrs++
		}
		for q := off; err == nil && q < off+n; {
			p := min(dma.PageSize-int((uintptr(q)+addrOf(h.msg))%dma.PageSize), off+n-q)
			err = tx.AddKVAddr(h.dev, h.msg[q:q+p])
			q += p
		}
		if err == nil {
			err = h.e.Send(nil, &tx.TxReq, false)
		}
		if err != nil {
			return err
		}
	}
	if entry >= 0 {
		_ = h.e.AHGFree(entry)
	}
	for h.done < h.npkts {
		if _, err := h.e.Process(); err != nil {
			return err
		}
		h.e.Poll()
	}
	return nil
}

// ahgHeader builds packet k's update words by hand (the fields set_txreq_header_ahg patches).
func (h *handMsg) ahgHeader(tx *handTx, entry, k, off, n, first int) error {
	w := h.words[:0]
	put := func(dw, bit, width uint8, v uint16) {
		u, _ := desc.AHGUpdate(v, dw, bit, width)
		w = append(w, u)
	}
	if n != first {
		lrh := 60 + (n+3)&^3
		put(0, 0, 12, uint16(lrh>>2+1))
		put(3, 0, 16, bits.ReverseBytes16(uint16(lrh>>2)))
	}
	psn := (msgTemplate.PSN + uint32(k)) & 0xffffff
	if k == h.npkts-1 {
		psn |= 1 << 31
	}
	put(6, 0, 16, bits.ReverseBytes16(uint16(psn>>16)))
	put(6, 16, 16, bits.ReverseBytes16(uint16(psn)))
	koff := msgTemplate.Offset + uint32(off)
	put(15, 0, 16, uint16(koff))
	put(15, 16, 16, uint16(koff>>16))
	return tx.InitAHG(sdma.FlagUseAHG, n, sdma.AHG{Entry: entry, Words: w, HeaderLen: usdma.HeaderSize}, tx)
}
