package ring

import (
	"runtime"
	"sync/atomic"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/internal/cacheline"
	"github.com/gosdma/gosdma/internal/relaxed"
)

// Index encoding.
//
// The ring has size = 2^shift slots, 64 <= size <= 32768. Every index (reserved, tail, hwHead,
// swHead) is a free-running uint64 that only ever increases (modulo 2^64); it is never masked when
// stored. The slot of index i is i & mask (mask = size-1), and the pass of the ring that index i
// belongs to is i >> shift. The hardware's 2-bit generation of index i is that pass mod 4:
//
//	gen(i) = (i >> shift) & 3
//
// and is stamped into qw1 bits 3:2 of the descriptor written at i (hfi1: add_gen in submit_tx,
// computed per slot, so it can change in the middle of a batch). Because 2^64 is a multiple of
// 4*size, the generation stays continuous across the uint64 wrap: the index after 2^64-1 is 0, in
// slot 0, generation 0, one pass after generation 3.
//
// Distances are differences modulo 2^64: the ring holds tail - swHead descriptors, and
//
//	swHead <= hwHead <= tail <= reserved <= swHead + size - 1
//
// holds at all times in modular order (a <= b meaning b - a < 2^63). The ring therefore never
// holds more than size-1 descriptors (hfi1: sdma_descq_freecnt's "- 1"), so tail - swHead never
// reaches size and a full ring is never confused with an empty one.
//
// A slot is owned, in turn, by: the producer that reserved it (until its Publish moves the tail
// past it), the hardware model (until SetHWHead moves hwHead past it), the completion pass (until
// SetSwHead moves swHead past it), and then it is free for a later reservation. Each hand-over is
// a store-release of an index that the next owner's atomic load synchronizes with (a sync/atomic
// store, or on amd64 a plain MOV, which x86-TSO makes a release: package doc, O5), so the slot's
// plain reads and writes are ordered.

// Ring sizes (hfi1: sdma_descq_cnt "must be a power of 2 >= 64 <= 32768", SDMA_DESCQ_CNT 2048).
const (
	MinSize     = 64
	MaxSize     = 32768
	DefaultSize = 2048
)

// lineSize separates groups of fields written by different parties (internal/cacheline.Pad,
// the module's one definition).
const lineSize = cacheline.Pad

// Ring is a power-of-two ring of 16-byte descriptors with free-running indices.
//
// Concurrency: Reserve, Write, Publish and Enqueue are safe for any number of concurrent
// producers. EnqueueSP is for a single producer with no other producer running. Tail, Slot,
// SetHWHead (the hardware model) are for one consumer goroutine at a time. BeginWrite, SetSwHead
// and EndWrite (the completion pass) are for one writer at a time, serialised by the caller.
// The read-only accessors (Size, SwHead, HeadSeq, FreeCnt, ...) are safe from any goroutine.
// Reset requires quiescence. A Ring must not be copied.
//
// The zero Ring is not a ring: make rings with New. A producer's call on the zero Ring (Reserve,
// ReserveWrite, Enqueue, EnqueueSP) is refused with an error matching ErrSize.
type Ring struct {
	_ noCopy

	// Read-mostly: set by New and never written again; read by everyone without
	// synchronisation (the creating goroutine publishes the Ring by handing out the pointer).
	// base and closed, below, change only on Close, Open and Reset.
	slots []desc.Desc // the descq: size slots, 64-byte aligned (see alignedSlots)
	mask  uint64      // size - 1 (hfi1: sdma_mask)
	shift uint        // log2(size) (hfi1: sdma_shift)
	size  int         // number of slots (hfi1: descq_cnt)

	// base is what the reservation word adds to the index: 0 from New, and moved by every Reset
	// so that the words of the new epoch (indices from Reset's start) lie past every word handed
	// out before it. A word is therefore never seen twice, however the indices restart: a
	// producer that loaded a word before a Close cannot succeed with its CAS after the Reset and
	// Open that follow (no ABA), and a Reserve whose CAS succeeds computed its room from indices
	// of the epoch it reserved in. Written only by Reset (and New); read by the producers (after
	// the word) and the readers of the word. Read-mostly, so it lives on the read-mostly line.
	base atomic.Uint64
	// closed is set by Close and cleared by Open: Reserve's slow path, which the closed word
	// always takes, reads it to refuse with ErrClosed instead of retrying. Written by Close
	// (CAS false to true: of racing Closes, the winner alone marks the word) and Open (their
	// callers serialise Open with them and Reset with both); read by producers and by a Close
	// that lost the CAS. Read-mostly.
	closed atomic.Bool
	// epoch counts the Resets (Epoch, ReserveIn): Reset adds 1 before it stores the new
	// epoch's reservation word, and ReserveIn loads it after the word, so a reservation whose CAS
	// succeeds was made in the epoch it loaded (the argument of reserve). Written only by Reset;
	// read by ReserveIn's producers and Epoch. Read-mostly.
	epoch atomic.Uint64

	_ [lineSize]byte

	// reserved is the reservation word: the next index to hand out plus base ([tail, that
	// index) is reserved but not yet published), plus closedMark while the ring is closed.
	// Written by producers (Reserve: CAS; EnqueueSP: store-release), by Close (atomic add of
	// closedMark), Open and Reset; read by producers and by FreeCnt, Empty and Reserved (atomic
	// load, see resIndex).
	reserved atomic.Uint64
	// headCache is a lower bound of swHead kept on the producers' line, so that Reserve reads
	// the consumer's line only when the cached room is not enough (DPDK's cons-tail cache idea).
	// Written by producers (store-release of a freshly loaded swHead; a racing older store only
	// lowers it, which is conservative) and by Reset; read by producers (atomic load).
	headCache atomic.Uint64

	_ [lineSize]byte

	// tail is the publication index (hfi1: descq_tail / the tail CSR): slots before it are
	// fully written. Written by producers in reservation order (the store-release that hands
	// [old, new) to the hardware model: Publish's is seq-cst, PublishRelease's and EnqueueSP's
	// are not, O6); read by the
	// hardware model (Tail: atomic load-acquire) and by waiting publishers.
	tail atomic.Uint64

	_ [lineSize]byte

	// hwHead is the hardware head (hfi1: *head_dma, the chip's head write-back): slots before
	// it have been processed by the hardware model. Written by the hardware model (SetHWHead,
	// Dequeue: store-release, not seq-cst); read by the completion pass (HWHead: load-acquire).
	hwHead atomic.Uint64
	// tailCache is Dequeue's last view of tail, kept on the consumer's line so that Dequeue
	// loads the producers' tail line only when what it saw last time cannot fill the request
	// (the consumer-side twin of headCache). Plain field: read and written only by Dequeue (one at a
	// time, by its contract) and by New/Reset (quiescent). It is a lower bound of tail; Dequeue
	// reloads whenever it says nothing is available or is inconsistent with hwHead (another
	// consumer API moved hwHead past it, or Reset moved every index).
	tailCache uint64

	_ [lineSize]byte

	// swHead is the software head (hfi1: descq_head): slots before it are free. Written only by
	// the completion pass inside a seq write section (SetSwHead, Dequeue: store-release, not
	// seq-cst, which hands the slots back to producers); read by producers for free space (Reserve,
	// FreeCnt: atomic load-acquire) and by anyone (SwHead).
	swHead atomic.Uint64
	// seq is the head seqcount (hfi1: head_lock.seqcount). Written by the completion pass (odd
	// while in a pass); read by HeadSeq/HeadRetry (the sleepers' sdma_progress snapshot).
	seq SeqCount

	_ [lineSize]byte
}

