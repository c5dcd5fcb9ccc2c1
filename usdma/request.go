package usdma

// Opcode is a request's opcode (hfi1: enum sdma_req_opcode).
type Opcode uint8

const (
	Expected Opcode = 0 // EXPECTED: TID (receive-side expected buffer) packets; refused, see ErrExpected
	Eager    Opcode = 1 // EAGER: packets into the receiver's eager buffers
)

// Request limits (hfi1: user_sdma.h and the uapi).
const (
	MaxVectorsPerReq = 8     // MAX_VECTORS_PER_REQ: data vectors per request
	MaxPktsPerQueue  = 16    // MAX_PKTS_PER_QUEUE: packets built per request pass before sending them
	DefaultSlots     = 128   // hfi1_sdma_comp_ring_size: request slots and completion entries
	DefaultMTU       = 10240 // HFI1_DEFAULT_MAX_MTU: the largest fragment size
	PIOBlockSize     = 64    // PIO_BLOCK_SIZE: a fragment size is a multiple of it
	MaxSDMAPktSize   = 16383 // MAX_SDMA_PKT_SIZE: header and fragment together
)

// Bit layout of ReqInfo.Ctrl (HFI1_SDMA_REQ_*).
const (
	reqVersionShift = 0
	reqVersionMask  = 0xf
	reqOpcodeShift  = 4
	reqOpcodeMask   = 0xf
	reqIOVCntShift  = 8
	reqIOVCntMask   = 0xff
)

// ReqInfo is the request descriptor PSM writes before the header (hfi1: struct sdma_req_info).
type ReqInfo struct {
	// Ctrl holds the version (bits 3:0, unused), the opcode (7:4) and the io vector count
	// (15:8), which counts the header vector too: 1 + the number of data vectors. Use Ctrl().
	Ctrl uint16
	// NPkts is the number of packets the data is split into, computed by the caller.
	NPkts uint16
	// FragSize is the payload of every packet but the first (whose length is in the header
	// template) and the last.
	FragSize uint16
	// CompIdx is the request slot, and the completion ring entry that reports on it.
	CompIdx uint16

	// bad is Message's refusal of an argument these 16-bit fields cannot hold (matching
	// ErrInvalid), nil otherwise. Set by Message only; Submit returns it first. A pointer, not
	// an error: ReqInfo is passed by value on every Submit.
	bad *ReqError
}

// Ctrl encodes ReqInfo.Ctrl for op and data vectors (iovcnt = 1 + dataVecs).
//
// Values the fields cannot hold are not truncated into another request (as Message does not
// truncate): an op above 15 is encoded as opcode 15 and a dataVecs outside 0..254 as an io
// vector count of 0, which Submit refuses with ErrInvalid (Ctrl(17, 1) would otherwise be an
// Eager request, and 256 data vectors none).
func Ctrl(op Opcode, dataVecs int) uint16 {
	if op > reqOpcodeMask {
		op = reqOpcodeMask // not a request opcode: Submit says "unknown opcode 15"
	}
	if dataVecs < 0 || dataVecs >= reqIOVCntMask {
		dataVecs = -1 // io vector count 0: Submit refuses it
	}
	return uint16(op)<<reqOpcodeShift | uint16(dataVecs+1)<<reqIOVCntShift
}

// Opcode returns the opcode bits of Ctrl (req_opcode).
func (i ReqInfo) Opcode() Opcode { return Opcode(i.Ctrl >> reqOpcodeShift & reqOpcodeMask) }

// IOVCnt returns the io vector count of Ctrl, header vector included (req_iovcnt).
func (i ReqInfo) IOVCnt() int { return int(i.Ctrl >> reqIOVCntShift & reqIOVCntMask) }

