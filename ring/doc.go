// Package ring is gosdma's lock-free descriptor ring: the Go shape of hfi1's descq (the
// dma_alloc_coherent array of struct hw_sdma_desc) together with the indices that the kernel
// keeps under tail_lock and head_lock.
//
// Many producers reserve room with a CAS (Reserve), write their descriptors with the generation
// stamped per slot (Write, an assembly hot path on amd64), and publish the tail in reservation
// order (Publish). One consumer, the hardware model, reads the published slots and advances the
// hardware head (Tail, Slot, SetHWHead, StoreHWHead). One completion pass at a time frees slots
// by advancing the software head inside the head seqcount's write section (BeginWrite, SetSwHead
// or StoreSwHead, EndWrite), which producers read for free space and sleepers snapshot with
// HeadSeq.
//
// Kernel names → Go names:
//
//	descq, descq_cnt, sdma_mask, sdma_shift    Ring, Size, Mask, Shift
//	descq_tail, sdma_update_tail               Tail, Publish
//	submit_tx (copy + add_gen)                 Reserve + Write (per-slot stamping, AHG skip)
//	*head_dma (the chip's head write-back)     HWHead, SetHWHead, StoreHWHead
//	descq_head                                 SwHead, SetSwHead, StoreSwHead
//	head_lock's seqcount                       BeginWrite, EndWrite, HeadSeq, HeadRetry, SeqCount
//	sdma_descq_freecnt, _inprocess, sdma_empty FreeCnt, InProcess, Empty
//	sw clean: descq_tail = descq_head = 0,     Reset
//	  sdma_setlengen
//	tail_lock held across sdma_send_txlist     Epoch + ReserveIn (every reservation in one
//	  (no sw clean inside one list)              epoch: refused once a Reset came between)
//
// Unlike the kernel, which serialises producers with tail_lock, the ring is multi-producer and
// lock-free: the reservation index is separate from the published tail.
//
// The assembly path and the portable Go path write identical bytes; Implementations and
// the unexported setImplementation (internal/ringimpl.Set for the module's benchmarks) let tests
// and benchmarks force either.
//
// # Memory ordering
//
// This is the one statement of the ordering argument; the Go and assembly sites refer to its
// rules by number (O1..O6) instead of repeating it. Each index is written by one party and read
// by the others; every hand-over is a store-release of an index after the data it covers and a
// load-acquire of that index before the data is touched. The last column says which stores are
// also sequentially consistent (seq-cst: a sync/atomic store or read-modify-write, a locked
// instruction on amd64) and which are release-only (O5, O6).
//
//	index      written by (store-release)          read by (load-acquire)      seq-cst?
//	tail       producers, in reservation order:    hardware model (Tail,       Publish, Enqueue: yes;
//	           Publish, PublishRelease, Enqueue,   Dequeue), waiting           PublishRelease,
//	           EnqueueSP                           publishers                  EnqueueSP: no
//	reserved   producers: Reserve (CAS),           producers, FreeCnt, Empty,  Reserve, Close: yes;
//	           EnqueueSP; Close, Open (closers)    Reserved                    EnqueueSP: no
//	headCache  producers (Reserve, EnqueueSP)      producers                   no
//	hwHead     hardware model: SetHWHead,          completion pass (HWHead)    no
//	           StoreHWHead, Dequeue
//	swHead     completion pass, inside the         producers (Reserve,         no
//	           seqcount's write section:           FreeCnt, EnqueueSP),
//	           SetSwHead, StoreSwHead, Dequeue     sleepers (with the count)
//	seq        completion pass: BeginWrite,        sleepers (HeadSeq,          no
//	           EndWrite, Dequeue                   HeadRetry)
//
// Reset's index stores are sync/atomic (seq-cst) and its seqcount section release-only; Reset
// runs only when the ring is quiescent, so neither matters.
//
// O1 (publication). A producer's slot stores happen before its tail store; the hardware model's
// tail load happens before its slot loads. So whoever sees the new tail sees the descriptors
// below it.
//
// O2 (hand-over to completion). The hardware model's slot loads happen before its hwHead store;
// the completion pass loads hwHead before it reads the txreqs recorded for those slots.
//
// O3 (reuse). The completion pass's reads of a slot (and sdma's txRing entry) happen before the
// swHead store that frees it; a producer loads swHead before it reserves, so it never overwrites
// a slot still being read.
//
// O4 (seqcount). The pass stores seq (odd), then swHead, then seq (even); a sleeper loads swHead
// (FreeCnt) and then the count. A sleeper that sees the new swHead sees at least the odd count,
// as the kernel's write_seqcount_begin (seq++; smp_wmb()) guarantees, so it never misses a pass.
// The writer's stores need only be ordered among themselves (release stores are: each orders
// every earlier store before it), not seq-cst, as the kernel's smp_wmb is only a compiler
// barrier on x86. One writer at a time, so each count change is a load of the writer's own
// count and a store of the count plus one, no atomic read-modify-write.
//
// O5 (release-only stores are plain MOVs on amd64). Every store that the table calls not
// seq-cst is a store-release only: in Go code internal/relaxed's StoreRelease64 and
// StoreRelease32 (advanceHead for SetHWHead and SetSwHead, SeqCount's BeginWrite and EndWrite,
// PublishRelease, headCache, and the Go paths of EnqueueSP and Dequeue), and in the amd64
// assembly (Write's writers, and EnqueueSP and Dequeue outside -race builds) plain MOVs with no
// fence. On amd64 outside -race and the purego tag, relaxed's stores are ordinary Go stores that
// inline to one plain MOV, no locked instruction and no call (under 1 ns against about 6 for
// XCHG). That is enough:
// under x86-TSO (Intel SDM vol. 3A §9.2.2 "Memory Ordering in P6 and More Recent Processor
// Families"; AMD APM vol. 2 §7.2) loads are not reordered with other loads, stores are not
// reordered with other stores or with older loads, and stores become visible to all other cores
// in one order. So every plain store is a store-release and every plain load a load-acquire,
// which is all that O1 to O4 ask. The Go compiler keeps every store, and every sync/atomic
// operation, on one memory chain in program order, and schedules a load before the next store on
// that chain (internal/relaxed/relaxed_amd64.go), so the Go stores and loads before a release
// store (a payload the caller wrote, a txreq recorded for a slot) are covered too. Under -race, the purego tag and off amd64, relaxed's stores are
// sync/atomic stores (seq-cst, stronger than needed) and race builds take the Go path for
// EnqueueSP and Dequeue, because the race detector does not see assembly stores; the production
// ordering is exercised without -race by TestStressOrderingLitmus, which runs the assembly path
// for many iterations and checks every descriptor and payload the consumer reads, and by the
// linearizability and stress tests, which run SetHWHead, SetSwHead and the seqcount's writer.
//
// O6 (what is not promised). A release-only store is not sequentially consistent: a later load
// by the same core may complete before the store leaves its store buffer. Nothing in the ring
// needs more, but a Dekker-style handshake built on an index (a producer that publishes and then
// loads a "consumer asleep?" flag, against a consumer that stores the flag and then loads the
// tail) needs a sequentially consistent operation between the store and the load. Publish's and
// Enqueue's tail store is a sync/atomic store (XCHG on amd64), which is one, and sdma's doorbell
// relies on it; PublishRelease is for callers that make their own seq-cst operation (a
// sync/atomic Add, say) after it and before the flag load. EnqueueSP's, Dequeue's, SetHWHead's,
// SetSwHead's and the seqcount writer's stores are release-only: a caller that stores one of
// those indices and then loads a flag that another goroutine sets before loading that index must
// put a seq-cst operation in between (sdma's completion pass and its sleepers get one from
// headMu and the wait lock).
package ring
