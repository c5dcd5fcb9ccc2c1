package sdma

import (
	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// AddBytes adds buf, any byte range of heap (or other CPU) memory, to tx, split so that no
// descriptor crosses a dma.PageSize boundary of buf's address or exceeds the hardware's 16383
// byte count (the splitting the kernel leaves to its callers: "it is the user's responsibility
// to understand the packet boundaries and page boundaries"). Each piece is added as AddKVAddr
// adds it, mapped with MapSingle, so a long buffer may take several descriptors, and past 63 its
// pieces are coalesced. If all of buf lies in memory registered with the device (Device.Register),
// whose bus addresses are contiguous, it is split only at the 16383 byte count and nothing is
// mapped, unless tx cannot use that registration (it holds two others already, or the memory is
// being deregistered): then it is split and mapped as memory that is not registered. buf must not
// be modified until tx completes.
//
// len(buf) is checked against the bytes left before anything is mapped. Errors and the cleaning
// on failure are as for AddPage: if a piece fails, every mapping tx made, including the earlier
// pieces, is undone.
func (tx *TxReq) AddBytes(dev *Device, buf []byte) error {
	const op = "AddBytes"
	if err := tx.checkAdd(op, dev, len(buf)); err != nil {
		return err
	}
	base := addrOf(buf)
	registered := dev.lookupRegs() && tx.useRegistered(dev, buf)
	for len(buf) > 0 {
		n := min(len(buf), desc.MaxByteCount)
		if !registered {
			n = min(n, dma.PageSize-int(base%dma.PageSize))
		}
		if err := tx.addKV(dev, buf[:n], true); err != nil {
			return err
		}
		buf = buf[n:]
		base += uintptr(n)
	}
	return nil
}

// useRegistered reports whether AddBytes may cut buf only at the byte count: all of buf lies in
// one registration of dev's mapper that lets the device read, and tx holds a use of it (taken
// here if it holds none yet; clean releases it), so that each piece's add takes the registered
// path. Otherwise (no registration, one for the device to write, a third registration past the
// two a txreq holds, one being deregistered) the pieces are mapped, and must be cut at pages.
func (tx *TxReq) useRegistered(dev *Device, buf []byte) bool {
	r := dev.regs.Registered(buf)
	return r != nil && r.Dir().Allows(dma.ToDevice) && tx.holdReg(r)
}

// AddPages adds n bytes at byte offset off of region, page-backed memory from dma.AllocPages, to
// tx: the range is split at page boundaries and each page piece is added as AddPage adds it
// (MapPage, or no mapping if the region's memory is registered with the device; one descriptor
// each unless coalesced): the page loop of user_sdma (hfi1:
// user_sdma_txadd, later add_system_pages_to_sdma_packet), done by the library. Pieces are
// at most dma.PageSize bytes, well under the hardware's 16383.
//
// A nil or closed region, or a range outside it, is ErrInvalid. n is checked against the bytes
// left before anything is mapped. Errors and the cleaning on failure are as for AddPage: if a
// piece fails, every mapping tx made, including the earlier pieces, is undone.
func (tx *TxReq) AddPages(dev *Device, region *dma.Region, off, n int) error {
	const op = "AddPages"
	if err := tx.checkAdd(op, dev, n); err != nil {
		return err
	}
	if region == nil || region.Closed() {
		tx.clean()
		return txErr(op, ErrInvalid, "nil or closed region")
	}
	if size := region.NumPages() * dma.PageSize; off < 0 || off > size || n > size-off {
		tx.clean()
		return txErr(op, ErrInvalid, "range "+itoa(off)+"+"+itoa(n)+" outside the region's "+itoa(size)+" bytes")
	}
	for n > 0 {
		pg, err := region.Page(off / dma.PageSize)
		if err != nil {
			tx.clean()
			return &TxError{Op: op, Reason: "page of the region", Err: ErrInvalid, Cause: err}
		}
		po := off % dma.PageSize
		k := min(dma.PageSize-po, n)
		if err := tx.addPage(op, dev, pg, po, k); err != nil {
			return err
		}
		off += k
		n -= k
	}
	return nil
}