// Message returns the request info and header template for sending data (the concatenation
// of vecs) as one eager message on slot: fragSize bytes per packet, the first packet's length
// in the header, the packet count computed. It is what PSM computes before its writev.
//
// ReqInfo's fields are 16 bits, as the uapi's: a slot outside 0..65535, a fragSize outside
// 0..65535 or data that makes more than 65535 packets is not truncated into another request
// (slot 65538 would be slot 2), but makes a ReqInfo that Submit refuses before anything else
// with a *ReqError matching ErrInvalid that names the value; its out-of-range field is 0.
// Values that fit are left to Submit's checks (fragSize 0, one over the MTU, ...).
func Message(slot, fragSize int, t Template, vecs ...[]byte) (ReqInfo, Header) {
	n := 0
	for _, v := range vecs {
		n += len(v)
	}
	npkts := 1
	if n > fragSize && fragSize > 0 {
		npkts = (n + fragSize - 1) / fragSize
	}
	first := n
	if fragSize > 0 {
		first = min(n, fragSize)
	}
	info := ReqInfo{Ctrl: Ctrl(Eager, len(vecs))}
	const max16 = 1<<16 - 1
	var bad string
	switch {
	case slot < 0 || slot > max16:
		bad = "slot " + itoa(slot) + " out of 0.." + itoa(max16) + " (CompIdx is 16 bits)"
	case fragSize < 0 || fragSize > max16:
		bad = "fragsize " + itoa(fragSize) + " out of 0.." + itoa(max16) + " (FragSize is 16 bits)"
	case npkts > max16:
		bad = itoa(n) + " bytes in fragments of " + itoa(fragSize) + " make " + itoa(npkts) + " packets, over " + itoa(max16) + " (NPkts is 16 bits)"
	}
	if bad != "" {
		info.bad = &ReqError{Slot: slot, Reason: "Message: " + bad, Err: ErrInvalid}
	}
	if slot >= 0 && slot <= max16 {
		info.CompIdx = uint16(slot)
	}
	if fragSize >= 0 && fragSize <= max16 {
		info.FragSize = uint16(fragSize)
	}
	if npkts <= max16 {
		info.NPkts = uint16(npkts)
	}
	return info, t.header(first)
}

// firstLen is the payload of packet 0: the header template's LRH length less the header and
// the ICRC, or all the data when there is less than a dword (hfi1: compute_data_length for
// seqnum 0). Unlike the kernel, a template longer than the data by its padding to a dword is
// clamped to the data, so that a one-packet message of a length that is not a multiple of 4 goes
// out padded (the kernel's payload walk would go past the last vector); validateData refuses a
// template longer than that.
func firstLen(hdr *Header, dataLen int) int {
	if dataLen < 4 {
		return dataLen
	}
	return max(0, min(templateLRH(hdr)-lrhToICRC, dataLen))
}

// templateLRH is the first packet's LRH length in bytes as compute_data_length reads it: all 16
// bits of lrh[2] (be16_to_cpu(req->hdr.lrh[2]) << 2), the reserved bits 15:12 included, so
// that a template with one of them set asks for more than a fragment and is refused.
func templateLRH(hdr *Header) int { return int(hdr.lrh(2)) << 2 }

// validateClaim runs the checks hfi1_user_sdma_process_request makes before it claims the slot
// (test_and_set_bit on req_in_use, -EBADSLT): the completion index, the io vector count (0, or
// over the vectors given: the kernel's req_iovcnt < 1 or > dim; and below them, which the kernel
// takes, the rest of the writev being its next request: see Submit) and a zero fragsize. (Submit
// returns Message's refusal of a value its 16-bit fields cannot hold before these.)
func (pq *PktQ) validateClaim(info *ReqInfo, hdr *Header, nvecs int) error {
	slot := int(info.CompIdx)
	fail := func(reason string) error { return reqErr(slot, ErrInvalid, reason) }
	switch {
	case hdr == nil:
		return fail("nil header template")
	case slot >= len(pq.comps):
		if len(pq.comps) == 0 {
			return errZeroPktQ("Submit")
		}
		return fail("completion index " + itoa(slot) + " out of 0.." + itoa(len(pq.comps)-1))
	case info.IOVCnt() < 1:
		return fail("io vector count 0 in Ctrl, want at least 1 (the header's vector) + the " + itoa(nvecs) + " data vectors")
	case info.IOVCnt() > nvecs+1: // the kernel's req_iovcnt > dim
		return fail("io vector count " + itoa(info.IOVCnt()) + " in Ctrl, over the 1 + " + itoa(nvecs) + " vectors given (the header's and the data vectors)")
	case info.IOVCnt() < nvecs+1: // the kernel takes it: see Submit
		return fail("io vector count " + itoa(info.IOVCnt()) + " in Ctrl, below 1 + " + itoa(nvecs) + " data vectors: a Submit sends one request, and the " +
			itoa(nvecs+1-info.IOVCnt()) + " vectors past it would be the next request of the same writev in the kernel (its sdma_req_info and header first); Submit that request on its own")
	case info.FragSize == 0:
		return fail("request does not specify fragsize")
	}
	return nil
}

// validate runs every check hfi1_user_sdma_process_request and check_header_template make
// after the slot claim, before anything changes (validateClaim ran). It returns the total data
// length.
func (pq *PktQ) validate(info *ReqInfo, hdr *Header, vecs [][]byte) (int, error) {
	slot := int(info.CompIdx)
	if err := pq.validateInfo(info, len(vecs)); err != nil {
		return 0, err
	}
	if err := pq.validateTemplate(slot, hdr); err != nil {
		return 0, err
	}
	return validateData(info, hdr, vecs)
}