// New returns an empty ring of size slots, all indices 0. size 0 means DefaultSize; any other
// size must be a power of two in [MinSize, MaxSize], else the error matches ErrSize.
// (hfi1: sdma_init's descq allocation; the kernel silently falls back to the default instead.)
func New(size int) (*Ring, error) { return newAt(size, 0) }

// newAt is New with every index starting at start, so that tests can begin just below a
// generation change, 2^32 or 2^64. Unexported: only tests need it.
func newAt(size int, start uint64) (*Ring, error) {
	if size == 0 {
		size = DefaultSize
	}
	if size < MinSize || size > MaxSize || size&(size-1) != 0 {
		return nil, errorf("New", ErrSize, "size %d: want a power of two in [%d, %d]", size, MinSize, MaxSize)
	}
	shift := uint(0)
	for 1<<shift < size {
		shift++
	}
	r := &Ring{
		slots: alignedSlots(size),
		mask:  uint64(size - 1),
		shift: shift,
		size:  size,
	}
	r.setIndices(start)
	return r, nil
}

// setIndices sets every index to start, keeping the ring closed if it is. The reservation word
// is stored first, closed if the ring is: a producer that loads it meanwhile is refused.
func (r *Ring) setIndices(start uint64) {
	w := start + r.base.Load()
	if r.closed.Load() {
		w += closedMark
	}
	r.reserved.Store(w)
	r.headCache.Store(start)
	r.tail.Store(start)
	r.hwHead.Store(start)
	r.swHead.Store(start)
	r.tailCache = start
}

// Size returns the number of slots (hfi1: descq_cnt). The capacity is Size()-1.
func (r *Ring) Size() int { return r.size }

// Mask returns Size()-1 (hfi1: sdma_mask).
func (r *Ring) Mask() uint64 { return r.mask }

// Shift returns log2(Size()) (hfi1: sdma_shift).
func (r *Ring) Shift() uint { return r.shift }

// Generation returns the generation expected in the slot of index i: (i >> Shift()) & 3
// (hfi1: add_gen).
func (r *Ring) Generation(i uint64) desc.Generation {
	return desc.Generation(i >> (r.shift & 63) & desc.GenerationMask) // shift < 64: no oversized-shift fixup
}

// ---- producers ----

// Reservation is a producer's claim on n consecutive slots [Start(), Start()+Len()), returned by
// Reserve: the permission to Write them and then Publish them, which nothing else can name. It is
// owned by the goroutine that reserved it and is not safe for concurrent use; do not copy it
// once written to (a copy would not know it was published).
type Reservation struct {
	r         *Ring
	start     uint64
	n         int
	published bool
}

// Reserve reserves n consecutive slots for the caller: it Writes them through the returned
// Reservation and then Publishes it. Lock-free: a CAS on the reservation index, which many
// producers may run at once. The room is Size()-1 - (reserved - swHead) (hfi1:
// sdma_descq_freecnt, checked against tx->num_desc in sdma_send_txreq).
//
// Errors: ErrFull (bare, no allocation) when the room is less than n right now, nothing changed;
// ErrClosed (bare) when the ring is closed (Close); ErrTooBig when n > Size()-1; ErrSize when
// n < 1.
func (r *Ring) Reserve(n int) (Reservation, error) {
	if err := r.checkBatch("Reserve", n); err != nil {
		return Reservation{}, err
	}
	start, err := r.reserve(uint64(n))
	if err != nil {
		return Reservation{}, err
	}
	return Reservation{r: r, start: start, n: n}, nil
}

// ReserveWrite is Reserve(len(ds)) followed by Write(0, ds, skip), in one call: the returned
// reservation holds ds, written and stamped, and only waits to be published (Publish or
// PublishRelease). Errors as for Reserve, named ReserveWrite; nothing is reserved or written then.
// It is the send path of one packet (sdma's Send): the common case, a batch of up to writeFewMax
// descriptors, room seen in the producers' cached head and a CAS that succeeds at once, runs with
// no call, its descriptors written with plain stores (writeFew's, with the first descriptor out of
// the loop: a packet of one runs none) instead of the assembly writer's call; anything else is
// reserveWrite, out of line.
func (r *Ring) ReserveWrite(ds []desc.Desc, skip int) (Reservation, error) {
	if un := uint64(len(ds)); un-1 < writeFewMax { // 1..3 descriptors (Size()-1 >= 63)
		if start, ok := r.tryReserve(un); ok {
			// writeFew, the first descriptor (always stamped) out of the loop.
			// g is the generation's bits as stamped into qw1, moved on past the ring's end.
			slots, mask := r.slots, r.mask
			g := (start >> (r.shift & 63) & desc.GenerationMask) << desc.GenerationShift
			j := start & mask
			d := ds[0]
			d.Qw1 = d.Qw1&^desc.GenerationSMask | g
			slots[j] = d
			for k := 1; k < len(ds); k++ {
				if j = (j + 1) & mask; j == 0 {
					g = (g + 1<<desc.GenerationShift) & desc.GenerationSMask
				}
				d = ds[k]
				if k > skip {
					d.Qw1 = d.Qw1&^desc.GenerationSMask | g
				}
				slots[j] = d
			}
			return Reservation{r: r, start: start, n: len(ds)}, nil
		}
	}
	return r.reserveWrite(ds, skip)
}

