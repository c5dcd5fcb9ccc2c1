package sdma

import (
	"fmt"

	"github.com/gosdma/gosdma/desc"
)

// A literal model of the kernel's txreq build path (hfi1 sdma.h and sdma.c, mainline after the
// 2023 "Fix sdma.h tx->num_descs off-by-one errors"), for the differential tests of
// kdiff_test.go: each function is the kernel function it names, with the kernel's u16
// arithmetic, its masks and its order of steps. The dma_map_* calls return the addresses the
// library's mapper gave (kMaps), so that the two build the same descriptors when they agree.

// kDesc is struct sdma_desc's qw[2].
type kDesc struct{ qw [2]uint64 }

// Kernel errnos, as the model returns them.
const (
	kOK        = 0
	kENODATA   = -61
	kEMSGSIZE  = -90
	kENOSPC    = -28
	kENOMEM    = -12
	kEINVAL    = -22
	kMapSingle = 1 // SDMA_MAP_SINGLE
	kMapPage   = 2 // SDMA_MAP_PAGE
	kMapNone   = 0 // SDMA_MAP_NONE
)

// kMapCall is one dma_map_* call: its kind (kMapSingle or kMapPage), size and the address it
// returned.
type kMapCall struct {
	kind int
	size int
	addr uint64
}

// kMaps feeds the model's dma_map_* calls with the library's mapping results, in order.
type kMaps struct {
	calls []kMapCall
	next  int
	err   error // the first mismatch: the model mapped something the library did not
}

func (m *kMaps) dmaMap(kind, size int) uint64 {
	if m.next >= len(m.calls) {
		if m.err == nil {
			m.err = fmt.Errorf("kernel maps %d bytes (kind %d) that the library did not map", size, kind)
		}
		return 0
	}
	c := m.calls[m.next]
	m.next++
	if (c.kind != kind || c.size != size) && m.err == nil {
		m.err = fmt.Errorf("kernel maps %d bytes (kind %d), the library mapped %d (kind %d)", size, kind, c.size, c.kind)
	}
	return c.addr
}

// kTx is struct sdma_txreq's build fields.
type kTx struct {
	descs       [desc.NumDesc]kDesc
	ext         []kDesc // the kmalloc_array'ed descp, nil while descp == descs
	numDesc     uint16
	descLimit   uint16
	packetLen   uint16
	tlen        uint16
	flags       uint16
	coalesceBuf bool // tx->coalesce_buf != NULL
	coalesceIdx uint16
	unmaps      []kMapCall // every sdma_unmap_desc that unmapped something, in order
}

func (tx *kTx) descp() []kDesc {
	if tx.ext != nil {
		return tx.ext
	}
	return tx.descs[:]
}

// kDev is what of hfi1_devdata the build path reads.
type kDev struct {
	padPhys      uint64
	defaultDesc1 uint64 // SDMA_DESC1_HEAD_TO_HOST_FLAG: sdma_idle_cnt is 250 by default
	maps         *kMaps
}

// sdma_txinit_ahg.
func (tx *kTx) txinitAHG(flags, tlen uint16, ahgEntry, numAHG uint8, ahg []uint32, ahgHlen uint8) int {
	if tlen == 0 {
		return kENODATA
	}
	if tlen > desc.MaxPktSize {
		return kEMSGSIZE
	}
	tx.descLimit = desc.NumDesc
	tx.ext = nil
	tx.numDesc = 0
	tx.flags = flags
	tx.coalesceBuf = false
	tx.packetLen = tlen
	tx.tlen = tx.packetLen
	tx.descs[0].qw[0] = desc.FirstFlag
	tx.descs[0].qw[1] = 0
	if flags&uint16(FlagAHGCopy) != 0 {
		tx.descs[0].qw[1] |= (uint64(ahgEntry)&desc.HeaderIndexMask)<<desc.HeaderIndexShift |
			(uint64(desc.AHGCopy)&desc.HeaderModeMask)<<desc.HeaderModeShift
	} else if flags&uint16(FlagUseAHG) != 0 && numAHG != 0 {
		tx.ahgadd(numAHG, ahgEntry, ahg, ahgHlen)
	}
	return kOK
}