// validateInfo checks the request descriptor (hfi1_user_sdma_process_request's checks after the
// slot claim, and the fragment size ones of check_header_template).
func (pq *PktQ) validateInfo(info *ReqInfo, nvecs int) error {
	slot := int(info.CompIdx)
	fail := func(sentinel error, reason string) error { return reqErr(slot, sentinel, reason) }
	switch {
	case info.Opcode() == Expected:
		return fail(ErrExpected, "EXPECTED (TID) requests need receive-side TID entries, which gosdma does not model; send EAGER")
	case info.Opcode() != Eager:
		return fail(ErrInvalid, "unknown opcode "+itoa(int(info.Opcode())))
	case info.NPkts == 0:
		return fail(ErrInvalid, "zero packets")
	case nvecs > MaxVectorsPerReq:
		return fail(ErrInvalid, "too many vectors ("+itoa(nvecs)+"/"+itoa(MaxVectorsPerReq)+")")
	case int(info.FragSize)%PIOBlockSize != 0:
		return fail(ErrInvalid, "fragsize "+itoa(int(info.FragSize))+" not a multiple of "+itoa(PIOBlockSize))
	case int(info.FragSize) > pq.mtu:
		return fail(ErrInvalid, "fragsize "+itoa(int(info.FragSize))+" over the MTU "+itoa(pq.mtu))
	case HeaderSize+int(info.FragSize) > MaxSDMAPktSize:
		return fail(ErrInvalid, "fragsize "+itoa(int(info.FragSize))+" makes packets over "+itoa(MaxSDMAPktSize)+" bytes")
	}
	return nil
}

// validateTemplate checks the header template as the kernel does: a PSM opcode, the VL and the
// SC that maps to it, no GRH.
func (pq *PktQ) validateTemplate(slot int, hdr *Header) error {
	if op := hdr.Opcode(); op&opcodeCheck != opcodeCheck {
		return reqErr(slot, ErrInvalid, "invalid opcode 0x"+hex(int(op))+": user packets use 0xC0..0xFF")
	}
	if vl, sc := hdr.VL(), hdr.SC(); vl >= pq.numVLs || vl != sc {
		return reqErr(slot, ErrInvalid, "invalid SC("+itoa(sc)+")/VL("+itoa(vl)+"): VL must be below "+itoa(pq.numVLs)+" and equal the SC")
	}
	if hdr.LNH() == lnhGRH {
		return reqErr(slot, ErrInvalid, "the template has a GRH (LRH.LNH 3)")
	}
	return nil
}

// validateData checks the vectors and that the template's first length and the fragment size
// split them into info.NPkts packets (check_header_template's length check, which the kernel
// runs on packet 0 after the slot is QUEUED: here before anything changes).
func validateData(info *ReqInfo, hdr *Header, vecs [][]byte) (int, error) {
	slot := int(info.CompIdx)
	n := 0
	for i, v := range vecs {
		if len(v) == 0 {
			return 0, reqErr(slot, ErrInvalid, "data vector "+itoa(i)+" is empty")
		}
		n += len(v)
	}
	frag := int(info.FragSize)
	// With less than a dword of data the template's length is not used (compute_data_length
	// takes data_len; check_header_template checks the length computed from it).
	if lrh := templateLRH(hdr); n >= 4 && (lrh > lrhLen(frag) || lrh < lrhToICRC) {
		return 0, reqErr(slot, ErrInvalid, "template LRH length "+itoa(lrh)+" bytes: want "+itoa(lrhToICRC)+".."+itoa(lrhLen(frag))+" (header, ICRC and at most fragsize)")
	}
	if lrh := templateLRH(hdr); n >= 4 && lrh-lrhToICRC > padLen(n) {
		// The kernel builds packet 0 for the template's length and its payload walk
		// (hfi1_add_pages_to_sdma_packet) goes on past the last vector, into iovs entries the
		// request did not set (before the 2023 multi-iovec fix, sdma_send_txlist failed the
		// unclosed packet, -EINVAL, tx->tlen left over). Only the padding of a length
		// that is not a multiple of 4 is taken here (see firstLen).
		return 0, reqErr(slot, ErrInvalid, "template LRH length "+itoa(lrh)+" bytes asks for "+itoa(lrh-lrhToICRC)+" bytes of payload in the first packet, over the "+itoa(n)+" bytes of data")
	}
	first := firstLen(hdr, n)
	if first == 0 && n > 0 {
		return 0, reqErr(slot, ErrInvalid, "the template's first packet carries no data")
	}
	want := 1
	if rest := n - first; rest > 0 {
		want += (rest + frag - 1) / frag
	}
	if want != int(info.NPkts) {
		return 0, reqErr(slot, ErrInvalid, "npkts "+itoa(int(info.NPkts))+" does not split "+itoa(n)+" bytes: a first packet of "+itoa(first)+" and fragments of "+itoa(frag)+" make "+itoa(want))
	}
	return n, nil
}

func hex(n int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[n>>4&0xf], digits[n&0xf]})
}
