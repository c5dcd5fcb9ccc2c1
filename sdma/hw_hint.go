package sdma

import "github.com/gosdma/gosdma/dma"

// The hardware model's reads of a packet of one or two descriptors (Engine.packet's fast paths)
// go through the mapper's dma.SoleTranslator (Device.hints) with the handle that the packet's
// txreq recorded for each descriptor (TxReq.soles: AddKVAddr's mapping; 0 for none). The handle
// is an IOTLB entry that the descriptor's owner carries: the mapper finds the entry from it with
// arithmetic, without its index's hash and set walk, and validates it; a hint never changes the
// answer (see dma.SoleTranslator), so a descriptor that points at memory that is not mapped halts
// the engine exactly as before. A mapper that is not a SoleTranslator (the wrappers) is asked its
// Translate (plainTranslator).
//
// The packet's txreq is txRing's entry at the ring index of its LAST descriptor: the packet's
// own, or nil for descriptors that no txreq owns (never another's: the completion pass clears
// an entry before the txreq is reused). The loads of the entry and of the handle are race-free, as
// touchTx's: the producer wrote both before its tail store-release, which the pass loaded.

// packetTx returns the txreq of the packet whose LAST descriptor is at ring index last, or nil.
// hwMu held.
func (e *Engine) packetTx(last uint64) *TxReq { return e.txRing[last&e.mask] }

// soleOf returns the handle tx recorded for its descriptor k (k < desc.NumDesc), 0 if tx is nil.
func soleOf(tx *TxReq, k int) dma.Sole {
	if tx == nil {
		return 0
	}
	return tx.soles[k]
}

// plainTranslator is the dma.SoleTranslator of a mapper that is not one: its Translate, the
// handle unused (Device.hints).
type plainTranslator struct{ m dma.Mapper }

func (p plainTranslator) TranslateSole(addr dma.Addr, size int, access dma.Direction, _ dma.Sole) ([]byte, error) {
	return p.m.Translate(addr, size, access)
}