// _sdma_txreq_ahgadd.
func (tx *kTx) ahgadd(numAHG, ahgEntry uint8, ahg []uint32, ahgHlen uint8) {
	var mode uint8
	switch {
	case numAHG == 1:
		mode = uint8(desc.AHGApplyUpdate1)
	case numAHG <= 5:
		mode = uint8(desc.AHGApplyUpdate2)
	default:
		mode = uint8(desc.AHGApplyUpdate3)
	}
	tx.numDesc++
	switch mode {
	case uint8(desc.AHGApplyUpdate3):
		tx.numDesc++
		tx.descs[2] = kDesc{}
		fallthrough
	case uint8(desc.AHGApplyUpdate2):
		tx.numDesc++
		tx.descs[1] = kDesc{}
	}
	ahgHlen >>= 2
	tx.descs[0].qw[1] |= (uint64(ahgEntry)&desc.HeaderIndexMask)<<desc.HeaderIndexShift |
		(uint64(ahgHlen)&desc.HeaderDWsMask)<<desc.HeaderDWsShift |
		(uint64(mode)&desc.HeaderModeMask)<<desc.HeaderModeShift |
		(uint64(ahg[0])&desc.Update1Mask)<<desc.Update1Shift
	shift, d := uint(0), 0
	for i := 0; i < int(numAHG)-1; i++ {
		if shift == 0 && i&2 == 0 {
			d++
		}
		q := 0
		if i&2 != 0 {
			q = 1
		}
		tx.descs[d].qw[q] |= uint64(ahg[i+1]) << shift
		shift = (shift + 32) & 63
	}
}

// make_tx_sdma_desc.
func (tx *kTx) makeDesc(typ int, addr uint64, n uint16) {
	d := &tx.descp()[tx.numDesc]
	if tx.numDesc == 0 {
		d.qw[1] |= (uint64(typ) & desc.GenerationMask) << desc.GenerationShift
	} else {
		d.qw[0] = 0
		d.qw[1] = (uint64(typ) & desc.GenerationMask) << desc.GenerationShift
	}
	d.qw[0] |= (addr&desc.PhyAddrMask)<<desc.PhyAddrShift | (uint64(n)&desc.ByteCountMask)<<desc.ByteCountShift
}

// _sdma_close_tx.
func (dd *kDev) closeTx(tx *kTx) {
	last := tx.numDesc - 1
	ds := tx.descp()
	ds[last].qw[0] |= desc.LastFlag
	ds[last].qw[1] |= dd.defaultDesc1
	if tx.flags&uint16(FlagUrgent) != 0 {
		ds[last].qw[1] |= desc.HeadToHostFlag | desc.IntReqFlag
	}
}

// _sdma_txadd_daddr.
func (dd *kDev) txaddDaddrInner(typ int, tx *kTx, addr uint64, n uint16) int {
	tx.makeDesc(typ, addr, n)
	tx.numDesc++
	tx.tlen -= n
	if tx.tlen == 0 {
		if tx.packetLen&3 != 0 {
			return dd.padDescs(tx)
		}
		dd.closeTx(tx)
	}
	return kOK
}

// _pad_sdma_tx_descs.
func (dd *kDev) padDescs(tx *kTx) int {
	if tx.numDesc == tx.descLimit {
		if r := dd.extend(tx); r != 0 {
			dd.txclean(tx)
			return r
		}
	}
	tx.makeDesc(kMapNone, dd.padPhys, 4-(tx.packetLen&3))
	tx.numDesc++
	dd.closeTx(tx)
	return kOK
}

// _extend_sdma_tx_descs.
func (dd *kDev) extend(tx *kTx) int {
	if tx.numDesc == desc.MaxDesc-1 {
		if tx.tlen == 0 {
			tx.descLimit = desc.MaxDesc
		} else if !tx.coalesceBuf {
			tx.coalesceBuf = true
			tx.coalesceIdx = 0
		}
		return 0
	}
	if tx.numDesc == desc.MaxDesc {
		dd.txclean(tx)
		return kENOMEM
	}
	tx.ext = make([]kDesc, desc.MaxDesc)
	tx.descLimit = desc.MaxDesc - 1
	copy(tx.ext, tx.descs[:tx.numDesc])
	return 0
}

