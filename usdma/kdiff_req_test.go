package usdma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gosdma/gosdma/sdma"
)

// Errnos of the kernel model (hfi1_user_sdma_process_request returns them negated; set_comp_state
// writes errcode = -ret).
const (
	kEINVAL   = 22
	kEFAULT   = 14
	kEBADSLT  = 57
	kENODATA  = 61
	kECOMM    = 70
	kEMSGSIZE = 90
)

// kreqCfg is what the kernel model of a request depends on besides the request.
type kreqCfg struct {
	ringSize int  // hfi1_sdma_comp_ring_size
	vlsOp    int  // dd->pport->vls_operational
	ahg      bool // HFI1_CAP_SDMA_AHG, with an entry free on the engine (sdma_ahg_alloc succeeds)
	running  bool // sdma_running(req->sde)
	pcount   int  // the maxpkts process_request passes to user_sdma_send_pkts
}

// kreqResult is what the kernel model says of one request.
type kreqResult struct {
	ret      int       // 0, or the errno process_request returns
	claimed  bool      // test_and_set_bit on req_in_use was reached (the slot was the request's)
	state    CompState // with claimed: the slot's state once the request ended
	errcode  uint32    // with state ERROR
	expected bool      // EXPECTED, past the pre-claim checks: the TID path is not followed
	ub       string    // the kernel's behaviour is not defined here: why (nothing else is set)
	lens     []int     // each packet's payload length, in the order sent
	batches  []int     // the length of each list handed to sdma_send_txlist
	ahg      bool      // an AHG entry was allocated (npkts > 1 and the capability)
	dataLen  int       // req->data_len
	sent     int       // payload bytes sent (req->sent)
}

// kernelRequest is a line-by-line model of the mainline user_sdma.c (after "IB/hfi1: Fix bugs
// with non-PAGE_SIZE-end multi-iovec user SDMA requests", whose payload walk takes each vector up
// to its length and refuses an empty one) for one request on a free slot:
// hfi1_user_sdma_process_request's checks in their order and their errno, compute_data_length,
// user_sdma_txadd_ahg, set_txreq_header, set_txreq_header_ahg and check_header_template as far as
// they can fail, sdma_txinit_ahg's length checks (tlen is a u16), user_sdma_send_pkts' loop
// (maxpkts, the packets built in a pass that fails are never sent, the rest go in one
// sdma_send_txlist, which here always has room) and the free_req/set_comp_state ending. Lengths
// are computed in u32 as the kernel computes them. Every packet completes OK. The header bytes
// are kernelEagerPackets'.
func kernelRequest(k kreqCfg, info ReqInfo, hdr Header, vecs [][]byte) kreqResult {
	var r kreqResult
	dim := 1 + len(vecs) // the writev's iovecs: the header's and the data's
	le16 := func(o int) uint16 { return binary.LittleEndian.Uint16(hdr[o:]) }
	be16 := func(o int) uint16 { return binary.BigEndian.Uint16(hdr[o:]) }
	be32 := func(o int) uint32 { return binary.BigEndian.Uint32(hdr[o:]) }

	// "if (info.comp_idx >= hfi1_sdma_comp_ring_size) return -EINVAL;"
	if int(info.CompIdx) >= k.ringSize {
		r.ret = kEINVAL
		return r
	}
	// "if (req_iovcnt(info.ctrl) < 1 || req_iovcnt(info.ctrl) > dim) return -EINVAL;"
	iovcnt := int(info.Ctrl >> 8 & 0xff)
	if iovcnt < 1 || iovcnt > dim {
		r.ret = kEINVAL
		return r
	}
	// "if (!info.fragsize) return -EINVAL;"
	if info.FragSize == 0 {
		r.ret = kEINVAL
		return r
	}
	// "if (test_and_set_bit(info.comp_idx, pq->req_in_use)) return -EBADSLT;": the slot is free
	r.claimed = true
	freeReq := func(ret int) kreqResult { // free_req: seqsubmitted < npkts
		r.ret, r.state, r.errcode = ret, Error, uint32(ret)
		return r
	}
	dataIovs := iovcnt - 1
	if info.Ctrl>>4&0xf == 0 { // EXPECTED
		r.expected = true
		if dataIovs < 2 {
			return freeReq(kEINVAL)
		}
		return r
	}
	// "if (!info.npkts || req->data_iovs > MAX_VECTORS_PER_REQ)"
	if info.NPkts == 0 || dataIovs > MaxVectorsPerReq {
		return freeReq(kEINVAL)
	}
	// "if (!HFI1_CAP_IS_USET(STATIC_RATE_CTRL)) req->hdr.pbc[2] = 0;": nothing below reads
	// pbc[2]; the wire bytes are kernelEagerPackets', which takes the capability (keepRate).
	// "if ((opcode & USER_OPCODE_CHECK_MASK) != USER_OPCODE_CHECK_VAL)"
	if op := be32(16) >> 24 & 0xff; op&0xc0 != 0xc0 {
		return freeReq(kEINVAL)
	}
	// "if (vl >= dd->pport->vls_operational || vl != sc_to_vlt(dd, sc))" with the port's
	// reduction of the SC-to-VL table to the identity (documented).
	vl := int(le16(0) >> 12 & 0xf)
	sc := int(be16(8)>>12&0xf) | int(le16(2)>>14&1)<<4
	if vl >= k.vlsOp || vl != sc {
		return freeReq(kEINVAL)
	}
	// egress_pkey_check: not modelled (documented).
	// "if ((be16_to_cpu(req->hdr.lrh[0]) & 0x3) == HFI1_LRH_GRH)"
	if be16(8)&3 == 3 {
		return freeReq(kEINVAL)
	}
	// "if (req->iovs[i].iov.iov_len == 0) { ret = -EINVAL; goto free_req; }"
	var dataLen uint32
	for i := range dataIovs {
		if len(vecs[i]) == 0 {
			return freeReq(kEINVAL)
		}
		dataLen += uint32(len(vecs[i]))
	}
	r.dataLen = int(dataLen)
	pcount := k.pcount // "if (pcount > req->info.npkts) pcount = req->info.npkts;"
	if pcount > int(info.NPkts) {
		pcount = int(info.NPkts)
	}
	// "if (!req->sde || !sdma_running(req->sde)) { ret = -ECOMM; goto free_req; }"
	if !k.running {
		return freeReq(kECOMM)
	}
	r.ahg = info.NPkts > 1 && k.ahg // sdma_ahg_alloc
	// set_comp_state(QUEUED); the send loop.
	npkts := int(info.NPkts)
	frag := uint32(info.FragSize)
	padLen := func(l uint32) uint32 { // pad_len, in u32
		if l&3 != 0 {
			l += 4 - l&3
		}
		return l
	}
	// check_header_template, EAGER: "if (req->info.fragsize % PIO_BLOCK_SIZE || lrhlen & 0x3 ||
	// lrhlen > get_lrh_len(*hdr, req->info.fragsize)) return -EINVAL;"
	checkHeaderTemplate := func(lrhlen uint32) bool {
		return frag%PIOBlockSize == 0 && lrhlen&3 == 0 && lrhlen <= 60+frag
	}
	// sdma_txinit_ahg's checks; tlen is a u16 parameter.
	txinit := func(tlen uint16) int {
		switch {
		case tlen == 0:
			return kENODATA
		case tlen > MaxSDMAPktSize:
			return kEMSGSIZE
		}
		return 0
	}
	seqnum, seqsubmitted := 0, 0
	var sent uint32
	for seqsubmitted != npkts {
		// user_sdma_send_pkts(req, pcount)
		maxpkts := pcount
		if maxpkts > npkts-seqnum {
			maxpkts = npkts - seqnum
		}
		built := 0
		for built < maxpkts {
			var datalen uint32
			if dataLen != 0 {
				// compute_data_length, EAGER
				switch {
				case seqnum == 0 && dataLen < 4:
					datalen = dataLen
				case seqnum == 0:
					datalen = uint32(be16(12))<<2 - (HeaderSize - 4)
				default:
					datalen = min(dataLen-sent, frag)
				}
				// "Request has data but pkt len is 0" (also where the vectors ran out: the
				// iovec check before it sees an iovec past data_iovs, whose offset and length
				// are stale, and goes on)
				if datalen == 0 {
					return freeReq(kEFAULT)
				}
			}
			switch {
			case r.ahg && seqnum == 0: // user_sdma_txadd_ahg
				if !checkHeaderTemplate(HeaderSize - 4 + padLen(datalen)) {
					return freeReq(kEINVAL)
				}
				if e := txinit(uint16(HeaderSize + datalen)); e != 0 {
					return freeReq(e)
				}
			case r.ahg: // set_txreq_header_ahg: sdma_txinit_ahg's return is not looked at
				if txinit(uint16(datalen)) != 0 {
					r = kreqResult{ub: fmt.Sprintf("packet %d of %d bytes: set_txreq_header_ahg ignores sdma_txinit_ahg's error", seqnum, datalen)}
					return r
				}
			default: // sdma_txinit, then set_txreq_header (check_header_template on packet 0)
				if e := txinit(uint16(HeaderSize + datalen)); e != 0 {
					return freeReq(e)
				}
				if seqnum == 0 && !checkHeaderTemplate(HeaderSize-4+padLen(datalen)) {
					return freeReq(kEINVAL)
				}
			}
			// "req->sent += datalen; while (datalen) { hfi1_add_pages_to_sdma_packet(...) }":
			// the walk takes each vector to its end and goes on with the next, past data_iovs
			// when the packet asks for more than is left.
			if datalen > dataLen-sent {
				return kreqResult{ub: fmt.Sprintf("packet %d asks for %d bytes with %d left: the payload walk goes past the last vector", seqnum, datalen, dataLen-sent)}
			}
			sent += datalen
			r.lens = append(r.lens, int(datalen))
			seqnum++
			built++
		}
		// dosend: sdma_send_txlist takes the whole list (the ring has room here)
		r.batches = append(r.batches, built)
		seqsubmitted += built
	}
	// user_sdma_txreq_cb of the last packet, status OK: set_comp_state(COMPLETE)
	r.sent = int(sent)
	r.state = Complete
	return r
}