// reserveWrite is ReserveWrite past its common case (a longer batch, or a reservation that its
// first pass did not make): the checks, reserve and the write, out of line so that the common
// case keeps nothing live across a call.
//
//go:noinline
func (r *Ring) reserveWrite(ds []desc.Desc, skip int) (Reservation, error) {
	n := len(ds)
	un := uint64(n)
	if un-1 >= r.mask { // n < 1 or n > Size()-1
		return Reservation{}, r.batchErr("ReserveWrite", n)
	}
	start, err := r.reserve(un)
	if err != nil {
		return Reservation{}, err
	}
	if n <= writeFewMax {
		r.writeFew(start, ds, skip)
	} else {
		r.write(start, ds, skip)
	}
	return Reservation{r: r, start: start, n: n}, nil
}

// writeFewMax is the largest batch written with plain stores (writeFew): a packet's header,
// payload and pad.
const writeFewMax = 3

// tryReserve is reserve's common case, one pass that inlines: the cached head shows room for un
// and the CAS succeeds. false says nothing (reserve tells): nothing was reserved. The argument
// is reserve's: a successful CAS means that the word did not change since it was loaded, so
// base and the cached head, loaded after it, are of its epoch; a closed word never shows room.
func (r *Ring) tryReserve(un uint64) (uint64, bool) {
	w := r.reserved.Load()
	res := w - r.base.Load()
	if used := res - r.headCache.Load(); used <= r.mask && r.mask-used >= un && r.reserved.CompareAndSwap(w, w+un) {
		return res, true
	}
	return 0, false
}

// Epoch returns the ring's epoch: a count of its Resets. A caller that makes several
// reservations that must all land in one epoch (sdma's SendList: a list the sw clean must not
// split) reads it once and reserves with ReserveIn.
func (r *Ring) Epoch() uint64 { return r.epoch.Load() }

// ReserveIn is Reserve in the ring's epoch epoch (Epoch) only: ErrReset (bare) if the ring was
// Reset since, nothing changed; so every reservation ReserveIn made with one epoch lies in the
// same run of indices, none after a Reset. An epoch ahead of the ring's (one Epoch never
// returned) is refused too, with an *Error matching ErrReset that says so. Errors otherwise as
// Reserve's, named ReserveIn.
func (r *Ring) ReserveIn(n int, epoch uint64) (Reservation, error) {
	if err := r.checkBatch("ReserveIn", n); err != nil {
		return Reservation{}, err
	}
	if cur := r.epoch.Load(); epoch > cur { // epochs only grow; ^0 is reserve's anyEpoch
		return Reservation{}, errorf("ReserveIn", ErrReset, "epoch %d is ahead of the ring's %d: not an epoch Epoch returned", epoch, cur)
	}
	start, err := r.reserveIn(uint64(n), epoch)
	if err != nil {
		return Reservation{}, err
	}
	return Reservation{r: r, start: start, n: n}, nil
}

// anyEpoch is reserve's epoch for a reservation in whatever epoch the ring is in (Reserve).
const anyEpoch = ^uint64(0)

// reserve is Reserve after the batch check: it claims un slots and returns the first index, or
// ErrFull, or ErrClosed.
func (r *Ring) reserve(un uint64) (uint64, error) { return r.reserveIn(un, anyEpoch) }

// reserveIn is reserve in epoch only (anyEpoch: any), else ErrReset. The epoch is loaded after
// the word, as base is: a successful CAS means the word did not change since it was loaded, so no
// Reset stored a word in between, and the epoch loaded after it (Reset adds to it before it stores
// the word) is the word's.
//
// The word w it CASes is the index plus base (see Ring.base): a successful CAS means that the
// word did not change since it was loaded, so no Close, Reset or Open came in between (they
// change it, and no later word equals an earlier one), and base, the cached head and swHead,
// loaded after w, are of w's epoch. The cached head is refreshed only after a successful CAS:
// until its Publish no Reset can run (the closer waits for the tail to reach the reservations,
// ours included), so a head of an earlier epoch is never stored over a Reset's.
func (r *Ring) reserveIn(un, epoch uint64) (uint64, error) {
	capacity := r.mask // size - 1
	for {
		w := r.reserved.Load()
		res := w - r.base.Load()
		if epoch != anyEpoch && r.epoch.Load() != epoch {
			return 0, ErrReset
		}
		head := r.headCache.Load()
		refresh := false
		if used := res - head; used > capacity || capacity-used < un {
			// The cached head says no room (or was loaded after a newer reservation made
			// res look stale, or the word is closed): load the consumer's line.
			if r.closed.Load() {
				return 0, ErrClosed // Close sets the flag before it marks the word
			}
			head = r.swHead.Load()
			used = res - head
			if used > capacity {
				// res is stale: another producer reserved and the consumer freed past it
				// between the two loads (or an Open is storing the word). Reload.
				continue
			}
			if capacity-used < un {
				if r.reserved.Load() != w {
					continue // the view changed under us; look again before saying full
				}
				return 0, ErrFull
			}
			refresh = head != r.headCache.Load()
		}
		if r.reserved.CompareAndSwap(w, w+un) {
			if refresh {
				// A release store (a plain MOV on amd64, O5): a racing producer's older head
				// may overwrite it, which only lowers the cache.
				relaxed.StoreRelease64(&r.headCache, head)
			}
			return res, nil
		}
	}
}

// closedMark is what Close adds to the reservation word: the word's index then lies 2^63 past
// swHead, where an open ring's lies at most a ring's worth past it (or, for a producer whose
// word is stale, a little below it), so every room check fails and takes the slow path, which
// reads the closed flag.
const closedMark = 1 << 63

