package sdma

import (
	"sync/atomic"

	"github.com/gosdma/gosdma/desc"
)

// Flags are the txreq flags (SDMA_TXREQ_F_*).
type Flags uint16

const (
	FlagUrgent  Flags = 0x0001 // SDMA_TXREQ_F_URGENT: HEAD_TO_HOST and INT_REQ on the last descriptor
	FlagAHGCopy Flags = 0x0002 // SDMA_TXREQ_F_AHG_COPY: the chip stores this packet's header in an AHG entry
	FlagUseAHG  Flags = 0x0004 // SDMA_TXREQ_F_USE_AHG: the header is built by the chip from an AHG entry
	FlagVIP     Flags = 0x0010 // SDMA_TXREQ_F_VIP: raises the iowait priority only
)

// Status is the completion status handed to a txreq's callback (SDMA_TXREQ_S_*). gosdma, like
// hfi1's sdma.c, only ever produces StatusOK and StatusAborted.
type Status int

const (
	StatusOK        Status = 0 // SDMA_TXREQ_S_OK
	StatusSendError Status = 1 // SDMA_TXREQ_S_SENDERROR (inherited from ipath/qib; never produced)
	StatusAborted   Status = 2 // SDMA_TXREQ_S_ABORTED
	StatusShutdown  Status = 3 // SDMA_TXREQ_S_SHUTDOWN (inherited from ipath/qib; never produced)
)

// Callback is called once when a txreq completes, after its mappings are undone
// (hfi1: callback_t). It runs on the completion pass and must not block.
type Callback func(tx *TxReq, status Status)

// txreq life-cycle states held in TxReq.state.
const (
	txFree     uint32 = iota // never initialised, or cleaned after a failure: Init before use
	txBuilding               // initialised, adds in progress (tlen > 0) or closed (tlen == 0)
	txInFlight               // accepted by Send: owned by the engine until its callback runs
)

// TxReq is a transmit request (hfi1: struct sdma_txreq). Embed it first in your own type.
//
// A TxReq is owned by one goroutine at a time: the caller while it is built and after its
// callback ran, the engine between Send and the callback. It is not safe for concurrent use.
type TxReq struct {
	// next is the list link (hfi1: tx->list). Written and read by whoever owns the txreq: the
	// caller (through TxList) when it is not in flight, the engine (flush list) while it is.
	next *TxReq

	// Owner-only fields (the caller's while building, the engine's while in flight).
	descp       []desc.Desc             // current descriptor array: descs[:] or ext[:]; len = desc_limit
	descs       [desc.NumDesc]desc.Desc // inline descriptors (NUM_DESC)
	ext         []desc.Desc             // extended array, cap MAX_DESC, kept across re-use
	coalesceBuf []byte                  // bounce buffer past 63 descriptors, kept across re-use
	coalesceIdx int                     // bytes copied into coalesceBuf
	wait        *IOWait                 // set by Send (tx->wait)
	complete    Callback                // tx->complete
	dev         *Device                 // device whose mapper holds this txreq's mappings
	packetLen   uint16                  // packet length incl. coalesce pad (tx->packet_len)
	tlen        uint16                  // bytes still to add; 0 closes the packet (tx->tlen)
	numDesc     uint16                  // descriptors built (tx->num_desc)
	descLimit   uint16                  // usable descriptors before extending (tx->desc_limit)
	flags       Flags                   // tx->flags

	// state is the life-cycle (txFree/txBuilding/txInFlight). Written by the owner on Init/Clean,
	// by Send (CAS txBuilding→txInFlight, which rejects a double send) and by the completion pass
	// (txInFlight→txBuilding with numDesc 0, before the callback runs); read by both.
	state atomic.Uint32
}