// portOnlyRefusal names the requests Submit refuses that the kernel sends, as the package doc
// lists them ("Submit also refuses what the kernel lets through"), or "". Each is told from the
// request and the kernel model alone, not from the code under test.
func portOnlyRefusal(pq *PktQ, info ReqInfo, hdr *Header, k kreqResult) string {
	switch {
	case info.Opcode() != Eager && info.Opcode() != Expected:
		return "an opcode other than EXPECTED and EAGER (the kernel sends it as EAGER)"
	case int(info.FragSize) > pq.mtu:
		return "a fragment size over the MTU"
	case k.state == Complete && (k.sent != k.dataLen || k.dataLen == 0 && info.NPkts != 1):
		// The kernel sends npkts packets: the data left over is not sent; with no data at all,
		// npkts header-only packets. (More packets than the data makes it ends ERROR EFAULT:
		// "Request has data but pkt len is 0".)
		return "an npkts that does not split the data"
	}
	return ""
}

// kreqCase is one generated request.
type kreqCase struct {
	name    string
	info    ReqInfo
	hdr     Header
	vecs    [][]byte
	stopped bool // sent to the queue whose engines are stopped
}

// TestKernelDiffRequests drives the kernel model of a whole request (kernelRequest) and Submit
// with the same requests, named boundary cases and seeded random ones (valid requests with one
// to three fields mutated: the completion index, the io vector count, the opcode and version
// bits of Ctrl, npkts, fragsize, the vectors (none, empty, tiny, up to 9), the template's LRH
// length, PBC length, opcode, VL, SC, SC4, LNH; AHG and extended PSNs on and off, the engine
// running or stopped), and compares every observable: whether and how the request is refused
// (the errno each refusal stands for), the slot's completion entry, and for a request both send,
// every packet on the wire (kernelEagerPackets), each packet's payload length, the packet count
// of each list handed to the engine and the AHG counters. Each difference the package doc lists
// is asserted as that difference: the kernel's checks after the claim (ending the slot ERROR)
// are refusals before it that change nothing; EXPECTED is ErrExpected; the packet-0 checks come
// before the engine check; an opcode other than EXPECTED and EAGER, a fragment size over the MTU
// and an npkts that does not split the data are refused; a template longer than the data (where
// the kernel's payload walk goes past the last vector) is refused, or padded for the one packet
// of data of a length that is not a multiple of 4. Anything else that differs fails.
func TestKernelDiffRequests(t *testing.T) {
	for _, ahg := range []bool{true, false} {
		for _, ext := range []bool{false, true} {
			t.Run(fmt.Sprintf("ahg=%v/extpsn=%v", ahg, ext), func(t *testing.T) {
				testKernelDiffRequests(t, ahg, ext)
			})
		}
	}
}