// Close closes the ring for reservations: from its return every Reserve, Enqueue and EnqueueSP
// is refused with ErrClosed (bare, nothing changed), and a reservation whose CAS raced it either
// happened before (Reserved includes it; it is published as usual) or is refused. So once Close
// has returned, Tail() reaching Reserved() means that every reservation was published and that
// none can be made: what Reset needs, without counting the producers (sdma's sw clean). Close is
// a compare-and-swap of the closed flag and an atomic add (two locked instructions). Closing a
// closed ring does nothing.
//
// Closes may run at once: the one that sets the flag marks the word, once, and the others
// return when they see the mark (a Load, then a Store, let two of them add it: 2^64, no mark at
// all, and an Open after them marked the open ring, whose producers then spun for ever). Close
// and Open, and either and Reset, must be serialised by the caller (sdma: the engine's hwMu);
// producers that use Reserve or Enqueue may run at any time, EnqueueSP's single producer may
// not (see EnqueueSP). The ring stays closed across Reset until Open. Unserialised, a Close
// racing an Open can hang or corrupt the ring, not just refuse too much: a Close that loses
// the flag to one already returned, and then sees an Open take the mark away, waits for a mark
// no one adds (until the next Close); an Open between the winner's flag and its mark takes away
// a mark not yet there, and its Load then Store of the word can undo that mark or a producer's
// reservation (a closed ring taking reservations, or an open one whose producers look for room
// for ever).
func (r *Ring) Close() {
	if !r.closed.CompareAndSwap(false, true) {
		// Closed, or another Close is between its flag and its mark: from our return
		// every reservation must be refused, so wait for the mark (a few instructions of
		// the other Close away, unless it was descheduled).
		for !r.wordClosed() {
			runtime.Gosched()
		}
		return
	}
	r.reserved.Add(closedMark)
}

// wordClosed reports whether the reservation word carries closedMark, as resIndex tells it:
// swHead first, so that an open word's index lies less than 2^62 past it.
func (r *Ring) wordClosed() bool {
	head := r.swHead.Load()
	return r.reserved.Load()-r.base.Load()-head >= 1<<62
}

// Open reopens a ring closed by Close; opening an open ring does nothing. Serialised with Close,
// other Opens and Reset by the caller.
func (r *Ring) Open() {
	if !r.closed.Load() {
		return
	}
	// The flag first: a producer that reads it clear while the word is still closed finds no
	// room and looks again until the word below is stored (no producer changes a closed word).
	r.closed.Store(false)
	r.reserved.Store(r.reserved.Load() - closedMark)
}

// Closed reports whether the ring is closed (Close, not yet Open).
func (r *Ring) Closed() bool { return r.closed.Load() }

// resIndex returns the reservation index, without the closed mark, for the readers that are not
// producers: swHead is loaded first, so that for an open ring index - swHead lies in [0, 2^62)
// (the index only grows after the load) and for a closed one 2^63 above that; head is that
// swHead. During a Reset (quiescent or closed) the snapshot may mix epochs, as any snapshot of
// indices that Reset is moving.
func (r *Ring) resIndex() (res, head uint64) {
	head = r.swHead.Load()
	res = r.reserved.Load() - r.base.Load()
	if res-head >= 1<<62 {
		res -= closedMark
	}
	return res, head
}

// Start returns the ring index of the reservation's first slot.
func (v *Reservation) Start() uint64 { return v.start }

// Len returns the number of slots reserved.
func (v *Reservation) Len() int { return v.n }

// Write copies ds into the reservation's slots [off, off+len(ds)) (ring indices Start()+off
// onwards), stamping each written qw1 with its slot's generation, except the skip AHG edit
// descriptors that follow the first, which keep their raw qw1 (hfi1: submit_tx: ds[0] stamped,
// ds[1..skip] raw, the rest stamped; skip is desc.EditDescs(mode) of the first descriptor's
// header mode). skip is clamped to [0, len(ds)-1]. A reservation may be filled by several Writes
// (sdma writes one txreq at a time).
//
// On amd64 a batch of more than writeFewMax (3) descriptors is written by one assembly call
// (wrap handled, 16-byte aligned stores when the CPU has AVX); a shorter one, whatever the
// implementation, with plain stores, which cost less than the call. The checks are the reservation's own bounds, no atomic load: Reserve
// checked the window once. Write panics, before writing anything, with an *Error matching ErrSize
// for an empty ds (as Reserve, Enqueue and EnqueueSP refuse an empty batch), and with one
// matching ErrNotReserved if [off, off+len(ds)) is not inside [0, Len()) or the reservation was
// published already: such a Write would overwrite slots the hardware model may be reading, or
// slots another producer may reserve next. All are programmer errors (like SetHWHead's).
func (v *Reservation) Write(off int, ds []desc.Desc, skip int) {
	if n := len(ds); n == 0 || v.r == nil || v.published || off < 0 || off > v.n || v.n-off < n {
		v.writeFailed(off, n) // out of line: the checks are one branch
	}
	if len(ds) <= writeFewMax {
		v.r.writeFew(v.start+uint64(off), ds, skip)
	} else {
		v.r.write(v.start+uint64(off), ds, skip)
	}
}

// writeFailed panics as Write documents, for a Write of n descriptors at off that its check
// refused.
//
//go:noinline
func (v *Reservation) writeFailed(off, n int) {
	switch {
	case n == 0:
		panic(errorf("Write", ErrSize, "batch of 0 descriptors"))
	case v.r == nil || v.published:
		panic(errorf("Write", ErrNotReserved, "the reservation is %s", v.state()))
	}
	panic(errorf("Write", ErrNotReserved, "[%d, +%d) outside the reservation's %d slots at %#x", off, n, v.n, v.start))
}

// state names why a reservation cannot be written or published.
func (v *Reservation) state() string {
	if v.r == nil {
		return "empty (Reserve failed, or the zero Reservation)"
	}
	return "published already"
}

