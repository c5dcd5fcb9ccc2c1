// Package ring is gosdma's lock-free descriptor ring: the Go shape of hfi1's descq (the
// dma_alloc_coherent array of struct hw_sdma_desc) together with the indices that the kernel
// keeps under tail_lock and head_lock.
//
// Many producers reserve room with a CAS (Reserve), write their descriptors with the generation
// stamped per slot (Write, an assembly hot path on amd64), and publish the tail in reservation
// order (Publish). One consumer, the hardware model, reads the published slots and advances the
// hardware head (Tail, Slot, SetHWHead). One completion pass at a time frees slots by advancing
// the software head inside the head seqcount's write section (BeginWrite, SetSwHead, EndWrite),
// which producers read for free space and sleepers snapshot with HeadSeq.
//
// Kernel names → Go names:
//
//	descq, descq_cnt, sdma_mask, sdma_shift    Ring, Size, Mask, Shift
//	descq_tail, sdma_update_tail               Tail, Publish
//	submit_tx (copy + add_gen)                 Reserve + Write (per-slot stamping, AHG skip)
//	*head_dma (the chip's head write-back)     HWHead, SetHWHead
//	descq_head                                 SwHead, SetSwHead
//	head_lock's seqcount                       BeginWrite, EndWrite, HeadSeq, HeadRetry, SeqCount
//	sdma_descq_freecnt, _inprocess, sdma_empty FreeCnt, InProcess, Empty
//	sw clean: descq_tail = descq_head = 0,     Reset
//	  sdma_setlengen
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
// load-acquire of that index before the data is touched.
//
//	index     written by (store-release)                read by (load-acquire)
//	tail      producers, in reservation order: Publish, Hardware model (Tail, Dequeue), waiting
//	          Enqueue, EnqueueSP                        publishers
//	hwHead    hardware model: SetHWHead, Dequeue        completion pass (HWHead)
//	swHead    completion pass, inside the seqcount's    producers (Reserve, FreeCnt, EnqueueSP),
//	          write section: SetSwHead, Dequeue         sleepers (with the count)
//	seq       completion pass: BeginWrite/EndWrite      sleepers (HeadSeq, HeadRetry)
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
//
// O5 (the assembly's plain stores are releases on amd64). The Go path makes every index store
// and load above a sync/atomic operation. The amd64 assembly (Write's writers, and EnqueueSP
// and Dequeue outside -race builds) uses plain MOVs and no fence, which is enough: under x86-TSO
// (Intel SDM vol. 3A §9.2.2 "Memory Ordering in P6 and More Recent Processor Families"; AMD APM
// vol. 2 §7.2) loads are not reordered with other loads, stores are not reordered with other
// stores or with older loads, and stores become visible to all other cores in one order. So
// every plain store is a store-release and every plain load a load-acquire, which is all that O1
// to O4 ask. The Go compiler does not move memory operations across an assembly call, so the Go
// stores before a call (a payload the caller wrote) are covered too. Under -race the assembly's
// index stores would be invisible to the detector, so race builds take the Go path for EnqueueSP
// and Dequeue (sync/atomic: sequentially consistent, stronger than needed); the production
// ordering is exercised without -race by TestStressOrderingLitmus, which runs the assembly path
// for many iterations and checks every descriptor and payload the consumer reads.
//
// O6 (what is not promised). A plain MOV store is not sequentially consistent: a later load by
// the same core may complete before the store leaves its store buffer. Nothing in the ring needs
// more, but a Dekker-style handshake built on an index (a producer that publishes and then loads
// a "consumer asleep?" flag, against a consumer that stores the flag and then loads the tail)
// needs a sequentially consistent operation between the two: Publish's tail store is a
// sync/atomic store (XCHG on amd64), and sdma's doorbell relies on it; EnqueueSP's and Dequeue's
// stores are not.
package ring