func testKernelDiffRequests(t *testing.T, ahg, ext bool) {
	const slots, vls, mtu = 32, 5, 8192
	sink := &recSink{}
	dev := testDevice(t, sdma.Config{Sink: sink, RingSize: 16384, Engines: 8})
	keepRate := ahg == ext // HFI1_CAP_STATIC_RATE_CTRL both ways, with and without AHG
	pq := testQueue(t, Config{Device: dev, Slots: slots, NumVLs: vls, MTU: mtu, DisableAHG: !ahg, ExtendedPSN: ext, DisableStaticRate: !keepRate})
	var batches []int
	testHooks(pq).onSend = func(n int) { batches = append(batches, n) }
	sdev := testDevice(t, sdma.Config{Manual: true, Engines: 8})
	for i := range sdev.NumEngines() {
		if err := sdev.Engine(i).Stop(); err != nil {
			t.Fatal(err)
		}
	}
	spq := testQueue(t, Config{Device: sdev, Slots: slots, NumVLs: vls, MTU: mtu, DisableAHG: !ahg, ExtendedPSN: ext})
	kcfg := kreqCfg{ringSize: slots, vlsOp: vls, ahg: ahg, running: true, pcount: MaxPktsPerQueue}

	backing := pattern(1<<20, 11)
	seed := uint64(0x6b64)
	if ahg {
		seed++
	}
	if ext {
		seed += 2
	}
	rng := rand.New(rand.NewPCG(seed, 23))
	cases := kreqTable(backing)
	n := 1500
	if testing.Short() {
		n = 300
	}
	for i := range n {
		cases = append(cases, kreqRandom(rng, backing, slots, vls, mtu, fmt.Sprintf("random %d", i)))
	}
	counts := map[string]int{}
	for _, c := range cases {
		q, kc := pq, kcfg
		if c.stopped {
			q, kc.running = spq, false
		}
		k := kernelRequest(kc, c.info, c.hdr, c.vecs)
		var kRun kreqResult
		if c.stopped {
			kRun = kernelRequest(kreqCfg{ringSize: slots, vlsOp: vls, ahg: ahg, running: true, pcount: MaxPktsPerQueue}, c.info, c.hdr, c.vecs)
		}
		slot := int(c.info.CompIdx)
		before := q.Comp(slot)
		st0 := q.Stats()
		sink.mu.Lock()
		sink.pkts, sink.segs = nil, nil
		sink.mu.Unlock()
		batches = batches[:0]
		err := q.Submit(context.Background(), c.info, &c.hdr, c.vecs...)
		if err == nil {
			if werr := waitSlot(t, q, slot); werr != nil {
				t.Fatalf("%s: accepted, then ended %v", c.name, werr)
			}
		}
		class := kreqCompare(t, q, c, k, kRun, err, before, st0, sink, batches, ext, keepRate)
		counts[class]++
	}
	t.Logf("classes: %v", counts)
	for _, want := range []string{"sent by both", "refused before the claim by both", "kernel ERROR after the claim, refused before it here", "stopped engine: ECOMM"} {
		if counts[want] == 0 {
			t.Errorf("no case of class %q: the generator lost its reach (%v)", want, counts)
		}
	}
}

