package sdma

import (
	"context"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// Registered memory.
//
// Memory registered with the device's mapper (Device.Register, the verbs ibv_reg_mr; hfi1's
// user SDMA keeps its pages pinned and mapped in a cache for the same reason) is mapped once. An
// add from it (AddKVAddr, AddBytes, AddPage, AddPages) computes the bus address by arithmetic:
// no map call, no lock, no allocation, and nothing to unmap at completion; the descriptor is
// typed as a daddr one (desc.MapNone). The txreq instead holds a use of the registration
// (dma.Registration.Acquire) from the add until it is cleaned (completion, abort, failure, or a
// new Init), so that Deregister waits for every packet that points into the memory: the hardware
// model never reads memory that was deregistered. An add to memory being deregistered maps it as
// memory that is not registered, unless the txreq already holds a use of that registration (an
// earlier add of the same packet: Deregister waits for that use anyway, so the memory stays mapped
// until the txreq is cleaned); memory that is not registered is mapped per add, as the kernel
// does. A txreq's second add from the registration its first used (a header and its payload from
// one buffer) is found among the registrations it holds, with no lookup.

// maxTxRegs is how many registrations one txreq may use at once (a header and a payload from
// different registrations); a fragment from a further one is mapped per add instead.
const maxTxRegs = 2

// Register registers buf with the device's mapper for the device to read (dma.Registrar.Register
// with dma.ToDevice). Adds of memory inside it then make no mapping (see the package's registered
// memory notes). buf must not be modified while packets from it are in flight. A mapper that does
// not register memory is ErrInvalid; a closed device ErrClosed, as for an add (nothing would send
// from the memory, and it would stay mapped until a Deregister).
func (dev *Device) Register(buf []byte) (*dma.Registration, error) {
	if dev.regs == nil {
		return nil, txErr("Register", ErrInvalid, "the mapper does not register memory")
	}
	if dev.state.Load() == devClosed {
		return nil, txErr("Register", ErrClosed, "device closed")
	}
	return dev.regs.Register(buf, dma.ToDevice)
}

// Deregister undoes Register once no packet in flight points into the memory: it stops new adds
// from using the registration, then waits for the txreqs that do to be cleaned (completed,
// aborted or cleaned by their owner; a txreq built but never sent holds its use until Clean or a
// new Init), then unmaps (dma.Registrar.Deregister). If ctx ends first it returns an error
// matching ctx's error and nothing changed, unless another Deregister of r waits: that one takes
// over the wait under its own context. Concurrent Deregisters of one registration wait for the
// outcome of the one that waits for the packets: exactly one returns nil, the others
// dma.ErrNotMapped (deregistered already) or, if their ctx ends first, an error matching it. A
// registration deregistered already is dma.ErrNotMapped; a nil ctx is dma.ErrInvalid (nothing
// changed).
func (dev *Device) Deregister(ctx context.Context, r *dma.Registration) error {
	if dev.regs == nil {
		return txErr("Deregister", ErrInvalid, "the mapper does not register memory")
	}
	return dev.regs.Deregister(ctx, r)
}

// lookupRegs reports whether an add must look buf up among the registrations of dev's mapper:
// it registers memory, and its Registry (if it has one) does not say that nothing is registered.
// false: no buffer lies in registered memory. A txreq holds a registration only if some memory
// was registered, so it need not look among its own either.
func (dev *Device) lookupRegs() bool {
	return dev.regs != nil && (dev.registry == nil || dev.registry.Any())
}

// addRegistered adds buf as one descriptor that maps nothing (desc.MapNone) if it lies in memory
// registered with dev's mapper, the registration lets the device read, and tx holds (or can take)
// a use of it; done reports that it did (err is then the add's). The caller checked
// dev.lookupRegs. The descriptor is written here, without addDesc's call, when it is one of the
// inline ones.
//
// With the mapper's Registry (Direct, IOMMU) the lookup is Registry.Find: the registration and
// buf's bus address in one search of the snapshot, with no interface call. It finds a
// registration being deregistered too: holdReg then keeps it only if tx holds its use already
// (an earlier add of the same packet, say its header). Other mappers are asked through their
// Registrar (findRegistered).
func (tx *TxReq) addRegistered(op string, dev *Device, buf []byte) (done bool, err error) {
	var r *dma.Registration
	var addr dma.Addr
	if reg := dev.registry; reg != nil {
		r, addr = reg.Find(buf)
	} else {
		r, addr = tx.findRegistered(dev, buf)
	}
	if r == nil || !r.Dir().Allows(dma.ToDevice) {
		return false, nil
	}
	if tx.nregs == 0 { // holdReg's common case, without its call
		if !r.Acquire() {
			return false, nil
		}
		tx.regs[0], tx.nregs = r, 1
	} else if !tx.holdReg(r) {
		return false, nil
	}
	n := len(buf)
	if i := int(tx.numDesc); i < desc.NumDesc && uint64(addr)+uint64(n) <= desc.MaxAddr+1 {
		tx.soles[i] = 0
		if q0, q1 := descWords(desc.MapNone, addr, n); tx.putDesc(&tx.descs[i], i, q0, q1, uint16(n)) {
			return true, tx.pad(op, dev)
		}
		return true, nil
	}
	return true, tx.addDesc(op, dev, desc.MapNone, addr, n, 0)
}

// findRegistered is addRegistered's lookup through a mapper without a Registry (the wrappers):
// first among the registrations tx holds a use of (an earlier add of the same packet, say its
// header, from the same memory: arithmetic on the registration's immutable fields, no lookup;
// the use keeps the memory mapped until tx is cleaned, even once a Deregister has begun, which
// waits for it), then the Registrar's Registered, which does not return a registration being
// deregistered. It returns the registration and buf's bus address, or nil.
func (tx *TxReq) findRegistered(dev *Device, buf []byte) (*dma.Registration, dma.Addr) {
	for _, r := range tx.regs[:tx.nregs] {
		if addr, ok := r.AddrOf(buf); ok {
			return r, addr
		}
	}
	r := dev.regs.Registered(buf)
	if r == nil {
		return nil, 0
	}
	addr, ok := r.AddrOf(buf)
	if !ok {
		return nil, 0
	}
	return r, addr
}

// holdReg makes tx hold a use of r, once however many descriptors point into it; false if tx
// holds maxTxRegs others already or r is being deregistered and tx does not hold it.
func (tx *TxReq) holdReg(r *dma.Registration) bool {
	k := int(tx.nregs)
	for _, x := range tx.regs[:k] {
		if x == r {
			return true
		}
	}
	if k == maxTxRegs || !r.Acquire() {
		return false
	}
	tx.regs[k] = r
	tx.nregs++
	return true
}

// releaseRegs ends tx's uses of registrations (clean).
func (tx *TxReq) releaseRegs() {
	for i := range tx.regs[:tx.nregs] {
		tx.regs[i].Release()
		tx.regs[i] = nil
	}
	tx.nregs = 0
}
