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
package ring