// kreqCompare checks Submit's outcome (err, the slot, the packets) against the kernel model's k
// (kRun: the model with the engine running, for a request sent to the stopped engines) and
// returns the class of the pair.
func kreqCompare(t *testing.T, q *PktQ, c kreqCase, k, kRun kreqResult, err error, before CompEntry, st0 Stats, sink *recSink, batches []int, ext, keepRate bool) string {
	t.Helper()
	slot := int(c.info.CompIdx)
	after := q.Comp(slot)
	unchanged := func(what string) {
		t.Helper()
		var re *ReqError
		if !errors.As(err, &re) {
			t.Fatalf("%s: %s: Submit error %v is not a *ReqError", c.name, what, err)
		}
		if after != before {
			t.Fatalf("%s: %s: the slot went %+v -> %+v", c.name, what, before, after)
		}
		if st := q.Stats(); st.Requests != st0.Requests || st.Packets != st0.Packets {
			t.Fatalf("%s: %s: a refused request counted (%+v -> %+v)", c.name, what, st0, st)
		}
	}
	refused := func(sentinel error, what string) {
		t.Helper()
		if !errors.Is(err, sentinel) {
			t.Fatalf("%s: the kernel: %s; Submit: %v, want %v\ninfo %+v\nhdr %x\nvecs %d bytes in %d", c.name, what, err, sentinel, c.info, c.hdr[:], kreqDataLen(c.vecs), len(c.vecs))
		}
		unchanged(what)
	}
	switch {
	case !k.claimed && k.ub == "":
		refused(ErrInvalid, fmt.Sprintf("errno %d before the claim", k.ret))
		return "refused before the claim by both"
	case k.expected:
		// Documented: EXPECTED requests are refused with ErrExpected (the kernel's TID path).
		refused(ErrExpected, "EXPECTED")
		return "EXPECTED"
	case k.ub != "":
		// Documented: a template asking for more than the data is refused; one asking for the
		// data's padding to a dword is sent padded.
		n := kreqDataLen(c.vecs)
		tfirst := int(binary.BigEndian.Uint16(c.hdr[12:]))<<2 - (HeaderSize - 4) // compute_data_length
		pad := c.info.NPkts == 1 && n >= 4 && tfirst > n && tfirst == padLen(n) && portOnlyRefusal(q, c.info, &c.hdr, k) == ""
		if err != nil {
			if pad {
				t.Fatalf("%s: one packet whose template asks for the %d bytes of data padded to %d: Submit %v; the package doc says it is sent padded", c.name, n, tfirst, err)
			}
			refused(ErrInvalid, "undefined: "+k.ub)
			return "kernel undefined, refused here"
		}
		if !pad {
			t.Fatalf("%s: the kernel's behaviour is undefined (%s) and the template asks for more than the data's padding; Submit sent it", c.name, k.ub)
		}
		kreqCheckPadded(t, c, sink, after, keepRate)
		return "kernel undefined, padded here"
	case k.ret == kECOMM:
		if err == nil || !errors.Is(err, ErrNotRunning) {
			// Documented: the packet-0 checks, and the refusals of what the kernel sends, come
			// before the engine check here.
			if kRun.ret == 0 && kRun.ub == "" && portOnlyRefusal(q, c.info, &c.hdr, kRun) == "" {
				t.Fatalf("%s: the kernel ends it ECOMM and would send it on a running engine; Submit: %v", c.name, err)
			}
			refused(ErrInvalid, "ECOMM, and refused on a running engine")
			return "stopped engine: refused before the engine check"
		}
		if want := (CompEntry{Status: Error, Errcode: ECOMM}); after != want {
			t.Fatalf("%s: engine stopped: slot %+v, want %+v", c.name, after, want)
		}
		return "stopped engine: ECOMM"
	case k.ret != 0:
		// Documented: the kernel's checks after the claim (ERROR with the errno, nothing sent or
		// some packets sent before the data ran out) are refusals before it here.
		refused(ErrInvalid, fmt.Sprintf("ERROR errno %d after %d packets", k.ret, len(k.lens)))
		if len(k.lens) > 0 {
			return "kernel ERROR after sending, refused here"
		}
		return "kernel ERROR after the claim, refused before it here"
	}
	if why := portOnlyRefusal(q, c.info, &c.hdr, k); why != "" {
		refused(ErrInvalid, "sent; refused here: "+why)
		return "kernel sends, refused here (documented)"
	}
	if err != nil {
		t.Fatalf("%s: the kernel sends it (%d packets); Submit: %v\ninfo %+v\nhdr %x\nvecs %d bytes in %d", c.name, len(k.lens), err, c.info, c.hdr[:], k.dataLen, len(c.vecs))
	}
	if after != (CompEntry{Status: Complete}) {
		t.Fatalf("%s: slot %+v, want COMPLETE", c.name, after)
	}
	var data []byte
	for _, v := range c.vecs {
		data = append(data, v...)
	}
	npkts := int(c.info.NPkts)
	want := kernelEagerPackets(c.hdr, data, int(c.info.FragSize), npkts, k.ahg, ext, keepRate)
	got, _ := sink.packets()
	if len(got) != len(want) || len(got) != len(k.lens) {
		t.Fatalf("%s: %d packets on the wire, kernel %d (%d lengths)", c.name, len(got), len(want), len(k.lens))
	}
	for i := range want {
		if string(got[i]) != string(want[i]) {
			t.Fatalf("%s: packet %d of %d:\n got %x\nwant %x", c.name, i, npkts, got[i][:HeaderSize], want[i][:HeaderSize])
		}
		if l := len(got[i]) - HeaderSize; l != (k.lens[i]+3)&^3 {
			t.Fatalf("%s: packet %d carries %d bytes, the kernel's compute_data_length %d", c.name, i, l, k.lens[i])
		}
	}
	if fmt.Sprint(batches) != fmt.Sprint(k.batches) {
		t.Fatalf("%s: lists handed to the engine %v, the kernel's (maxpkts %d) %v", c.name, batches, MaxPktsPerQueue, k.batches)
	}
	st := q.Stats()
	wantAHG := uint64(0)
	if k.ahg {
		wantAHG = uint64(npkts - 1)
	}
	if d := st.Packets - st0.Packets; d != uint64(npkts) || st.AHGPackets-st0.AHGPackets != wantAHG || st.FullHeaders-st0.FullHeaders != uint64(npkts)-wantAHG || st.AHGFallbacks != st0.AHGFallbacks {
		t.Fatalf("%s: stats %+v -> %+v for %d packets, AHG %v", c.name, st0, st, npkts, k.ahg)
	}
	return "sent by both"
}

// kreqCheckPadded checks the one packet Submit sent for a request whose template asks for the
// data padded to a dword (the kernel's walk would go past the vectors): the template's header,
// its lengths for the padded data, and the data with zero padding.
func kreqCheckPadded(t *testing.T, c kreqCase, sink *recSink, after CompEntry, keepRate bool) {
	t.Helper()
	if after != (CompEntry{Status: Complete}) || c.info.NPkts != 1 {
		t.Fatalf("%s: padded: slot %+v, npkts %d", c.name, after, c.info.NPkts)
	}
	var data []byte
	for _, v := range c.vecs {
		data = append(data, v...)
	}
	got, _ := sink.packets()
	want := c.hdr
	if !keepRate {
		binary.LittleEndian.PutUint16(want[4:], 0)
	}
	lrh := int(binary.BigEndian.Uint16(want[12:])) << 2
	if lrh-lrhToICRC != padLen(len(data)) {
		t.Fatalf("%s: padded: template LRH %d for %d bytes", c.name, lrh, len(data))
	}
	if p := binary.LittleEndian.Uint16(want[0:]); pbcToLRH(p) != lrh {
		binary.LittleEndian.PutUint16(want[0:], p&0xf000|lrhToPBC(lrh))
	}
	w := append(append(want[:], data...), make([]byte, padLen(len(data))-len(data))...)
	if len(got) != 1 || string(got[0]) != string(w) {
		t.Fatalf("%s: padded: %d packets, got %x, want %x", c.name, len(got), got, w)
	}
}