// ext_coal_sdma_tx_descs: <0 error, 0 coalesced (done), 1 continue.
func (dd *kDev) extCoal(tx *kTx, typ int, n uint16) int {
	if r := dd.extend(tx); r != 0 {
		dd.txclean(tx)
		return r
	}
	if tx.coalesceBuf {
		if typ == kMapNone {
			dd.txclean(tx)
			return kEINVAL
		}
		tx.coalesceIdx += n
		if tx.tlen-tx.coalesceIdx != 0 {
			return 0
		}
		if pad := tx.packetLen & 3; pad != 0 {
			pad = 4 - pad
			tx.packetLen += pad
			tx.tlen += pad
		}
		addr := dd.maps.dmaMap(kMapSingle, int(tx.tlen))
		tx.descLimit = desc.MaxDesc
		return dd.txaddDaddrInner(kMapSingle, tx, addr, tx.tlen)
	}
	return 1
}

// sdma_txadd_kvaddr (typ kMapSingle) and sdma_txadd_page (typ kMapPage).
func (dd *kDev) txaddMapped(tx *kTx, typ int, n uint16) int {
	if tx.numDesc == tx.descLimit {
		if r := dd.extCoal(tx, typ, n); r <= 0 {
			return r
		}
	}
	addr := dd.maps.dmaMap(typ, int(n))
	return dd.txaddDaddrInner(typ, tx, addr, n)
}

// sdma_txadd_daddr.
func (dd *kDev) txaddDaddr(tx *kTx, addr uint64, n uint16) int {
	if tx.numDesc == tx.descLimit {
		if r := dd.extCoal(tx, kMapNone, 0); r <= 0 {
			return r
		}
	}
	return dd.txaddDaddrInner(kMapNone, tx, addr, n)
}

// __sdma_txclean (the unmaps it makes are recorded in tx.unmaps).
func (dd *kDev) txclean(tx *kTx) {
	if tx.numDesc != 0 {
		ds := tx.descp()
		mode := uint8(ds[0].qw[1] >> desc.HeaderModeShift & desc.HeaderModeMask)
		tx.unmapDesc(ds[0])
		skip := uint16(0)
		if mode > uint8(desc.AHGApplyUpdate1) {
			skip = uint16(mode >> 1)
		}
		for i := 1 + skip; i < tx.numDesc; i++ {
			tx.unmapDesc(ds[i])
		}
		tx.numDesc = 0
	}
	tx.coalesceBuf = false
	if tx.descLimit > desc.NumDesc {
		tx.descLimit = desc.NumDesc
	}
}

// sdma_unmap_desc.
func (tx *kTx) unmapDesc(d kDesc) {
	typ := int(d.qw[1] >> desc.GenerationShift & desc.GenerationMask)
	if typ == kMapSingle || typ == kMapPage {
		tx.unmaps = append(tx.unmaps, kMapCall{kind: typ, size: int(d.qw[0] >> desc.ByteCountShift & desc.ByteCountMask),
			addr: d.qw[0] & desc.PhyAddrMask})
	}
}

// submit_tx, on a ring of 1<<shift descriptors whose descq_tail is tail: the words written to
// the ring, slot by slot.
func (tx *kTx) submit(tail uint32, shift uint) []kDesc {
	addGen := func(t uint32, qw1 uint64) uint64 {
		gen := uint64(t>>shift) & 3
		return qw1&^desc.GenerationSMask | (gen&desc.GenerationMask)<<desc.GenerationShift
	}
	ds := tx.descp()
	out := []kDesc{{qw: [2]uint64{ds[0].qw[0], addGen(tail, ds[0].qw[1])}}}
	tail++
	mode := uint8(ds[0].qw[1] >> desc.HeaderModeShift & desc.HeaderModeMask)
	skip := 0
	if mode > uint8(desc.AHGApplyUpdate1) {
		skip = int(mode >> 1)
	}
	for i := 1; i < int(tx.numDesc); i++ {
		qw1 := ds[i].qw[1]
		if skip > 0 {
			skip--
		} else {
			qw1 = addGen(tail, qw1)
		}
		out = append(out, kDesc{qw: [2]uint64{ds[i].qw[0], qw1}})
		tail++
	}
	return out
}