// Publish publishes the reservation to the hardware model (hfi1: sdma_update_tail).
// Reservations are published in reservation order: Publish waits (spinning, then yielding with
// runtime.Gosched) until the tail reaches Start(), i.e. every earlier reservation is published,
// and then moves the tail past the reservation with a sync/atomic store, which is the
// store-release that makes the written slots visible to whoever loads the tail (the ordering
// argument is in the package documentation, "Memory ordering"), and is also sequentially
// consistent (O6: a Dekker-style doorbell may load a flag right after it; XCHG on amd64). Never
// publishing a reservation blocks the ring.
//
// One's own reservation can always be published, so Publish has no error to return: publishing
// one twice, or the zero Reservation, is a programmer error and panics with an *Error matching
// ErrNotReserved, changing nothing.
func (v *Reservation) Publish() {
	r := v.r
	if r == nil || v.published || r.tail.Load() != v.start {
		v.publishSlow(false) // out of line: the checks and the turn are one branch
	}
	v.published = true
	// Store-release (seq-cst, O6): publishes [start, start+n) to the hardware model.
	r.tail.Store(v.start + uint64(v.n))
}

// PublishRelease is Publish with a tail store that is only a store-release, not sequentially
// consistent: a plain MOV on amd64 outside -race and purego (about 6 ns cheaper than Publish's
// XCHG there), Publish's sync/atomic store elsewhere. Same order, waiting, panics and O1
// publication as Publish.
//
// For callers that issue a sequentially consistent operation (a sync/atomic Add, CompareAndSwap,
// Swap or Store, or a mutex) after it and before any load that a Dekker-style handshake depends
// on, e.g. a doorbell that publishes and then loads "is the consumer asleep?": without that
// operation the load may pass the tail store and both sides may go to sleep (package doc, O6).
// Callers with no such load (the consumer polls the tail) need nothing in between.
func (v *Reservation) PublishRelease() {
	if v.TryPublishRelease() {
		return
	}
	v.publishSlow(true) // out of line: the checks and the turn
	v.published = true
	relaxed.StoreRelease64(&v.r.tail, v.start+uint64(v.n))
}

// TryPublishRelease is PublishRelease's common case, within the inliner's budget so that a
// caller's publish is no call: if every earlier reservation is published (the tail is at
// Start()) and v is not published yet, it publishes v exactly as PublishRelease does and reports
// true. false changes nothing: it is not v's turn yet, or v cannot be published (the zero
// Reservation, or published already); PublishRelease then waits for the turn, or panics.
func (v *Reservation) TryPublishRelease() bool {
	if r := v.r; r != nil && !v.published && r.tail.Load() == v.start {
		v.published = true
		// Store-release, not seq-cst (O5, O6): publishes [start, start+n) to the hardware model.
		relaxed.StoreRelease64(&r.tail, v.start+uint64(v.n))
		return true
	}
	return false
}

// publishSlow is Publish's (release: PublishRelease's) way when its one test failed: it panics,
// as Publish documents, unless v may be published, and otherwise waits for its turn (the tail
// reaching Start()).
//
//go:noinline
func (v *Reservation) publishSlow(release bool) {
	op := "Publish"
	if release {
		op = "PublishRelease"
	}
	if v.r == nil || v.published {
		v.publishFailed(op)
	}
	v.r.waitTurnSlow(op, v.start)
}

// publishFailed is publishSlow's panic.
//
//go:noinline
func (v *Reservation) publishFailed(op string) {
	panic(errorf(op, ErrNotReserved, "the reservation is %s", v.state()))
}

// write copies ds to [start, start+len(ds)) without checks. Preconditions: 1 <= len(ds) <=
// Size()-1, the caller owns [start, start+len(ds)).
func (r *Ring) write(start uint64, ds []desc.Desc, skip int) {
	writeBatch(r.slots, r.mask, r.shift, start, ds, clampSkip(skip, len(ds)))
}

// writeFew is write for a batch of up to writeFewMax descriptors: plain stores, which cost less
// than the assembly writer's call. Same preconditions. The generation is that of writeGo (the
// reference), computed once for the batch and moved on where the batch wraps to slot 0 (a batch
// shorter than the ring wraps at most once), with no shift per slot. skip needs no clamping here:
// k > skip is what it is for the clamped skip, for every k in 1..len(ds)-1.
func (r *Ring) writeFew(start uint64, ds []desc.Desc, skip int) {
	slots, mask := r.slots, r.mask
	gen := start >> (r.shift & 63) // shift < 64: no oversized-shift fixup
	j := start & mask
	for k, d := range ds {
		if k == 0 || k > skip {
			d.Qw1 = d.Qw1&^desc.GenerationSMask | (gen&desc.GenerationMask)<<desc.GenerationShift
		}
		slots[j] = d
		if j++; j > mask {
			j, gen = 0, gen+1
		}
	}
}

// clampSkip clamps a caller's skip to [0, n-1], the writers' precondition.
func clampSkip(skip, n int) int { return min(max(skip, 0), n-1) }

// writeGo is the portable implementation of Write, and the reference the assembly is tested
// against. Preconditions as for the assembly writers (ring_amd64.go): 1 <= len(ds) <=
// len(slots)-1, 0 <= skip < len(ds).
func writeGo(slots []desc.Desc, mask uint64, shift uint, start uint64, ds []desc.Desc, skip int) {
	for k, d := range ds {
		i := start + uint64(k)
		if k == 0 || k > skip {
			d.Qw1 = d.Qw1&^desc.GenerationSMask | (i>>(shift&63)&desc.GenerationMask)<<desc.GenerationShift // shift < 64: no oversized-shift fixup
		}
		slots[i&mask] = d
	}
}

// Enqueue is Reserve, Write and Publish in one call: it stores ds (with skip AHG edit
// descriptors after the first, as for Write) and returns the index of ds[0]. Safe for concurrent
// producers. Errors as for Reserve, named Enqueue; on error nothing is changed.
func (r *Ring) Enqueue(ds []desc.Desc, skip int) (start uint64, err error) {
	if err := r.checkBatch("Enqueue", len(ds)); err != nil {
		return 0, err
	}
	start, err = r.reserve(uint64(len(ds)))
	if err != nil {
		return 0, err
	}
	r.write(start, ds, skip)
	r.publish(start, len(ds))
	return start, nil
}

// publish moves the tail from start to start+n once every earlier reservation is published
// (Enqueue; Reservation.Publish inlines the same), with a sequentially consistent store.
func (r *Ring) publish(start uint64, n int) {
	r.waitTurn("Publish", start)
	// Store-release (seq-cst, O6): publishes [start, start+n) to the hardware model.
	r.tail.Store(start + uint64(n))
}