func kreqDataLen(vecs [][]byte) int {
	n := 0
	for _, v := range vecs {
		n += len(v)
	}
	return n
}

// kreqValid returns a valid request: vecs cut from backing, in fragments of frag after a first
// packet of first bytes (0: min(data, frag)), on slot.
func kreqValid(t Template, slot, frag, first int, vecs [][]byte) (ReqInfo, Header) {
	n := kreqDataLen(vecs)
	if first == 0 || first > n {
		first = min(n, frag)
	}
	npkts := 1
	if rest := n - first; rest > 0 && n >= 4 {
		npkts += (rest + frag - 1) / frag
	}
	info := ReqInfo{Ctrl: Ctrl(Eager, len(vecs)), NPkts: uint16(npkts), FragSize: uint16(frag), CompIdx: uint16(slot)}
	return info, t.header(first)
}

// kreqTable is the named boundary cases: each class of check, the lengths at their edges, PSNs
// and offsets at their wraps.
func kreqTable(backing []byte) []kreqCase {
	tp := testTemplate
	v := func(off, n int) []byte { return backing[off : off+n] }
	var cs []kreqCase
	add := func(name string, info ReqInfo, hdr Header, stopped bool, vecs ...[]byte) {
		cs = append(cs, kreqCase{name: name, info: info, hdr: hdr, vecs: vecs, stopped: stopped})
	}
	good := func(frag, first int, vecs ...[]byte) (ReqInfo, Header) { return kreqValid(tp, 3, frag, first, vecs) }

	i, h := good(4096, 0, v(100, 10000))
	add("valid 3 packets", i, h, false, v(100, 10000))
	add("valid, engine stopped", i, h, true, v(100, 10000))
	add("comp idx out of range", with(i, func(i *ReqInfo) { i.CompIdx = 32 }), h, false, v(100, 10000))
	add("iovcnt over dim", with(i, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, 2) }), h, false, v(100, 10000))
	add("iovcnt 0", with(i, func(i *ReqInfo) { i.Ctrl = 0 }), h, false, v(100, 10000))
	add("fragsize 0", with(i, func(i *ReqInfo) { i.FragSize = 0 }), h, false, v(100, 10000))
	add("fragsize 0, engine stopped", with(i, func(i *ReqInfo) { i.FragSize = 0 }), h, true, v(100, 10000))
	add("expected, 1 vector", with(i, func(i *ReqInfo) { i.Ctrl = Ctrl(Expected, 1) }), h, false, v(100, 10000))
	add("expected, 3 vectors", with(i, func(i *ReqInfo) { i.Ctrl = Ctrl(Expected, 3) }), h, false, v(100, 4000), v(5000, 3000), v(9000, 3000))
	add("opcode 2", with(i, func(i *ReqInfo) { i.Ctrl = 2<<4 | i.Ctrl&0xff0f }), h, false, v(100, 10000))
	add("opcode 15, engine stopped", with(i, func(i *ReqInfo) { i.Ctrl = 15<<4 | i.Ctrl&0xff0f }), h, true, v(100, 10000))
	add("version bits", with(i, func(i *ReqInfo) { i.Ctrl |= 0xf }), h, false, v(100, 10000))
	add("npkts 0", with(i, func(i *ReqInfo) { i.NPkts = 0 }), h, false, v(100, 10000))
	add("npkts one short", with(i, func(i *ReqInfo) { i.NPkts = 2 }), h, false, v(100, 10000))
	add("npkts one short, engine stopped", with(i, func(i *ReqInfo) { i.NPkts = 2 }), h, true, v(100, 10000))
	add("npkts one over", with(i, func(i *ReqInfo) { i.NPkts = 4 }), h, false, v(100, 10000))
	add("fragsize 4000", with(i, func(i *ReqInfo) { i.FragSize = 4000 }), h, false, v(100, 10000))
	add("fragsize 4000, engine stopped", with(i, func(i *ReqInfo) { i.FragSize = 4000 }), h, true, v(100, 10000))
	add("fragsize over the MTU", with(i, func(i *ReqInfo) { i.FragSize = 8256; i.NPkts = 2 }), tp.header(8256), false, v(100, 10000))
	add("verbs opcode", i, withH(h, func(h *Header) { h.setBTH(0, 0x04<<24) }), false, v(100, 10000))
	add("VL 5 (vls_operational)", i, withH(h, func(h *Header) { h.setPBC(0, 5<<12|h.pbc(0)&0xfff); h.setLRH(0, 5<<12|2) }), false, v(100, 10000))
	add("VL 4", i, withH(h, func(h *Header) { h.setPBC(0, 4<<12|h.pbc(0)&0xfff); h.setLRH(0, 4<<12|2) }), false, v(100, 10000))
	add("SC4", i, withH(h, func(h *Header) { h.setPBC(1, 1<<14) }), false, v(100, 10000))
	add("GRH", i, withH(h, func(h *Header) { h.setLRH(0, 3) }), false, v(100, 10000))
	add("LNH 0", i, withH(h, func(h *Header) { h.setLRH(0, 0) }), false, v(100, 10000))
	add("empty vector", with(i, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, 2) }), h, false, v(100, 10000), nil)
	add("empty vector first", with(i, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, 2) }), h, false, nil, v(100, 10000))
	add("9 vectors", with(i, func(i *ReqInfo) { i.Ctrl = Ctrl(Eager, 9) }), h, false, make9(backing)...)
	add("template too long", i, withH(h, func(h *Header) { h.setLRH(2, uint16(lrhLen(4160)/4)) }), false, v(100, 10000))
	add("template too long, engine stopped", i, withH(h, func(h *Header) { h.setLRH(2, uint16(lrhLen(4160)/4)) }), true, v(100, 10000))
	add("template no payload", i, withH(h, func(h *Header) { h.setLRH(2, 15) }), false, v(100, 10000))
	add("template LRH 56", i, withH(h, func(h *Header) { h.setLRH(2, 14) }), false, v(100, 10000))
	add("template LRH 0", i, withH(h, func(h *Header) { h.setLRH(2, 0) }), false, v(100, 10000))
	add("template reserved LRH bits", i, withH(h, func(h *Header) { h.setLRH(2, h.lrh(2)|0x8000) }), false, v(100, 10000))
	add("template PBC disagrees", i, withH(h, func(h *Header) { h.setPBC(0, h.pbc(0)&0xf000|100) }), false, v(100, 10000))
	add("template PBC a fragment's", i, withH(h, func(h *Header) { h.setPBC(0, h.pbc(0)&0xf000|lrhToPBC(lrhLen(4096))) }), false, v(100, 10000))
	i2, h2 := good(4096, 1000, v(100, 10000))
	add("short first packet", i2, h2, false, v(100, 10000))
	add("short first packet, wrong npkts", with(i2, func(i *ReqInfo) { i.NPkts = 3 }), h2, false, v(100, 10000))
	for n := 1; n <= 9; n++ {
		i, h := good(64, 0, v(4090, n))
		add(fmt.Sprintf("%d bytes", n), i, h, false, v(4090, n))
		add(fmt.Sprintf("%d bytes, template 4 more", n), i, tp.header(padLen(n)+4), false, v(4090, n))
		add(fmt.Sprintf("%d bytes, template padded", n), i, tp.header(padLen(n)), false, v(4090, n))
		add(fmt.Sprintf("%d bytes, template 0", n), i, tp.header(0), false, v(4090, n))
		add(fmt.Sprintf("%d bytes, npkts 2", n), with(i, func(i *ReqInfo) { i.NPkts = 2 }), h, false, v(4090, n))
	}
	i0 := ReqInfo{Ctrl: Ctrl(Eager, 0), NPkts: 1, FragSize: 64, CompIdx: 4}
	add("no data", i0, tp.header(0), false)
	add("no data, template 100", i0, tp.header(100), false)
	add("no data, npkts 3", with(i0, func(i *ReqInfo) { i.NPkts = 3 }), tp.header(0), false)
	// PSNs and offsets at their wraps, 24 and 31 bits, BTH.A in the template.
	for _, psn := range []uint32{0xfffffd, 0xffffff, 0x7ffffffd, 0x7fffffff, 0} {
		for _, off := range []uint32{0xffffff00, 0xfffffffc} {
			t2 := tp
			t2.PSN, t2.Offset = psn, off
			i, h := kreqValid(t2, 5, 64, 0, [][]byte{v(3000, 300)})
			add(fmt.Sprintf("psn %#x offset %#x", psn, off), i, h, false, v(3000, 300))
			add(fmt.Sprintf("psn %#x offset %#x, BTH.A", psn, off), i, withH(h, func(h *Header) { h.setBTH(2, h.bth(2)|bthAckReq) }), false, v(3000, 300))
		}
	}
	// Vectors ending inside a packet and at odd page offsets; 8 vectors.
	vs := [][]byte{v(4000, 100), v(8190, 7), v(12288, 4096), v(20000, 1), v(30001, 5000), v(40000, 64), v(50000, 63), v(60000, 129)}
	i3, h3 := kreqValid(tp, 6, 128, 0, vs)
	add("8 vectors", i3, h3, false, vs...)
	i4, h4 := kreqValid(tp, 7, 64, 0, [][]byte{v(0, 64*40)})
	add("40 packets", i4, h4, false, v(0, 64*40))
	return cs
}

