package sdma

import (
	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// AddPage adds n bytes at offset in page to tx (hfi1: sdma_txadd_page). The range is mapped
// through the device's mapper (MapPage, dma.ToDevice) and unmapped when tx completes or is
// cleaned, unless it lies in memory registered with the device (Device.Register): then its bus
// address is computed, nothing is mapped, and tx holds a use of the registration until it is
// cleaned. The range must lie inside the page; for longer ranges use AddPages, which splits them.
//
// The add that brings the remaining length to zero closes the packet: a 1 to 3 byte pad
// descriptor to a multiple of 4 bytes when needed, LAST on the last descriptor, HEAD_TO_HOST, and
// INT_REQ as well for FlagUrgent. Past 6 descriptors the array is extended to 64; past 63 the
// fragment is copied into the coalesce buffer, which becomes one descriptor when the packet is
// complete.
//
// Errors (a *TxError): ErrMapping if the mapper refuses (the cause wraps the dma error);
// ErrNoDesc if the descriptor array cannot grow; ErrInvalid for a nil device or the zero Device
// (not made by NewDevice), a zero length, a length beyond the bytes left (the kernel only WARNs),
// a range crossing the page's end, a txreq that is closed, uninitialised, cleaned or in flight, or
// a device other than the one earlier adds used; ErrClosed once the device is closed. On any
// failure tx has been cleaned (every mapping it made is undone) and must be initialised again, as
// in the kernel; an add to a txreq in flight changes nothing.
//
// The kernel's pinning_ctx, ctx_get and ctx_put arguments (user_sdma's page-pinning cache) have no
// counterpart: the mapper pins page's dma.Region from MapPage until the unmap, so the pages
// outlive every descriptor that points at them.
func (tx *TxReq) AddPage(dev *Device, page dma.Page, offset, n int) error {
	const op = "AddPage"
	if err := tx.checkAdd(op, dev, n); err != nil {
		return err
	}
	if offset < 0 || offset > dma.PageSize || n > dma.PageSize-offset {
		tx.clean()
		return txErr(op, ErrInvalid, "range "+itoa(offset)+"+"+itoa(n)+" crosses the page's end ("+itoa(dma.PageSize)+")")
	}
	if !page.Valid() {
		tx.clean()
		return txErr(op, ErrInvalid, "invalid page or closed region")
	}
	return tx.addPage(op, dev, page, offset, n)
}

// addPage is AddPage after the checks.
func (tx *TxReq) addPage(op string, dev *Device, page dma.Page, offset, n int) error {
	if tx.numDesc == tx.descLimit {
		b := page.Bytes() // kmap(page)
		if b == nil {
			tx.clean()
			return txErr(op, ErrInvalid, "invalid page or closed region")
		}
		if done, err := tx.extCoal(op, dev, desc.MapPage, b[offset:offset+n]); done {
			return err
		}
	}
	if b := page.Bytes(); b != nil {
		if dev.lookupRegs() {
			if done, err := tx.addRegistered(op, dev, b[offset:offset+n]); done {
				return err
			}
		}
	}
	addr, err := dev.mapper.MapPage(page, offset, n, dma.ToDevice)
	if err != nil {
		tx.clean()
		return &TxError{Op: op, Reason: "mapping " + itoa(n) + " bytes of a page", Err: ErrMapping, Cause: err}
	}
	return tx.addDesc(op, dev, desc.MapPage, addr, n, 0)
}

// AddKVAddr adds the bytes of buf to tx (hfi1: sdma_txadd_kvaddr). buf is mapped through the
// device's mapper (MapSingle, dma.ToDevice) as one descriptor, or, if it lies in memory registered
// with the device (Device.Register), added with its computed bus address and no mapping (as
// AddPage). Either way it must be memory the device can read contiguously: like the kernel, AddKVAddr does not split at page boundaries (AddBytes does).
// buf must not be modified until tx completes. Closing, extension, coalescing, errors and the
// cleaning on failure are as for AddPage.
func (tx *TxReq) AddKVAddr(dev *Device, buf []byte) error {
	return tx.addKV(dev, buf, false) // inlines: one call for the add
}

// addKV is AddKVAddr, or a piece of AddBytes if split (AddBytes checked the whole of its buffer,
// so its pieces get no check). The operation's name, for the errors, is kvOp(split): no string
// is passed on the common path.
func (tx *TxReq) addKV(dev *Device, buf []byte, split bool) error {
	if !split && !tx.addable(dev, len(buf)) { // the common case tested here, with no call
		if err := tx.checkAdd("AddKVAddr", dev, len(buf)); err != nil {
			return err
		}
	}
	if tx.numDesc == tx.descLimit {
		if done, err := tx.extCoal(kvOp(split), dev, desc.MapSingle, buf); done {
			return err
		}
	}
	if dev.lookupRegs() {
		if done, err := tx.addRegistered(kvOp(split), dev, buf); done {
			return err
		}
	}
	// A sole mapping (see TxReq.soles) if the descriptor keeps its handle, else a public one. The
	// sole mapping's descriptor is one of the inline ones, written here without addDesc's call.
	n := len(buf)
	if i := int(tx.numDesc); dev.sole != nil && i < desc.NumDesc {
		addr, h, err := dev.sole.MapSingleSoleHint(buf, dma.ToDevice, tx.soles[i]) // the slot's last handle
		if err != nil {
			return tx.mapFailed(kvOp(split), n, err)
		}
		if uint64(addr)+uint64(n) > desc.MaxAddr+1 {
			return tx.beyond48(kvOp(split), dev, desc.MapSingle, addr, n, h)
		}
		tx.soles[i] = h
		tx.nmaps++
		if q0, q1 := descWords(desc.MapSingle, addr, n); tx.putDesc(&tx.descs[i], i, q0, q1, uint16(n)) {
			return tx.pad(kvOp(split), dev)
		}
		return nil
	}
	addr, err := dev.mapper.MapSingle(buf, dma.ToDevice)
	if err != nil {
		return tx.mapFailed(kvOp(split), n, err)
	}
	return tx.addDesc(kvOp(split), dev, desc.MapSingle, addr, n, 0)
}

// kvOp names addKV's operation in its errors: AddBytes for a piece of AddBytes (split), else
// AddKVAddr.
func kvOp(split bool) string {
	if split {
		return "AddBytes"
	}
	return "AddKVAddr"
}

// mapFailed cleans tx after its kvaddr mapping of n bytes failed with err, and returns the add's
// error (ErrMapping). Out of line: addKV's common path holds no error to build.
//
//go:noinline
func (tx *TxReq) mapFailed(op string, n int, err error) error {
	tx.clean()
	return &TxError{Op: op, Reason: "mapping " + itoa(n) + " bytes", Err: ErrMapping, Cause: err}
}

// AddDAddr adds n bytes at bus address addr, already mapped by the caller (for instance a header
// from a dma.Pool or dma.Coherent), to tx (hfi1: sdma_txadd_daddr). The library neither maps nor
// unmaps it: it must stay mapped until tx completes. A daddr fragment cannot be copied into the
// coalesce buffer, so once a txreq coalesces (past 63 descriptors) AddDAddr fails with ErrInvalid,
// as the kernel's -EINVAL. Unlike the kernel, which masks, an address range beyond 48 bits is
// refused (ErrInvalid). Closing, errors and the cleaning on failure are otherwise as for AddPage.
func (tx *TxReq) AddDAddr(dev *Device, addr dma.Addr, n int) error {
	const op = "AddDAddr"
	if err := tx.checkAdd(op, dev, n); err != nil {
		return err
	}
	if uint64(addr) > desc.MaxAddr || uint64(addr)+uint64(n) > desc.MaxAddr+1 {
		tx.clean()
		return txErr(op, ErrInvalid, "bus address beyond 48 bits")
	}
	if tx.numDesc == tx.descLimit {
		if done, err := tx.extCoal(op, dev, desc.MapNone, nil); done {
			return err
		}
	}
	return tx.addDesc(op, dev, desc.MapNone, addr, n, 0)
}

// checkAdd checks an add of n bytes to tx on dev, the checks the kernel leaves to WARN_ON (or to
// nothing), and that the device is not closed (its pad is freed then: ErrClosed). On failure it
// cleans tx, unless tx is in flight. Every add, AddPage's errors paragraph holds for all of them.
func (tx *TxReq) checkAdd(op string, dev *Device, n int) error {
	if tx.addable(dev, n) {
		return nil
	}
	var reason string
	sentinel := ErrInvalid
	switch st := tx.state.Load(); {
	case st == txInFlight:
		return txErr(op, ErrInvalid, "txreq in flight")
	case st == txFree && tx.descp == nil:
		reason = "txreq uninitialised"
	case st == txFree:
		reason = "txreq cleaned (failed, completed or Clean): Init before reuse"
	case dev == nil:
		reason = "nil device"
	case dev.state.Load() == devZero:
		reason = "zero Device, not made by NewDevice"
	case dev.state.Load() == devClosed:
		reason, sentinel = "device closed", ErrClosed
	case tx.dev != nil && tx.dev != dev:
		reason = "device differs from the one earlier adds used"
	case tx.tlen == 0:
		reason = "txreq closed: all bytes added"
	case n <= 0:
		reason = "length " + itoa(n) + ": want at least 1 byte"
	case n > tx.remaining():
		reason = "length " + itoa(n) + " beyond the " + itoa(tx.remaining()) + " bytes left"
	default:
		tx.dev = dev
		return nil
	}
	tx.clean()
	return txErr(op, sentinel, reason)
}

// addable is checkAdd's common case in one test that inlines: tx is building, not coalescing,
// dev is open or draining (made by NewDevice, not closed) and the device of tx's earlier adds, and
// 1 <= n <= the bytes left. If so it records dev as tx's device, as checkAdd does, and reports
// true: checkAdd would return nil.
// false says nothing: checkAdd tells.
func (tx *TxReq) addable(dev *Device, n int) bool {
	// uint(n-1) < tlen is 1 <= n <= tlen in one compare.
	if tx.state.Load() != txBuilding || uint(n-1) >= uint(tx.tlen) || tx.coalescing || dev == nil ||
		dev.state.Load()&devAdds == 0 { // closed, or the zero Device
		return false
	}
	if tx.dev != dev { // else it is dev already: no store
		if tx.dev != nil {
			return false
		}
		tx.dev = dev
	}
	return true
}

// addDesc writes the descriptor for a fragment already mapped (or a daddr), counts tlen down and
// closes the packet when it reaches zero (hfi1: _sdma_txadd_daddr and make_tx_sdma_desc). The
// first descriptor keeps the FIRST and AHG bits set by Init. Unlike the kernel's silent masking,
// an address beyond 48 bits is refused: the fresh mapping is undone and tx cleaned (ErrMapping).
// h is the mapping's dma.Sole handle (0: none), recorded in tx.soles.
func (tx *TxReq) addDesc(op string, dev *Device, mapType desc.MapType, addr dma.Addr, n int, h dma.Sole) error {
	if uint64(addr)+uint64(n) > desc.MaxAddr+1 {
		return tx.beyond48(op, dev, mapType, addr, n, h)
	}
	i := int(tx.numDesc)
	var d *desc.Desc
	if i < desc.NumDesc {
		tx.soles[i] = h
		d = &tx.descs[i] // descp is the inline array below NumDesc (see reset)
	} else {
		d = &tx.descp[i]
	}
	if mapType != desc.MapNone {
		tx.nmaps++ // at most MaxDesc: the descriptor array's size bounds it
	}
	if q0, q1 := descWords(mapType, addr, n); tx.putDesc(d, i, q0, q1, uint16(n)) {
		return tx.pad(op, dev)
	}
	return nil
}

// putDesc writes d, descriptor i of tx, whose fragment's words are q0 (its bus address and byte
// count n) and q1 (its mapping type; descWords makes both); the first descriptor keeps the FIRST
// and AHG bits set by Init. One store of each word. It counts the descriptor and tlen down (the
// caller counts a mapping, nmaps), and closes the packet when tlen reaches zero: LAST and
// HEAD_TO_HOST (and INT_REQ for FlagUrgent) on d, unless the packet needs its pad, which padDue
// reports (the caller adds it, pad, which closes the packet on the pad descriptor).
func (tx *TxReq) putDesc(d *desc.Desc, i int, q0, q1 uint64, n uint16) (padDue bool) {
	if i == 0 {
		q0, q1 = q0|d.Qw0, q1|d.Qw1
	}
	tx.numDesc = uint16(i + 1)
	if tx.tlen -= n; tx.tlen == 0 {
		if padDue = tx.packetLen&3 != 0; !padDue {
			// close's bits, on the words before their store: LAST, HEAD_TO_HOST, and INT_REQ
			// for FlagUrgent (its bit moved to INT_REQ's, urgentIntReq).
			q0 |= desc.LastFlag
			q1 |= desc.HeadToHostFlag | uint64(tx.flags&FlagUrgent)<<urgentIntReq
		}
	}
	*d = desc.Desc{Qw0: q0, Qw1: q1}
	return padDue
}

// descWords returns the words of a fragment's descriptor (putDesc's q0 and q1): its bus address
// and byte count n, and its mapping type in the generation field (the software copy's).
func descWords(mapType desc.MapType, addr dma.Addr, n int) (q0, q1 uint64) {
	return uint64(addr)<<desc.PhyAddrShift | uint64(n)<<desc.ByteCountShift, uint64(mapType) << desc.GenerationShift
}

// urgentIntReq is the shift from FlagUrgent's bit to INT_REQ's (putDesc); the array's length
// fails to compile (the index is not 0) unless it moves the one onto the other.
const urgentIntReq = 1

var _ = [1]struct{}{}[uint64(FlagUrgent)<<urgentIntReq^desc.IntReqFlag]

// beyond48 refuses a fragment that the mapper put beyond 48 bits of bus address: the fresh
// mapping is undone at the address the mapper gave (a descriptor cannot hold it: it would mask
// it) and tx is cleaned.
//
//go:noinline
func (tx *TxReq) beyond48(op string, dev *Device, mapType desc.MapType, addr dma.Addr, n int, h dma.Sole) error {
	uerr := dev.unmap(mapType, addr, n, h)
	tx.clean()
	return &TxError{Op: op, Reason: "mapper returned a bus address beyond 48 bits", Err: ErrMapping, Cause: uerr}
}

// pad adds the 1 to 3 byte descriptor that rounds the packet up to a multiple of 4 bytes,
// pointing at the device's shared zeroed pad, and closes the packet (hfi1: _pad_sdma_tx_descs,
// as fixed in 2023: the descriptor is built at num_desc, then counted).
func (tx *TxReq) pad(op string, dev *Device) error {
	if tx.numDesc == tx.descLimit {
		if err := tx.extend(op); err != nil {
			return err
		}
	}
	n := 4 - int(tx.packetLen&3)
	if i := int(tx.numDesc); i < desc.NumDesc {
		tx.soles[i] = 0 // no handle: not an earlier packet's (the hardware model passes it on)
	}
	tx.descp[tx.numDesc] = desc.Desc{
		Qw0: uint64(dev.padAddr())&desc.PhyAddrMask | uint64(n)<<desc.ByteCountShift,
		Qw1: uint64(desc.MapNone) << desc.GenerationShift,
	}
	tx.numDesc++
	tx.close()
	return nil
}

// close marks the last descriptor (hfi1: _sdma_close_tx): LAST, the device's default
// HEAD_TO_HOST (dd->default_desc1 with a non-zero idle count), and HEAD_TO_HOST|INT_REQ for
// FlagUrgent.
func (tx *TxReq) close() {
	d := &tx.descp[tx.numDesc-1]
	d.Qw0 |= desc.LastFlag
	d.Qw1 |= desc.HeadToHostFlag
	if tx.flags&FlagUrgent != 0 {
		d.Qw1 |= desc.HeadToHostFlag | desc.IntReqFlag
	}
}

// extend grows the descriptor array when it is full (hfi1: _extend_sdma_tx_descs):
//
//   - at 63 descriptors: with tlen 0 (the pad is due) the reserved 64th is released; otherwise
//     the coalesce buffer is taken into use (allocated once, 16383+4 bytes, kept across reuse);
//   - at 64: ErrNoDesc (cannot happen through the public API: the 64th closes the packet);
//   - at 6 (the first overflow): the inline descriptors move to the extended array of 64, of which
//     63 are usable and the last is reserved for the coalesce or pad descriptor. The array is
//     allocated once and kept across reuse.
//
// On failure tx is cleaned.
func (tx *TxReq) extend(op string) error {
	switch tx.numDesc {
	case desc.MaxDesc - 1:
		if tx.tlen == 0 {
			tx.descLimit = desc.MaxDesc
		} else if !tx.coalescing {
			if tx.coalesceBuf == nil {
				tx.coalesceBuf = make([]byte, desc.MaxPktSize+4)
			}
			tx.coalescing = true
			tx.coalesceIdx = 0
		}
		return nil
	case desc.MaxDesc:
		tx.clean()
		return txErr(op, ErrNoDesc, "all "+itoa(desc.MaxDesc)+" descriptors in use")
	}
	if tx.ext == nil {
		tx.ext = make([]desc.Desc, desc.MaxDesc)
	}
	copy(tx.ext, tx.descs[:tx.numDesc])
	tx.descp = tx.ext
	tx.descLimit = desc.MaxDesc - 1
	return nil
}

// extCoal runs when the descriptor array is full (hfi1: ext_coal_sdma_tx_descs). It extends the
// array; if tx is coalescing it copies the fragment into the coalesce buffer instead of adding a
// descriptor and, once the whole packet is there, zero-pads it to 4 bytes (adding the pad to
// packet_len and tlen), maps it (MapSingle) and adds it as the one last descriptor. done reports
// that the fragment src (the kernel's kvaddr, or kmap(page)+offset) was consumed (or that an error occurred): the caller must return err. While
// coalescing tlen is not counted down. A daddr fragment cannot be coalesced (ErrInvalid). On
// failure tx is cleaned.
func (tx *TxReq) extCoal(op string, dev *Device, mapType desc.MapType, src []byte) (done bool, err error) {
	if err := tx.extend(op); err != nil {
		return true, err
	}
	if !tx.coalescing {
		return false, nil
	}
	if mapType == desc.MapNone {
		tx.clean()
		return true, txErr(op, ErrInvalid, "a daddr fragment cannot be coalesced (past 63 descriptors)")
	}
	tx.coalesceIdx += copy(tx.coalesceBuf[tx.coalesceIdx:tx.tlen], src)
	if int(tx.tlen) != tx.coalesceIdx {
		return true, nil
	}
	// Whole packet received: add any padding.
	if p := int(tx.packetLen & 3); p != 0 {
		p = 4 - p
		clear(tx.coalesceBuf[tx.coalesceIdx : tx.coalesceIdx+p])
		tx.packetLen += uint16(p)
		tx.tlen += uint16(p)
	}
	addr, err := dev.mapper.MapSingle(tx.coalesceBuf[:tx.tlen], dma.ToDevice)
	if err != nil {
		tx.clean()
		return true, &TxError{Op: op, Reason: "mapping the coalesce buffer", Err: ErrMapping, Cause: err}
	}
	tx.descLimit = desc.MaxDesc
	tx.coalescing = false // the buffer is now a mapped SINGLE descriptor, unmapped by clean
	return true, tx.addDesc(op, dev, desc.MapSingle, addr, int(tx.tlen), 0)
}