// waitTurn waits until the tail reaches start: every reservation before start is published. A
// tail already past start means the range was published (or the ring Reset under a live
// reservation, which sdma's quiesce rules out): a programmer error, op's *Error matching ErrOrder.
func (r *Ring) waitTurn(op string, start uint64) {
	if r.tail.Load() == start { // the common case, first: no loop, so that the publishers inline it
		return
	}
	r.waitTurnSlow(op, start)
}

// waitTurnSlow is waitTurn's loop.
func (r *Ring) waitTurnSlow(op string, start uint64) {
	for i := 0; ; i++ {
		t := r.tail.Load()
		if t == start {
			return
		}
		if int64(t-start) > 0 {
			panic(errorf(op, ErrOrder, "start %#x is behind the tail %#x", start, t))
		}
		backoff(i)
	}
}

// EnqueueSP is Enqueue for a single producer: no CAS and no ordered wait. It must not run
// concurrently with any other EnqueueSP, Enqueue, Reserve or Publish on the same ring (the
// kernel's tail_lock provides that exclusion; here the caller does), nor with Close, Open or
// Reset: its reservation is a plain store, which a racing Close can neither refuse nor count
// (Close's promise holds for Reserve and Enqueue, whose CAS it fails), so the caller's
// exclusion must cover the closer too. Errors as for Reserve, and one more: while a reservation
// (Reserve, ReserveWrite, ReserveIn) is not yet published, EnqueueSP, whose tail store would
// publish it too, refuses with an *Error matching ErrOrder and changes nothing.
//
// On amd64 outside -race builds EnqueueSP is one assembly call (room check, write, publication)
// made straight from the caller: EnqueueSP inlines. It does not allocate.
//
// Ordering: the tail store that publishes the batch is a store-release (package doc, "Memory
// ordering", O1; on amd64 outside -race a plain MOV, O5). It is not sequentially consistent,
// unlike Publish's: a Dekker-style doorbell built on it needs a seq-cst operation in between
// (O6). sdma's doorbell uses Publish.
func (r *Ring) EnqueueSP(ds []desc.Desc, skip int) (uint64, error) {
	return enqueueSP(r, ds, skip)
}

// enqueueSPError tells why EnqueueSP refused a batch of n: its size, or no room (bare ErrFull).
func (r *Ring) enqueueSPError(n int) error {
	if err := r.checkBatch("EnqueueSP", n); err != nil {
		return err
	}
	return ErrFull
}

// enqueueSPGo is the portable EnqueueSP, and the only one under the race detector, which does
// not see assembly stores: the room check against the cached head, the Go writer, then two
// release stores (relaxed.StoreRelease64: sync/atomic under -race, purego and off amd64).
// Errors as for EnqueueSP; on error nothing is written.
func enqueueSPGo(r *Ring, ds []desc.Desc, skip int) (uint64, error) {
	n := len(ds)
	un := uint64(n)
	if un-1 >= r.mask { // n < 1 or n > Size()-1
		return 0, r.enqueueSPError(n)
	}
	if r.closed.Load() {
		return 0, ErrClosed
	}
	base := r.base.Load()
	start := r.reserved.Load() - base // == tail: no other producer
	if d := start - r.tail.Load(); d != 0 {
		if d > r.mask {
			// The word carries the closed mark although the flag was clear: a Close or Open
			// ran under us (outside EnqueueSP's contract). Refuse rather than write at, and
			// publish, an index 2^63 past the tail.
			return 0, ErrClosed
		}
		// A reservation (Reserve, ReserveWrite, ReserveIn) is not yet published: the tail
		// stored past our batch would publish its slots, written or not, with ours.
		return 0, errorf("EnqueueSP", ErrOrder, "[%#x, %#x) reserved and not published: publish it first", start-d, start)
	}
	// used = start - cached can exceed mask when racing Reserves left an older head in the
	// cache than the last reservation saw; then the cache says nothing and swHead is loaded.
	if cached := r.headCache.Load(); start-cached > r.mask || r.mask-(start-cached) < un {
		head := r.swHead.Load() // swHead <= tail == start: start - head <= mask on an open ring
		if head != cached {
			relaxed.StoreRelease64(&r.headCache, head) // only on change; ours alone (one producer)
		}
		if start-head > r.mask {
			return 0, ErrClosed // as above: the tail and the word moved under us
		}
		if r.mask-(start-head) < un {
			return 0, ErrFull
		}
	}
	writeGo(r.slots, r.mask, r.shift, start, ds, clampSkip(skip, n))
	end := start + un
	// reserved first, so that reserved >= tail for concurrent readers (Publish's check, FreeCnt).
	relaxed.StoreRelease64(&r.reserved, end+base)
	// Store-release, not seq-cst (O1, O6): publishes [start, end) to the hardware model.
	relaxed.StoreRelease64(&r.tail, end)
	return start, nil
}

func (r *Ring) checkBatch(op string, n int) error {
	if n < 1 || n > r.size-1 {
		return r.batchErr(op, n) // out of line, so that checkBatch inlines
	}
	return nil
}

// batchErr is checkBatch's error for a batch of n descriptors that it refused.
//
//go:noinline
func (r *Ring) batchErr(op string, n int) error {
	if r.size == 0 {
		return errorf(op, ErrSize, "the zero Ring: make rings with New")
	}
	if n < 1 {
		return errorf(op, ErrSize, "batch of %d descriptors", n)
	}
	return errorf(op, ErrTooBig, "batch of %d descriptors, capacity %d", n, r.size-1)
}

// Reserved returns the reservation index (an atomic load of the reservation word): slots in
// [Tail(), Reserved()) are reserved and not yet published. Once no producer can reserve any more
// (the ring is closed, or the caller stopped them), Tail() reaching it means every reservation was
// published.
func (r *Ring) Reserved() uint64 {
	res, _ := r.resIndex()
	return res
}

// ---- hardware model (single consumer) ----

// Tail returns the published tail (atomic load-acquire): every slot in [HWHead(), Tail()) is
// fully written and may be read with Slot.
func (r *Ring) Tail() uint64 { return r.tail.Load() }