// kreqRandom is a valid random request with up to three of its fields mutated.
func kreqRandom(rng *rand.Rand, backing []byte, slots, vls, mtu int, name string) kreqCase {
	tm := Template{VL: uint8(rng.IntN(vls)), DLID: uint16(rng.Uint32()), SLID: uint16(rng.Uint32()),
		Opcode: 0xc0 | uint8(rng.IntN(64)), PKey: uint16(rng.Uint32()), DestQP: rng.Uint32(),
		PSN: rng.Uint32(), JKey: uint16(rng.Uint32()), Offset: rng.Uint32()}
	if rng.IntN(3) == 0 {
		tm.PSN = 0xffffff - uint32(rng.IntN(4))
		if rng.IntN(2) == 0 {
			tm.PSN = 0x7fffffff - uint32(rng.IntN(4))
		}
	}
	frag := 64 * (1 + rng.IntN(min(mtu/64, 40)))
	nv := rng.IntN(MaxVectorsPerReq + 1)
	if nv == 0 && rng.IntN(2) == 0 {
		nv = 1
	}
	vecs := make([][]byte, nv)
	for i := range vecs {
		l := 1 + rng.IntN(3*frag)
		if rng.IntN(6) == 0 {
			l = 1 + rng.IntN(5)
		}
		o := rng.IntN(len(backing) - l)
		vecs[i] = backing[o : o+l]
	}
	n := kreqDataLen(vecs)
	first := 0
	if n >= 8 && rng.IntN(3) == 0 {
		first = 4 * (1 + rng.IntN(min(n, frag)/4))
	}
	info, hdr := kreqValid(tm, rng.IntN(slots), frag, first, vecs)
	c := kreqCase{name: name, info: info, hdr: hdr, vecs: vecs, stopped: rng.IntN(8) == 0}
	for range rng.IntN(4) {
		kreqMutate(rng, &c, backing, slots, mtu)
	}
	return c
}

