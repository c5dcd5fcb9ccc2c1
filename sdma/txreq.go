package sdma

import (
	"strconv"
	"sync/atomic"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/relaxed"
)

// Flags are the txreq flags (SDMA_TXREQ_F_*).
type Flags uint16

const (
	FlagUrgent  Flags = 0x0001 // SDMA_TXREQ_F_URGENT: HEAD_TO_HOST and INT_REQ on the last descriptor
	FlagAHGCopy Flags = 0x0002 // SDMA_TXREQ_F_AHG_COPY: the chip stores this packet's header in an AHG entry
	FlagUseAHG  Flags = 0x0004 // SDMA_TXREQ_F_USE_AHG: the header is built by the chip from an AHG entry
	FlagVIP     Flags = 0x0010 // SDMA_TXREQ_F_VIP: raises the iowait priority, as the first txreq parked on it (IOWait.SetPriority)

	flagsValid = FlagUrgent | FlagAHGCopy | FlagUseAHG | FlagVIP
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

// String names the status after its SDMA_TXREQ_S_* constant: "ok", "senderror", "aborted",
// "shutdown", or "Status(n)" for any other value.
func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusSendError:
		return "senderror"
	case StatusAborted:
		return "aborted"
	case StatusShutdown:
		return "shutdown"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Completer is told once when a txreq completes, after its mappings are undone
// (hfi1: callback_t). Complete runs on the completion pass, with the engine's locks held, and must
// not block. Device.Close, Shutdown and the events (Stop, Start, ...) of its engine called from it
// return ErrInvalid and change nothing, wherever the pass runs (the engine's goroutine, or the
// goroutine of a Stop, Start, InjectHalt, ProgressSchedule, SendWait, Shutdown, Close, Process or
// Poll): see Device.Close. Poll and Process must not be called from it. A Complete that panics cannot wedge the engine: the panic is
// recovered and recorded (Engine.CallbackError) and the pass goes on. One that calls
// runtime.Goexit releases the pass's locks: on the engine's goroutine the engine halts; on a
// caller's it goes on (see Sink).
//
// Implement it on a pointer to your own packet type, the one that holds the TxReq: storing a
// pointer in an interface does not allocate, so
//
//	func (p *packet) Complete(tx *sdma.TxReq, st sdma.Status) { /* p is your packet */ }
//	…
//	p.tx.Init(0, n, p)
//
// gets from the completion back to your type with no allocation and no unsafe. CompleterFunc
// adapts a function, for code where an allocation per packet does not matter (a func literal
// that captures variables is allocated each time it is created).
type Completer interface {
	Complete(tx *TxReq, status Status)
}

// CompleterFunc adapts a function to Completer.
type CompleterFunc func(tx *TxReq, status Status)

// Complete calls f(tx, status); a nil f does nothing, so a nil CompleterFunc given to Init is no
// callback. The test is here, paid only by completions through a CompleterFunc, not in Init on
// every packet.
func (f CompleterFunc) Complete(tx *TxReq, status Status) {
	if f != nil {
		f(tx, status)
	}
}

// moveState moves tx to state to: the one place a txreq changes hands between its caller and an
// engine (Engine.claim, release). Its other state writes are its own life cycle: Init (building)
// and clean (free). A store-release, not a CAS: the caller checked the state it leaves (ready, or
// its own claim), and a txreq is owned by one goroutine at a time, so no other goroutine writes
// the state meanwhile (the completion pass writes it only while the txreq is in flight, after
// its Send). Two goroutines sending one txreq at once break that ownership, as they would in the
// kernel (sdma_send_txreq takes no lock on the txreq): a data race the race detector reports, not
// an error Send returns; one Send after another is refused (ready: in flight).
func (tx *TxReq) moveState(to uint32) { relaxed.StoreRelease32(&tx.state, to) }

// txreq life-cycle states held in TxReq.state.
const (
	txFree     uint32 = iota // never initialised, cleaned, failed, or completed: Init before use
	txBuilding               // initialised, adds in progress (tlen > 0) or closed (tlen == 0)
	txInFlight               // accepted by Send: owned by the engine until its callback runs
)

// AHG limits checked by InitAHG (hfi1: the WARN_ON_ONCE of _sdma_txreq_ahgadd, and the widths of
// the HEADER_INDEX and HEADER_DWS fields).
const (
	MaxAHGEntry = desc.NumAHGEntries - 1 // highest AHG entry index (31)
	MaxAHGWords = desc.MaxAHGWords       // update words per packet (9)
	// MaxAHGHeaderLen is 64 bytes, the size of an AHG entry and of user_sdma's struct
	// hfi1_pkt_header: the kernel passes sizeof(hdr) and _sdma_txreq_ahgadd masks 64>>2 = 16 to
	// the 4-bit HEADER_DWS field as 0, which the chip reads as 16 dwords (as an AHG field length
	// of 16 is encoded as 0).
	MaxAHGHeaderLen = int(desc.HeaderDWsMask+1) << 2
)

// TxReq is a transmit request (hfi1: struct sdma_txreq). Embed it first in your own type.
//
// # Life cycle
//
// Init (or InitAHG) a TxReq, add exactly the announced number of bytes with the Add methods (the
// add that reaches the total closes the packet: pad, LAST, HEAD_TO_HOST/INT_REQ), then hand it to
// the engine's Send. The engine cleans it (unmaps everything the adds mapped) before it calls the
// callback; after the callback the TxReq may be initialised again.
//
// # Failures
//
// As in the kernel, an add that fails has already cleaned the txreq: every mapping it made is
// undone and the txreq must be initialised again before reuse (a further add reports that it was
// cleaned). Clean may be called any number of times, also after a failure. The exception is an
// add to a txreq in flight, which is refused and changes nothing.
//
// # Reuse and allocation
//
// The inline array holds 6 descriptors (NUM_DESC). Past them the txreq switches to an extended
// array of 64 (MAX_DESC), and past 63 it copies every further fragment into one coalesce buffer.
// Both are allocated on first need and kept across Init, so a txreq that is reused does not
// allocate in steady state.
//
// A TxReq is owned by one goroutine at a time: the caller while it is built and after its
// callback ran, the engine between Send and the callback. It is not safe for concurrent use.
// A TxReq must not be copied once initialised (its descriptor slice points into itself).
type TxReq struct {
	// The completion group: every field the completion pass touches when the txreq carries no
	// mapping (registered memory, daddr), in the first 64 bytes, so that a txreq's completion on
	// the engine's core pulls one or two of its cache lines over from the producer's (whose Init
	// and adds wrote them) and the next Init pulls back no more. The descriptors follow, read at
	// completion only when nmaps says there is something to unmap.

	// state is the life-cycle (txFree/txBuilding/txInFlight). Written by the owner on Init and
	// clean, by Send (store-release txBuilding→txInFlight after its ready check, which rejects
	// a txreq already in flight; moveState) and by the completion pass (clean, txInFlight→txFree,
	// before the callback runs); read by both.
	state atomic.Uint32

	// Owner-only fields (the caller's while building, the engine's while in flight).
	numDesc    uint16                       // descriptors built (tx->num_desc)
	descLimit  uint16                       // usable descriptors before extending (tx->desc_limit); NumDesc iff descp is descs (reset)
	packetLen  uint16                       // packet length incl. coalesce pad (tx->packet_len)
	tlen       uint16                       // bytes still to add; 0 closes the packet (tx->tlen)
	flags      Flags                        // tx->flags
	nregs      uint8                        // entries of regs in use
	coalescing bool                         // coalesceBuf is in use for this packet (tx->coalesce_buf != NULL)
	nmaps      uint8                        // descriptors the adds mapped (MapSingle, MapPage): what completion unmaps
	wait       *IOWait                      // set by Send (tx->wait), nil again at completion: nil while not in flight
	complete   Completer                    // tx->complete
	regs       [maxTxRegs]*dma.Registration // registrations this packet's descriptors use, each Acquired once (register.go)

	dev         *Device                 // device whose mapper holds this txreq's mappings; set by the first add
	descp       []desc.Desc             // current descriptor array: descs[:] or ext; nil until the first Init
	descs       [desc.NumDesc]desc.Desc // inline descriptors (NUM_DESC)
	coalesceIdx int                     // bytes copied into coalesceBuf (tx->coalesce_idx)

	// next is the list link (hfi1: tx->list). Written and read by whoever owns the txreq: the
	// caller (through TxList) when it is not in flight, the engine (flush list) while it is.
	next *TxReq

	// soles are the dma.Sole handles of the first NumDesc descriptors (0: not a sole mapping, or
	// none): addDesc records each, AddKVAddr's mapping's from MapSingleSole, and the unmaps at
	// completion and clean pass a MapSingle descriptor's to the mapper (hfi1 keeps no such thing:
	// the handle lets the unmap free the mapper's entry with a store instead of a compare-and-swap,
	// dma.SoleMapper). Descriptors past NumDesc are mapped with MapSingle. Owner-only. On the line
	// of coalesceIdx and next (written by the coalescing adds and the lists), after the descriptors
	// they go with.
	soles       [desc.NumDesc]dma.Sole
	ext         []desc.Desc // extended array, len MAX_DESC, kept across re-use
	coalesceBuf []byte      // bounce buffer past 63 descriptors, kept across re-use
}

// TxError reports a refused txreq operation. It matches its sentinel (Err: ErrNoData,
// ErrMsgSize, ErrMapping, ErrNoDesc or ErrInvalid) with errors.Is, and also the underlying
// cause (a dma error, for a mapping failure) when there is one.
type TxError struct {
	Op     string // the method: "Init", "AddPage", "Send", …
	Reason string // what was wrong, e.g. "length 70 beyond the 64 bytes left"
	Err    error  // the sentinel
	Cause  error  // the underlying error, or nil
}

// Error returns "sdma: OP: REASON", then ": " and the cause, if any.
func (e *TxError) Error() string {
	s := "sdma: " + e.Op + ": " + e.Reason
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the sentinel and the cause, for errors.Is and errors.As.
func (e *TxError) Unwrap() []error { return sentinelAnd(e.Err, e.Cause) }

func txErr(op string, sentinel error, reason string) error {
	return &TxError{Op: op, Reason: reason, Err: sentinel}
}

func itoa(n int) string { return strconv.Itoa(n) }

// Init initialises tx for a packet of tlen bytes without AHG (hfi1: sdma_txinit). c, which may
// be nil, is told once when the packet completes (see Completer).
//
// flags may hold FlagUrgent, FlagVIP and FlagAHGCopy (which stores this packet's header in AHG
// entry 0; use InitAHG for another entry). FlagUseAHG needs update words: use InitAHG.
//
// tlen 0 is ErrNoData, over 16383 ErrMsgSize (as the kernel's -ENODATA, -EMSGSIZE). Unlike the
// kernel, unknown flags and a txreq in flight are refused (ErrInvalid). A failed Init changes
// nothing. A txreq that is built but was never sent is cleaned first (the kernel would leak its
// mappings).
func (tx *TxReq) Init(flags Flags, tlen int, c Completer) error {
	// The common case in one test: a length in 1..MaxPktSize, no AHG flag, a txreq neither in
	// flight nor built (nothing to clean). initAHG checks and says the rest.
	if uint(tlen-1) >= desc.MaxPktSize || flags&^(FlagUrgent|FlagVIP) != 0 || tx.numDesc != 0 ||
		tx.state.Load() == txInFlight {
		return tx.initAHG("Init", flags, tlen, AHG{}, c)
	}
	tx.reset(flags, tlen, c)
	tx.descs[0] = desc.Desc{Qw0: desc.FirstFlag}
	relaxed.StoreRelease32(&tx.state, txBuilding) // the owner's own write: release, not seq-cst
	return nil
}

// AHG says where InitAHG's header comes from (the ahg_entry, num_ahg, ahg and ahg_hlen arguments
// of sdma_txinit_ahg).
type AHG struct {
	// Entry is the AHG entry, 0..31: the one FlagAHGCopy stores the header in, or the one
	// FlagUseAHG builds it from.
	Entry int
	// Words are the update words (FlagUseAHG only), 1..9, built with desc.AHGUpdate.
	Words []uint32
	// HeaderLen is the header's length in bytes (FlagUseAHG only), a multiple of 4 in 8..64.
	HeaderLen int
}

// InitAHG initialises tx for a packet of tlen bytes using the chip's automatic header generation
// (hfi1: sdma_txinit_ahg).
//
// With FlagAHGCopy the chip stores this packet's header in AHG entry ahg.Entry (0..31);
// ahg.HeaderLen is ignored, and so are ahg.Words if FlagUseAHG is set too (FlagAHGCopy wins over
// FlagUseAHG, as in the kernel); words with FlagAHGCopy alone are refused, as below.
//
// With FlagUseAHG the header comes from entry ahg.Entry, ahg.HeaderLen bytes long (a multiple of
// 4, 8..64), patched by ahg.Words (1..9 update words built with desc.AHGUpdate). The first
// descriptor becomes a zero-length header descriptor holding the mode, entry, header dwords and
// word 0; words 1..4 and 5..8 go into one or two edit descriptors (modes UPDATE1, UPDATE2,
// UPDATE3), as _sdma_txreq_ahgadd lays them out. tlen is then the payload only.
//
// Unlike the kernel, which only WARNs or masks, out-of-range AHG arguments are refused with
// ErrInvalid: an entry over 31, zero or more than 9 words with FlagUseAHG, a header length that
// is not a multiple of 4, is 4, 0 or over 64, and words given without FlagUseAHG. Other errors
// and behaviour as Init.
func (tx *TxReq) InitAHG(flags Flags, tlen int, ahg AHG, c Completer) error {
	return tx.initAHG("InitAHG", flags, tlen, ahg, c)
}

func (tx *TxReq) initAHG(op string, flags Flags, tlen int, a AHG, c Completer) error {
	ahgEntry, ahg, ahgHlen := a.Entry, a.Words, a.HeaderLen
	if tlen == 0 {
		return txErr(op, ErrNoData, "zero-length packet")
	}
	if tlen < 0 {
		return txErr(op, ErrInvalid, "negative length "+itoa(tlen))
	}
	if tlen > desc.MaxPktSize {
		return txErr(op, ErrMsgSize, "length "+itoa(tlen)+" over "+itoa(desc.MaxPktSize))
	}
	if flags&^flagsValid != 0 {
		return txErr(op, ErrInvalid, "unknown flags "+strconv.FormatUint(uint64(flags&^flagsValid), 16))
	}
	useAHG := flags&FlagAHGCopy == 0 && flags&FlagUseAHG != 0
	if flags&(FlagAHGCopy|FlagUseAHG) != 0 && (ahgEntry < 0 || ahgEntry > MaxAHGEntry) {
		return txErr(op, ErrInvalid, "AHG entry "+itoa(ahgEntry)+" out of 0.."+itoa(MaxAHGEntry))
	}
	switch {
	case useAHG && (len(ahg) == 0 || len(ahg) > MaxAHGWords):
		return txErr(op, ErrInvalid, strconv.Itoa(len(ahg))+" AHG update words, want 1.."+itoa(MaxAHGWords))
	case useAHG && (ahgHlen&3 != 0 || ahgHlen == 4 || ahgHlen <= 0 || ahgHlen > MaxAHGHeaderLen):
		return txErr(op, ErrInvalid, "AHG header length "+itoa(ahgHlen)+", want a multiple of 4 in 8.."+itoa(MaxAHGHeaderLen))
	case flags&FlagUseAHG == 0 && len(ahg) != 0:
		return txErr(op, ErrInvalid, "AHG update words without FlagUseAHG")
	}
	if tx.state.Load() == txInFlight {
		return txErr(op, ErrInvalid, "txreq in flight")
	}
	if tx.numDesc != 0 {
		tx.clean() // built but never sent: do not leak its mappings
	}

	tx.reset(flags, tlen, c)
	tx.descs[0] = desc.Desc{Qw0: desc.FirstFlag}
	if flags&FlagAHGCopy != 0 {
		tx.descs[0].Qw1 |= uint64(ahgEntry)<<desc.HeaderIndexShift |
			uint64(desc.AHGCopy)<<desc.HeaderModeShift
	} else if useAHG {
		tx.ahgAdd(ahg, ahgEntry, ahgHlen)
	}
	relaxed.StoreRelease32(&tx.state, txBuilding) // the owner's own write: release, not seq-cst
	return nil
}

// reset is Init's and initAHG's setting of the fields, after their checks and the clean of a
// txreq built before (numDesc is 0): the descriptors are the inline ones again, nothing is
// mapped, tlen bytes are to come. numDesc is 0 and so is nmaps (clean zeroes both, addDesc counts
// both); wait is nil (the completion clears it, and a txreq not in flight has none). It leaves coalescing and coalesceIdx alone: with numDesc 0 the
// txreq is not coalescing (extend starts it at 63 descriptors, and clean, the only way back to 0,
// stops it), and coalesceIdx is read only while coalescing and set to 0 when it starts.
func (tx *TxReq) reset(flags Flags, tlen int, c Completer) {
	if tx.descLimit != desc.NumDesc {
		// First Init (descLimit 0), or extended (clean keeps ext in place): extend is the one
		// other writer of descp, and sets descLimit past NumDesc as it switches to ext. So
		// descLimit == NumDesc says that descp is the inline array already.
		tx.descp = tx.descs[:]
		tx.descLimit = desc.NumDesc
	}
	tx.flags = flags
	tx.complete = c // a nil CompleterFunc is called and does nothing (CompleterFunc.Complete)
	tx.dev = nil
	tx.packetLen = uint16(tlen)
	tx.tlen = uint16(tlen)
}

// ahgAdd lays out the AHG header descriptor and its edit descriptors (hfi1: _sdma_txreq_ahgadd).
// The arguments were checked by initAHG.
func (tx *TxReq) ahgAdd(ahg []uint32, entry, hlen int) {
	var mode desc.HeaderMode
	switch n := len(ahg); {
	case n == 1:
		mode = desc.AHGApplyUpdate1
	case n <= 5:
		mode = desc.AHGApplyUpdate2
	default:
		mode = desc.AHGApplyUpdate3
	}
	tx.numDesc = 1 + uint16(desc.EditDescs(mode))
	for i := 1; i < int(tx.numDesc); i++ {
		tx.descs[i] = desc.Desc{}
	}
	tx.descs[0].Qw1 |= uint64(entry)<<desc.HeaderIndexShift |
		(uint64(hlen>>2)&desc.HeaderDWsMask)<<desc.HeaderDWsShift | // 64 bytes: 16 dwords, encoded 0
		uint64(mode)<<desc.HeaderModeShift |
		uint64(ahg[0])<<desc.Update1Shift
	// Words 1..4 go to descs[1] and 5..8 to descs[2]: qw0 low, qw0 high, qw1 low, qw1 high.
	for i, w := range ahg[1:] {
		d := &tx.descs[1+i/4]
		shift := uint(i&1) * 32
		if i&2 == 0 {
			d.Qw0 |= uint64(w) << shift
		} else {
			d.Qw1 |= uint64(w) << shift
		}
	}
}

// Clean undoes every mapping the adds made and empties tx (hfi1: sdma_txclean). It may be called
// any number of times, on a txreq that is built, closed, failed or never initialised; afterwards
// tx must be initialised again before reuse. Memory added with AddDAddr stays mapped: it is the
// caller's. A txreq in flight is refused with ErrInvalid and nothing is done; the engine cleans it
// before calling its callback.
func (tx *TxReq) Clean() error {
	if tx.state.Load() == txInFlight {
		return txErr("Clean", ErrInvalid, "txreq in flight")
	}
	tx.clean()
	return nil
}

// clean is __sdma_txclean without a state check: it unmaps every SINGLE and PAGE descriptor
// (the first one by its type too, but not the AHG edit descriptors, whose qw1 holds update words;
// it reads no descriptor when nmaps says none was mapped),
// drops the coalesce buffer's use (its mapping, once made, is one of the SINGLE descriptors),
// sets numDesc to 0 and the state to txFree. The extended array and the coalesce buffer are kept
// for reuse. It is idempotent.
//
// An unmap error cannot be returned here (the kernel's unmaps return nothing): it would mean the
// mapping was already gone, a bug in this package or the mapper. It is counted instead
// (Device.UnmapErrors), and the tests require the count to stay 0; they also wrap the mapper in a
// dma.Counting and require that every map is undone exactly once.
func (tx *TxReq) clean() {
	if tx.numDesc == 1 && tx.nmaps == 1 && tx.soles[0] != 0 {
		// A packet of one descriptor that an add of this packet mapped (nmaps counts the adds'
		// mappings; with numDesc 1 it is descriptor 0, not an InitAHG head, and its add wrote
		// soles[0], so the handle is this mapping's, not an earlier packet's left as the slot's
		// hint) as a sole mapping (only AddKVAddr's MapSingle records a handle): the loop's one
		// step below, without the loop. descp is the inline array (see reset: numDesc < NumDesc).
		// progressPass's pass of one txreq has a copy of this case: keep the two alike.
		d := tx.descs[0]
		if tx.dev.sole.UnmapSingleSole(dma.Addr(d.Addr()), d.Len(), dma.ToDevice, tx.soles[0]) != nil {
			tx.dev.unmapErrs.Add(1)
		}
	} else if tx.nmaps != 0 {
		// Each mapped descriptor's unmap (hfi1: sdma_unmap_desc), straight to the mapper for a
		// sole kvaddr mapping (Device.unmap's first case, without its call), else through
		// Device.unmap: a call per descriptor less on every completion. nmaps > 0 means an add
		// mapped a descriptor: numDesc > 0, and dev is set (addable and checkAdd set it before
		// any mapping).
		dev, ds := tx.dev, tx.descp[:tx.numDesc]
		for i := 0; i < len(ds); i++ {
			// Past the first descriptor's AHG edit descriptors, which only InitAHG's
			// APPLY_UPDATE modes lay out, with FlagUseAHG.
			if i == 1 && tx.flags&FlagUseAHG != 0 {
				if i += desc.EditDescs(ds[0].HeaderMode()); i >= len(ds) {
					break
				}
			}
			d := ds[i]
			mt, h := d.MapType(), tx.soleOf(i)
			if h != 0 && mt == desc.MapSingle {
				if dev.sole.UnmapSingleSole(dma.Addr(d.Addr()), d.Len(), dma.ToDevice, h) != nil {
					dev.unmapErrs.Add(1)
				}
				continue
			}
			_ = dev.unmap(mt, dma.Addr(d.Addr()), d.Len(), h)
		}
	}
	tx.numDesc, tx.nmaps = 0, 0
	if tx.nregs != 0 {
		tx.releaseRegs()
	}
	if tx.coalescing {
		tx.coalescing = false
		tx.coalesceIdx = 0 // not in the completion group: written only when it was in use
	}
	// descLimit is left as it is: a txreq in txFree takes no add (addable, checkAdd), and the
	// next Init sets it (reset).
	relaxed.StoreRelease32(&tx.state, txFree) // the owner's own write: release, not seq-cst
}

// soleOf returns the Sole handle of descriptor i (0 past the first NumDesc).
func (tx *TxReq) soleOf(i int) dma.Sole {
	if i < desc.NumDesc {
		return tx.soles[i]
	}
	return 0
}

// ready reports whether tx may be sent: nil iff it is initialised, closed (all tlen bytes added,
// so at least one descriptor) and not in flight; else a *TxError matching ErrInvalid saying why.
func (tx *TxReq) ready() error {
	if tx == nil {
		return txErr("Send", ErrInvalid, "nil txreq")
	}
	switch tx.state.Load() {
	case txInFlight:
		return txErr("Send", ErrInvalid, "txreq in flight")
	case txFree:
		if tx.descp == nil {
			return txErr("Send", ErrInvalid, "txreq uninitialised")
		}
		return txErr("Send", ErrInvalid, "txreq cleaned (failed, completed or Clean): Init before reuse")
	}
	if tx.tlen != 0 {
		return txErr("Send", ErrInvalid, "txreq unfinished: "+itoa(tx.remaining())+" bytes missing")
	}
	if tx.numDesc == 0 {
		return txErr("Send", ErrInvalid, "txreq has no descriptors")
	}
	return nil
}

// hwDescs returns the descriptors to write to the ring and how many AHG edit descriptors follow
// the first one (they keep their raw qw1: no generation stamp). Valid while tx is ready or in
// flight.
func (tx *TxReq) hwDescs() (ds []desc.Desc, skip int) {
	ds = tx.descp[:tx.numDesc]
	if tx.flags&FlagUseAHG != 0 { // only InitAHG's APPLY_UPDATE modes lay out edit descriptors
		skip = desc.EditDescs(ds[0].HeaderMode())
	}
	return ds, skip
}

// NumDesc returns the number of descriptors built so far, AHG header and edit descriptors and
// the pad descriptor included (hfi1: tx->num_desc, sdma_txreq_built). It is 0 after a clean.
func (tx *TxReq) NumDesc() int { return int(tx.numDesc) }

// Descs returns the descriptors built so far: the software copy, with the mapping type in the
// generation field (desc.MapNone, MapSingle, MapPage). The slice aliases tx and is read-only; it
// is valid until tx is sent, cleaned or initialised again. For tests and tools.
func (tx *TxReq) Descs() []desc.Desc {
	if tx.descp == nil {
		return nil
	}
	return tx.descp[:tx.numDesc:tx.numDesc]
}

// Remaining returns the bytes still to add before the packet closes (0 once closed). While the
// txreq is coalescing this is what is still to be copied.
func (tx *TxReq) Remaining() int { return tx.remaining() }

// pktLen returns the packet length in bytes as the descriptors will carry it without the pad:
// tlen as given to Init (payload only with AHG), plus the coalesce buffer's pad once it is mapped
// (tx->packet_len).
func (tx *TxReq) pktLen() int { return int(tx.packetLen) }

func (tx *TxReq) remaining() int {
	if tx.coalescing {
		return int(tx.tlen) - tx.coalesceIdx
	}
	return int(tx.tlen)
}
