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
// not register memory is ErrInvalid.
func (dev *Device) Register(buf []byte) (*dma.Registration, error) {
	if dev.regs == nil {
		return nil, txErr("Register", ErrInvalid, "the mapper does not register memory")
	}
	return dev.regs.Register(buf, dma.ToDevice)
}

// Deregister undoes Register once no packet in flight points into the memory: it stops new adds
// from using the registration, then waits for the txreqs that do to be cleaned (completed,
// aborted or cleaned by their owner; a txreq built but never sent holds its use until Clean or a
// new Init), then unmaps (dma.Registrar.Deregister). If ctx ends first it returns an error
// matching ctx's error and nothing changed.
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

// addRegistered adds buf as one descriptor if it lies in memory registered with dev's mapper and
// tx can hold a use of the registration; done reports that it did (err is then the add's).
func (tx *TxReq) addRegistered(op string, dev *Device, buf []byte) (done bool, err error) {
	if !dev.lookupRegs() {
		return false, nil
	}
	if addr, ok := tx.heldAddr(buf); ok {
		return true, tx.addDesc(op, dev, desc.MapNone, addr, len(buf), 0)
	}
	r := dev.regs.Registered(buf)
	if r == nil {
		return false, nil
	}
	return tx.addRegisteredIn(op, dev, r, buf)
}

// heldAddr returns the bus address of buf if it lies in a registration tx holds a use of: the
// one an earlier add of the same packet (say its header) took from the same memory. Arithmetic
// on the registration's immutable fields, no lookup, and no addRegisteredIn: the registration
// was checked (its direction) when it was taken, and tx holds its use already. The use keeps the
// memory mapped until tx is cleaned, even once a Deregister has begun (it waits for the use), so
// the add may point into it.
func (tx *TxReq) heldAddr(buf []byte) (addr dma.Addr, ok bool) {
	for _, r := range tx.regs[:tx.nregs] {
		if addr, ok = r.AddrOf(buf); ok {
			break
		}
	}
	return addr, ok
}

// addRegisteredIn is addRegistered once the lookup found r, the registration holding buf (the
// caller's own lookup, so that the common case, memory that is not registered, costs the lookup
// and no call more).
func (tx *TxReq) addRegisteredIn(op string, dev *Device, r *dma.Registration, buf []byte) (done bool, err error) {
	if !r.Dir().Allows(dma.ToDevice) {
		return false, nil
	}
	addr, ok := r.AddrOf(buf)
	if !ok || !tx.holdReg(r) {
		return false, nil
	}
	return true, tx.addDesc(op, dev, desc.MapNone, addr, len(buf), 0)
}

// holdReg makes tx hold a use of r, once however many descriptors point into it; false if tx
// holds maxTxRegs others already or r is being deregistered.
func (tx *TxReq) holdReg(r *dma.Registration) bool {
	for _, x := range tx.regs[:tx.nregs] {
		if x == r {
			return true
		}
	}
	if int(tx.nregs) == maxTxRegs || !r.Acquire() {
		return false
	}
	tx.regs[tx.nregs] = r
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