// kreqMutate changes one field of c.
func kreqMutate(rng *rand.Rand, c *kreqCase, backing []byte, slots, mtu int) {
	h := &c.hdr
	switch rng.IntN(16) {
	case 0:
		c.info.CompIdx = uint16(slots + rng.IntN(3))
	case 1: // io vector count over dim, or 0
		c.info.Ctrl = c.info.Ctrl&0xff | uint16(len(c.vecs)+2+rng.IntN(3))<<8
		if rng.IntN(3) == 0 {
			c.info.Ctrl &= 0xff
		}
	case 2: // opcode (EXPECTED, unknown) and version bits
		c.info.Ctrl = c.info.Ctrl&^0xff | uint16(rng.IntN(16))<<4 | uint16(rng.IntN(16))
	case 3:
		if d := []int{0, -2, -1, 1, 2}[rng.IntN(5)]; d == 0 {
			c.info.NPkts = 0
		} else {
			c.info.NPkts = uint16(max(1, int(c.info.NPkts)+d))
		}
	case 4:
		switch rng.IntN(4) {
		case 0:
			c.info.FragSize = 0
		case 1:
			c.info.FragSize = uint16(1 + rng.IntN(mtu))
		case 2:
			c.info.FragSize = uint16(64 * (1 + rng.IntN(1023)))
		default:
			c.info.FragSize = uint16(64 * (1 + rng.IntN(mtu/64)))
		}
	case 5: // vectors: one empty, one more, one fewer, 9
		switch rng.IntN(4) {
		case 0:
			if len(c.vecs) > 0 {
				c.vecs[rng.IntN(len(c.vecs))] = nil
			}
		case 1:
			o := rng.IntN(len(backing) - 100)
			c.vecs = append(c.vecs, backing[o:o+1+rng.IntN(99)])
			c.info.Ctrl = c.info.Ctrl&0xff | uint16(len(c.vecs)+1)<<8
		case 2:
			if len(c.vecs) > 0 {
				c.vecs = c.vecs[:len(c.vecs)-1]
				c.info.Ctrl = c.info.Ctrl&0xff | uint16(len(c.vecs)+1)<<8
			}
		default:
			c.vecs = make9(backing)
			c.info.Ctrl = c.info.Ctrl&0xff | 10<<8
		}
	case 6, 7: // the template's first length
		n := kreqDataLen(c.vecs)
		var l int
		switch rng.IntN(7) {
		case 0:
			l = 60 + 4*rng.IntN(3) // no payload, 4, 8
		case 1:
			l = 4 * rng.IntN(15) // under the header
		case 2:
			l = lrhLen(padLen(n))
		case 3:
			l = lrhLen(padLen(n) + 4*(1+rng.IntN(3)))
		case 4:
			l = lrhLen(int(c.info.FragSize) + 4*(1+rng.IntN(3)))
		case 5:
			l = int(rng.Uint32()&0xffff) << 2
		default:
			l = lrhLen(4 * rng.IntN(int(c.info.FragSize)/4+1))
		}
		h.setLRH(2, uint16(l>>2))
		if rng.IntN(2) == 0 {
			h.setPBC(0, h.pbc(0)&0xf000|lrhToPBC(l))
		}
	case 8: // PBC length of its own
		h.setPBC(0, h.pbc(0)&0xf000|uint16(rng.IntN(0x1000)))
	case 9:
		h.setBTH(0, h.bth(0)&0xffffff|uint32(rng.IntN(256))<<24)
	case 10: // VL (PBC) and SC (LRH) together, or apart
		vl := uint16(rng.IntN(16))
		h.setPBC(0, vl<<12|h.pbc(0)&0xfff)
		if rng.IntN(3) != 0 {
			h.setLRH(0, vl<<12|h.lrh(0)&0xfff)
		}
	case 11:
		h.setPBC(1, h.pbc(1)^1<<14) // SC4
	case 12:
		h.setLRH(0, h.lrh(0)&^3|uint16(rng.IntN(4))) // LNH
	case 13: // garbage in pbc[1..3] (SC4 kept) and BTH.A
		h.setPBC(1, uint16(rng.Uint32())&^(1<<14)|h.pbc(1)&(1<<14))
		h.setPBC(2, uint16(rng.Uint32()))
		h.setPBC(3, uint16(rng.Uint32()))
		h.setBTH(2, h.bth(2)|bthAckReq)
	case 14:
		c.stopped = !c.stopped
	default: // tiny data: one vector of 1..3 bytes
		o := rng.IntN(len(backing) - 4)
		c.vecs = [][]byte{backing[o : o+1+rng.IntN(3)]}
		c.info.Ctrl = c.info.Ctrl&0xff | 2<<8
	}
}

// kreqPass is one list a Submit handed to the engine: its length and the packets the queue had
// handed over before it (Stats.Packets when it was handed: the engine's takes before it).
type kreqPass struct{ n, before int }