// HWHead returns the hardware head (hfi1: the *head_dma write-back), atomic load-acquire.
func (r *Ring) HWHead() uint64 { return r.hwHead.Load() }

// Slot returns the descriptor in the slot of index i (i & Mask()). Only indices in
// [HWHead(), Tail()), with Tail() loaded after the producers published, hold a descriptor that
// the caller may rely on; the call itself is a plain read and is safe for the consumer that owns
// those slots. The zero Ring has no slots: Slot panics there (index out of range).
func (r *Ring) Slot(i uint64) desc.Desc { return r.slots[i&r.mask] }

// SetHWHead moves the hardware head to h (hfi1: the chip's head_dma write-back) with a
// store-release, handing [HWHead(), h) to the completion pass (O2). The store is not sequentially
// consistent (O6; a plain MOV on amd64 outside -race and purego). h must lie in [HWHead(),
// Tail()]; otherwise SetHWHead panics with an *Error matching ErrOrder (a programmer error). For
// the single hardware-model goroutine.
func (r *Ring) SetHWHead(h uint64) { advanceHead("SetHWHead", &r.hwHead, &r.tail, h) }

// StoreHWHead is SetHWHead for a hardware model that knows that h lies in [HWHead(), Tail()] (its
// own head, past descriptors it read below a tail it loaded): the same store-release (O2, O6),
// without the order check, whose two loads and compare cost more than the store, except in -race
// builds (checkOrder), where it checks and panics as SetHWHead does. An h out of order is then a
// programmer error that only a -race build reports.
func (r *Ring) StoreHWHead(h uint64) {
	if checkOrder {
		advanceHead("StoreHWHead", &r.hwHead, &r.tail, h)
		return
	}
	relaxed.StoreRelease64(&r.hwHead, h)
}

// ---- completion side ----

// SwHead returns the software head (hfi1: descq_head), atomic load-acquire.
func (r *Ring) SwHead() uint64 { return r.swHead.Load() }

// BeginWrite opens the head seqcount's write section (hfi1: write_seqlock(&sde->head_lock)
// without the lock): the count is odd until EndWrite. The caller serialises writers: one
// completion pass (or Reset) at a time.
func (r *Ring) BeginWrite() { r.seq.BeginWrite() }

// EndWrite closes the write section opened by BeginWrite (write_sequnlock).
func (r *Ring) EndWrite() { r.seq.EndWrite() }

// SetSwHead moves the software head to h, freeing [SwHead(), h) for producers, with a
// store-release (O3). The store is not sequentially consistent (O6; a plain MOV on amd64 outside
// -race and purego). Only inside BeginWrite/EndWrite. h must lie in [SwHead(), HWHead()];
// otherwise SetSwHead panics with an *Error matching ErrOrder (a programmer error).
func (r *Ring) SetSwHead(h uint64) { advanceHead("SetSwHead", &r.swHead, &r.hwHead, h) }

// StoreSwHead is SetSwHead for a completion pass that knows that h lies in [SwHead(), HWHead()]
// (it walked from the software head to a hardware head it loaded): the same store-release (O3,
// O6), only inside BeginWrite/EndWrite, without the order check except in -race builds, as
// StoreHWHead.
func (r *Ring) StoreSwHead(h uint64) {
	if checkOrder {
		advanceHead("StoreSwHead", &r.swHead, &r.hwHead, h)
		return
	}
	relaxed.StoreRelease64(&r.swHead, h)
}

// advanceHead is SetHWHead and SetSwHead (and StoreHWHead and StoreSwHead in -race builds): it moves head to h with a store-release (not seq-cst,
// O5/O6), or panics (op's *Error matching ErrOrder) if h lies outside [head, bound] in modular
// order.
//
// The panic's *Error is a composite literal whose message is formatted when it is read (Error,
// orderDetail), not a call: a call would put advanceHead, and with it SetHWHead and SetSwHead,
// past the inliner's budget, and they run two or three times per packet.
func advanceHead(op string, head, bound *atomic.Uint64, h uint64) {
	if old, b := head.Load(), bound.Load(); h-old > b-old {
		panic(&Error{Op: op, Err: ErrOrder, order: &orderDetail{h, old, b}})
	}
	relaxed.StoreRelease64(head, h)
}

// HeadSeq snapshots the head seqcount without waiting (hfi1: raw_seqcount_begin(&head_lock),
// taken by sdma_check_progress before calling the sleeper): an odd count (a pass in progress) is
// rounded down, so HeadRetry reports the snapshot stale once that pass ends.
func (r *Ring) HeadSeq() uint32 { return r.seq.Begin() }

// HeadRetry reports whether a completion pass began since HeadSeq returned seq (hfi1:
// read_seqretry, the heart of sdma_progress).
func (r *Ring) HeadRetry(seq uint32) bool { return r.seq.Retry(seq) }

// Seq returns the head seqcount itself, for callers that need BeginWait.
func (r *Ring) Seq() *SeqCount { return &r.seq }

// FreeCnt returns the number of descriptors that can be reserved now: Size()-1 -
// (reserved - swHead) (hfi1: sdma_descq_freecnt). A snapshot; it may be stale at once.
func (r *Ring) FreeCnt() int {
	res, head := r.resIndex()
	used := res - head
	if used > r.mask {
		// It happens on a busy ring: head is loaded before the word, and between the two
		// loads a completion pass may move swHead on and producers reserve the room it freed.
		// The word is at most mask past the swHead of its own time, but that swHead is past
		// head, so used can exceed mask. (A Reset between the loads mixes epochs too.) The
		// room at the word's load, mask minus its distance from that later swHead, is >= 0:
		// 0 is a lower bound of it.
		return 0
	}
	return int(r.mask - used)
}

// InProcess returns Size() - FreeCnt() (hfi1: sdma_descq_inprocess). As in the kernel this is one
// more than the number of slots in use; Used returns that number.
func (r *Ring) InProcess() int { return r.size - r.FreeCnt() }

// Used returns reserved - swHead: the slots reserved, in flight or awaiting completion (0 on
// the zero Ring, which has no slots).
func (r *Ring) Used() int {
	res, head := r.resIndex()
	return int(min(res-head, r.mask)) // FreeCnt's clamp; Size()-1-FreeCnt() would give -1 on the zero Ring
}