// TestKernelDiffRequestPasses: user_sdma_send_pkts' rules for a request larger than the ring holds.
// Each call builds maxpkts new packets (at most the packets not built yet) after the ones a full
// ring left on req->txps, and hands the whole list to sdma_send_txlist, which takes what fits; the
// rest wait at the head of the list for the next call, after the queue was DEFERRED and woken. A
// Manual engine with a 64-descriptor ring is driven only while the queue is parked, so each list's
// length and what the engine took of it are deterministic; they are replayed against the kernel's
// rule (leftover + min(maxpkts, unbuilt), with maxpkts MAX_PKTS_PER_QUEUE, as the package doc
// says), and every packet is on the wire once, in PSN order. Some requests are long enough that a
// pass after a partial take has leftovers and more than MAX_PKTS_PER_QUEUE less them still to build
// (checked: only there does the rule differ from building maxpkts less the leftovers). The last
// case of each run stops the engine while the queue is parked: the sw clean completes the ring's
// packets aborted before it wakes the queue, so the next call sees has_error and the slot ends
// ERROR EFAULT (free_req with seqsubmitted < npkts); had the queue sent again first, the list would
// go to the flush list (-ECOMM, counted as submitted): ERROR ECOMM if packets were left unbuilt,
// else the aborted packets' errcode.
func TestKernelDiffRequestPasses(t *testing.T) {
	for _, ahg := range []bool{true, false} {
		t.Run(fmt.Sprintf("ahg=%v", ahg), func(t *testing.T) {
			sink := &recSink{}
			dev := testDevice(t, sdma.Config{Manual: true, RingSize: 64, Sink: sink})
			eng := dev.Engine(0)
			pq := testQueue(t, Config{Device: dev, Slots: 4, DisableAHG: !ahg, Timeout: time.Hour})
			var passes []kreqPass
			testHooks(pq).onSend = func(n int) {
				passes = append(passes, kreqPass{n: n, before: int(pq.Stats().Packets)})
			}
			rng := rand.New(rand.NewPCG(0x7061, map[bool]uint64{true: 1}[ahg]))
			backing := pattern(1<<20, 13)
			cases := 40
			if testing.Short() {
				cases = 12
			}
			leftovers := 0 // passes that handed over packets a full ring had left on the list
			// passes with packets left and more than MaxPktsPerQueue less those unbuilt: the only
			// ones where the kernel's leftover + min(maxpkts, unbuilt) differs from building
			// maxpkts less the leftovers
			beyond := 0
			for c := range cases {
				stop := c == cases-1
				frag := 64 * (1 + rng.IntN(8))
				nv := 1 + rng.IntN(MaxVectorsPerReq)
				// Up to 40 packets; every third request up to 100, so that a pass after a
				// partial take still has more than MaxPktsPerQueue less the leftovers to build.
				span := 40
				if c%3 == 1 {
					span = 100
				}
				vecs := make([][]byte, nv)
				for i := range vecs {
					l := 1 + rng.IntN(span*frag/nv)
					o := rng.IntN(len(backing) - l)
					vecs[i] = backing[o : o+l]
				}
				if stop { // enough packets to park twice
					frag, vecs = 64, [][]byte{backing[100 : 100+64*80]}
				}
				tm := testTemplate
				tm.PSN = 0xffffff - uint32(rng.IntN(64))
				info, hdr := kreqValid(tm, c%4, frag, 0, vecs)
				npkts := int(info.NPkts)
				sink.mu.Lock()
				sink.pkts, sink.segs = nil, nil
				sink.mu.Unlock()
				passes = passes[:0]
				p0 := int(pq.Stats().Packets)
				stopAt := -1 // the pass count when the engine was stopped
				errc := make(chan error, 1)
				go func() { errc <- pq.Submit(context.Background(), info, &hdr, vecs...) }()
				var err error
				deadline := time.Now().Add(20 * time.Second)
			drive:
				for {
					select {
					case err = <-errc:
						break drive
					default:
					}
					if time.Now().After(deadline) {
						t.Fatalf("case %d: Submit of %d packets did not return in 20 s (state %v, passes %v)", c, npkts, pq.State(), passes)
					}
					if pq.State() != Deferred {
						time.Sleep(50 * time.Microsecond)
						continue
					}
					if stop && len(passes) >= 2 && stopAt < 0 {
						stopAt = len(passes)
						if err := eng.Stop(); err != nil {
							t.Fatal(err)
						}
						continue
					}
					if _, err := eng.Process(); err != nil {
						t.Fatal(err)
					}
				}
				// Whatever the ring holds completes (or, stopped, the flush list aborts).
				if _, perr := eng.Process(); perr != nil && !errors.Is(perr, sdma.ErrNotRunning) {
					t.Fatal(perr)
				}
				werr := waitSlot(t, pq, int(info.CompIdx))
				// Replay the kernel's rule over the passes seen.
				taken := int(pq.Stats().Packets) - p0
				unbuilt, left := npkts, 0
				for i, p := range passes {
					built := min(MaxPktsPerQueue, unbuilt)
					if left > 0 && unbuilt > MaxPktsPerQueue-left {
						beyond++
					}
					if p.n != left+built {
						t.Fatalf("case %d (%d packets): pass %d hands %d packets, the kernel %d (%d left on txps + %d built); passes %v", c, npkts, i, p.n, left+built, left, built, passes)
					}
					unbuilt -= built
					if left > 0 {
						leftovers++
					}
					took := taken - (p.before - p0)
					if i+1 < len(passes) {
						took = passes[i+1].before - p.before
					}
					left = p.n - took
				}
				if stopAt < 0 {
					if err != nil || werr != nil || unbuilt != 0 || left != 0 || taken != npkts {
						t.Fatalf("case %d: Submit %v, end %v; %d unbuilt, %d left, %d of %d taken", c, err, werr, unbuilt, left, taken, npkts)
					}
					if stop {
						t.Fatalf("case %d: the queue never parked after 2 passes: the engine was not stopped (%v)", c, passes)
					}
					pkts, _ := sink.packets()
					if len(pkts) != npkts {
						t.Fatalf("case %d: %d packets on the wire, want %d", c, len(pkts), npkts)
					}
					for k, p := range pkts {
						var h Header
						copy(h[:], p)
						if h.PSN() != (tm.PSN+uint32(k))&psnMask {
							t.Fatalf("case %d: packet %d on the wire has PSN %#x", c, k, h.PSN())
						}
					}
					continue
				}
				want := CompEntry{Status: Error, Errcode: EFAULT} // has_error seen: -EFAULT
				if len(passes) > stopAt {
					want.Errcode = ECOMM // sent again into the stopped engine: flushed, -ECOMM
					if unbuilt == 0 {
						want.Errcode = ErrcodeAborted // all counted submitted: the completions decide
					}
				}
				if err == nil || werr == nil || pq.Comp(int(info.CompIdx)) != want {
					t.Fatalf("case %d: stopped after %d passes (%d in all, %d unbuilt): Submit %v, end %v, slot %+v, want %+v", c, stopAt, len(passes), unbuilt, err, werr, pq.Comp(int(info.CompIdx)), want)
				}
				t.Logf("stopped after %d passes, %d in all: %+v", stopAt, len(passes), want)
			}
			if leftovers == 0 {
				t.Fatalf("no pass handed over packets left by a full ring: the ring never filled")
			}
			if beyond == 0 {
				t.Fatalf("no pass had packets left by a full ring and more than %d less those still to build: the kernel's rule was not told from building maxpkts less the leftovers", MaxPktsPerQueue)
			}
		})
	}
}