// Empty reports whether nothing is reserved, published or awaiting completion: reserved ==
// swHead (hfi1: sdma_empty, descq_tail == descq_head).
func (r *Ring) Empty() bool {
	res, head := r.resIndex()
	return res == head
}

// Reset sets every index to start (hfi1: the sw clean's descq_tail = descq_head = 0 and
// *head_dma = 0, after which sdma_setlengen restarts the hardware generation with the tail: here
// the generation is (start >> Shift()) & 3). The slots keep their stale contents, as the kernel's
// descq does; they lie outside [hwHead, tail). The head seqcount is bumped by a write section, so
// any HeadSeq snapshot taken before is stale.
//
// The caller guarantees quiescence: no reservation unpublished, no hardware model or completion
// pass in flight (the kernel holds tail_lock and head_lock), and no producer at all unless the
// ring is closed (Close): producers of a closed ring may call Reserve meanwhile and are refused.
// A closed ring stays closed. Reset moves base so that the new reservation words lie past every
// word handed out before (see Ring.base); serialised with Close and Open by the caller.
//
// A reservation not yet published when Reset is called (Tail() != Reserved(): abandoned, or
// still being written) is a programmer error: Reset panics with an *Error matching ErrOrder and
// changes nothing, because that reservation, published or written after the Reset, would land in
// slots that the new epoch hands to another producer (or wait for a tail that never comes).
func (r *Ring) Reset(start uint64) {
	if res, _ := r.resIndex(); res != r.tail.Load() {
		panic(errorf("Reset", ErrOrder, "[%#x, %#x) reserved and not published: the ring is not quiescent", r.tail.Load(), res))
	}
	r.seq.BeginWrite()
	r.epoch.Add(1) // before the word: see reserveIn
	// A producer of the closed ring may load the word from one side of moveIndices' stores and
	// base or the cached head from the other: the closed word then gives it the room
	// start - hc + 2^63 (hc, the cached head before the Reset), not 2^63 past it, and that is
	// room when start lies 2^63 past hc, within a ring's worth (d below): its CAS would succeed
	// on the closed ring, at an index of neither epoch. Such a start is reached by way of
	// start + 2^62, which lies 2^62 from both hc and start: no mixed view shows room.
	if d := start - r.headCache.Load() - closedMark; d <= r.mask {
		r.moveIndices(start + 1<<62)
	}
	r.moveIndices(start)
	r.seq.EndWrite()
}

// moveIndices is Reset's move of every index to start, with a new reservation word (base moved
// so that the word is the last one plus 1). Producers load the word, then base, then the cached
// head (reserveIn, tryReserve); here base is stored first, then the word, then the cached head
// (setIndices).
func (r *Ring) moveIndices(start uint64) {
	w := r.reserved.Load()
	if r.closed.Load() {
		w -= closedMark
	}
	r.base.Store(w + 1 - start) // the new epoch's first word: w + 1
	r.setIndices(start)
}

// Dequeue is a single-consumer convenience that plays both the hardware model and the completion
// pass: it copies up to len(dst) published descriptors into dst, then advances hwHead and swHead
// (the latter inside a head seqcount write section) past them, and returns how many it copied.
// It must not run concurrently with another Dequeue, SetHWHead, completion pass or Reset;
// successive calls from different goroutines must be ordered by the caller. It does not allocate.
//
// Ordering (package doc, "Memory ordering"): the tail load before the slot reads is O1; then
// hwHead := h+n (O2), seq++, swHead := h+n (O3), seq++ (O4), in that program order. On amd64
// outside -race one assembly call, made straight from the caller since Dequeue inlines, does the
// tail check, the copy and the four stores as plain MOVs, no locked instruction (O5); elsewhere
// release stores (relaxed.StoreRelease64 and SeqCount's write side; sync/atomic under -race,
// purego and off amd64). None of these stores is sequentially consistent (O6): a caller that builds a
// Dekker-style protocol on Dequeue must add a seq-cst operation, as sdma's completion pass gets
// one from its locks.
func (r *Ring) Dequeue(dst []desc.Desc) int { return dequeue(r, dst) }

// dequeueGo is the portable Dequeue (and the only one under -race): the tail (cached or
// loaded), the copy, then the four release stores.
func dequeueGo(r *Ring, dst []desc.Desc) int {
	h := r.hwHead.Load() // our own index
	n := uint64(len(dst))
	// The cached tail is used only when it covers the whole request: then the result,
	// len(dst) descriptors, is also what a fresh tail load would give, so Dequeue still returns
	// exactly min(len(dst), descriptors published when it was called) (its linearization point
	// can be any moment of the call; the tail only grows). Otherwise, or when hwHead was moved
	// past the cache (avail > size-1), load the producers' line.
	avail := r.tailCache - h
	if avail < n || avail > r.mask {
		t := r.tail.Load() // load-acquire: the slots below the tail are written
		r.tailCache = t
		avail = t - h
	}
	if avail < n {
		n = avail
	}
	if n == 0 {
		return 0
	}
	from := h & r.mask
	if k := uint64(r.size) - from; k < n {
		copy(dst[:k], r.slots[from:])
		copy(dst[k:n], r.slots[:n-k])
	} else {
		copy(dst[:n], r.slots[from:from+n])
	}
	// Store-release (O2): hands [h, h+n) to the completion pass.
	relaxed.StoreRelease64(&r.hwHead, h+n)
	r.seq.BeginWrite()
	// Store-release (O3): hands the slots back to producers. Our reads above happen before it.
	relaxed.StoreRelease64(&r.swHead, h+n)
	r.seq.EndWrite()
	return int(n)
}

// backoff spins for the first iterations and then yields the processor: the wait of an ordered
// Publish and of SeqCount.BeginWait. The spin is short (16 re-loads, well under a microsecond)
// because the goroutine we wait for (the owner of the previous reservation, or the seq writer)
// may be descheduled when goroutines outnumber cores; yielding early lets it run, which measured
// better than a longer spin in BenchmarkRingMPSC on a 2-core machine.
func backoff(i int) {
	if i < 16 {
		return // spin: a plain re-load in the caller's loop
	}
	runtime.Gosched()
}
