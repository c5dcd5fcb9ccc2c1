// Package pio is hfi1's other transmit path, programmed I/O (seed 004: "for TX, the CPU copies
// the data to the chip directly"): send contexts whose send buffer of 64-byte blocks is handed out
// as credits, the copy of each packet into it behind its PBC, a model of the chip that consumes
// whole blocks in order and writes a free counter back, the release pass that returns credits and
// runs release callbacks, the wait list of producers that found no credits, and halts with their
// recovery. It is a sibling of package sdma, not a mode of it: it imports nothing of gosdma but
// internal leaves, and the choice between the two per packet (hfi1_verbs_send) lives above both,
// in package verbs.
//
// # One packet's way
//
// BufferAlloc reserves the packet's blocks (its length in dwords, PBC included, rounded up to
// whole blocks) under the context's allocation lock, as the kernel's sc_buffer_alloc does, and
// records it in the shadow ring with the fill count it will be sent at. The caller writes it with
// Copy (pio_copy: PBC, data in whole dwords) or CopyStart, CopyMid... CopyEnd (seg_pio_copy_*:
// pieces of any length, bytes carried between them); the copy writes whole quadwords only, fills
// whole blocks, wraps from the end of the buffer to its start only at a block boundary, and ends
// by handing the blocks to the chip. The chip (a goroutine per context, or the caller's Process)
// takes packets in allocation order once they are fully written, checks the PBC, hands the bytes
// after it to the Sink, and writes the free counter back when the unreturned credits reach the
// threshold, the PBC asks (PBCCreditReturn), a producer waits, or a return is forced
// (ReturnCredits). Each write-back runs the release pass (sc_release_update): every packet now
// sent has its Releaser called once, in order, with the PRC_* codes of the write-back, and up to
// WaitBatchSize parked producers are woken.
//
// # The copy
//
// The quadword runs go through one per-arch seam (Implementations; tests and benchmarks force one through internal/pioimpl). On amd64
// there are two assembly families, picked by what klauspost/cpuid/v2 reports: "asm-nt", the
// non-temporal writer a real send buffer wants (32-byte VMOVNTDQ with AVX, else 8-byte MOVNTI,
// then SFENCE before the buffer is handed to the chip: the chip's buffer is write-combining
// memory, and on write-back memory non-temporal stores are the way to stream past the caches),
// and "asm", the default, with ordinary aligned 32-byte and 8-byte stores, because the model's
// send buffer is cached memory that its chip reads right back (there the non-temporal writer
// costs 7 to 56 times copy: BenchmarkPIOCopy). Single quadwords (PBC, a dangling dword, the
// padding) are one ordinary 8-byte store each, as the kernel's writeq. Elsewhere, and under the
// purego build tag, a Go writer of 8-byte stores. All leave the same bytes (TestCopyDifferential
// and FuzzCopySegs hold them to a model). copy is not used: memmove may store a range with
// overlapping or narrower writes, which write-combining MMIO must not see.
//
// # Why PIO needs no mapping (seed 004)
//
// The 2006 thread added ib_dma_mapping_ops because a PIO chip's driver must get the CPU address
// back from a "DMA address": the CPU, not the device, reads the data. Here that is concrete: the
// copy reads the caller's []byte through its CPU address, so a PIO packet is never mapped, while
// an SDMA packet is mapped through the device's dma.Mapper and read by the hardware model only
// through Mapper.Translate. Package verbs serves both from one send call: the same caller bytes
// are mapped by the device's dma.Mapper on the SDMA path (AddKVAddr) and go straight to the copy
// (the identity) on the PIO path, which is what the interposable mapper made possible.
//
// # Halts and recovery
//
// A packet whose PBC length does not match its blocks, or whose copy left some of them unwritten,
// a FaultPlan or InjectHalt halts the chip:
// allocations stop (sc_stop), the context waits for the copies in progress, disables itself
// (sc_disable: every packet still in the shadow ring is released with PRCSCDisable, exactly once,
// whether the chip had sent it or not, and every waiter is woken) and enables itself again
// (sc_enable: counters and shadow ring reset), all before the call that met the halt returns
// (the kernel's halt_work). Producers meanwhile get ErrNotRunning. Close is a final Disable.
//
// A Sink or Releaser that calls runtime.Goexit (a test's t.FailNow), or a Waiter's wake-up on
// the chip goroutine, halts the context too (CauseGoexit), but nothing restarts it: the goroutine
// that met it is ending. Its locks are released on the way out, and the pending packets wait in
// the shadow ring for Restart, Disable or Close, which release them as above; if it was the chip
// goroutine, only Close is left, from the halt on (see Sink and Restart).
//
// # Kernel names
//
//	kernel                                        Go
//	struct send_context, sc_alloc, sc_free        SendContext, New, (*SendContext).Close
//	SC_KERNEL, SC_VL15, SC_ACK, SC_USER           Kernel, VL15, ACK, User (Type)
//	init_sc_pools_and_sizes, struct sc_config_sizes  ContextSizes, TypeSize
//	sc_mtu_to_threshold, sc_percent_to_threshold  MTUToThreshold, PercentToThreshold
//	sc_alloc's threshold choice, sc_set_cr_threshold  DefaultCreditThreshold, SetThreshold
//	struct pio_buf, sc_buffer_alloc               Buf, (*SendContext).BufferAlloc
//	pio_copy                                      (*Buf).Copy
//	seg_pio_copy_start, _mid, _end                (*Buf).CopyStart, CopyMid, CopyEnd (CopySegs)
//	create_pbc, PBC_*                             CreatePBC, PBC and its constants
//	struct credit_return, CR_*, fill_code         the credit return word, ReleaseCode
//	pio_release_cb, PRC_*                         Releaser, PRCOK..PRCSCDisable
//	sc_release_update                             (*SendContext).ReleaseUpdate
//	sc_return_credits                             (*SendContext).ReturnCredits
//	piowait, pio_wait, sc_piobufavail             Waiter, QueueWait, QueueWaitSent, the wake-up in the pass
//	iowait priority, starved_cnt                  (*Waiter).SetPriority, Starved
//	iowait_starve_clear (hfi1_do_send)            (*Waiter).StarveClear
//	PIO_WAIT_BATCH_SIZE                           WaitBatchSize
//	(none: a blocking send)                       BufferAllocWait, SendWait
//	sc_stop, sc_disable, sc_enable, sc_restart    Stop, Disable, Enable, Restart
//	SCF_ENABLED, SCF_HALTED                       Enabled, Halted
//	buffers_allocated                             InFlight
//	PIO_BLOCK_SIZE, PIO_MAX_BLOCKS                BlockSize, MaxBlocks
//	piothreshold, PIO_THRESHOLD_CEILING           DefaultThreshold, ThresholdCeiling
//
// # Choices
//
// Allocation is per context under one lock, as in the kernel. Measured: in the CPU profile of
// BenchmarkSmallPacket (path=pio/size=64) the mutexes of a packet's whole way (allocation, chip,
// release) take about 15% of its CPU time, the allocation lock about a third of that; a lock-free
// reservation (a CAS on the fill count, as the sdma ring's Reserve) could save at most that 5%.
// But the allocator also refreshes its copy of the free count, runs a release pass when room runs
// short, and must see the halt flags and the shadow ring head move together: the kernel's lock
// keeps those one step, and so does this package.
//
// The model's chip returns credits after every packet while producers wait (the kernel enables
// the credit-return interrupt then and forces a return); otherwise at the threshold, the PBC's
// request or a forced return. As in the kernel's fill_code, a forced return reports PRCSCDisable.
// It knows that producers wait from the wait list itself (Waiting). The kernel counts the
// interrupt's users instead (credit_intr_count, hfi1_sc_wantpiobuf_intr: pio_wait's first
// waiter adds one, each sc_piobufavail that takes waiters takes one off and adds one back if
// some are left), and sc_disable empties the list without taking one off: after a Disable,
// Restart or halt that flushed waiters, the kernel's credit-return interrupt stays on with
// nobody waiting, while the model's chip goes back to returning credits only at the threshold,
// the PBC's request or a forced return.
//
// The wait list is the kernel's piowait: QueueWaitSent is pio_wait, iowait_queue(pkts_sent, ...)
// with the Waiter's priority (SetPriority, the iowait's u8 priority): a waiter that sent no packet
// in its pass (pktsSent false: its starved count grows) or has a priority above 0 goes to the head,
// one that sent packets and has none to the tail (its starved count back to 0); a release pass
// takes up to WaitBatchSize waiters off the head and wakes the first with the highest priority<<4 +
// starved count (a u8 key: iowait_priority_update_top) first, then the others in list order, as
// sc_piobufavail does; the flush of Disable, Restart, Close or a halt's recovery wakes every waiter
// queued when it starts, in list order, as sc_disable does (it splices the whole list off first:
// one parked meanwhile, even at the head, stays on the list). QueueWait is QueueWaitSent with
// pktsSent true, so a list of Waiters without priority, all queued by QueueWait (BufferAllocWait
// and SendWait, and so verbs' PIO sends, among them), stays first in, first out. A producer whose
// send pass sent packets and ended without waiting calls StarveClear(true), as hfi1_do_send calls
// iowait_starve_clear: its next wait ranks from 0. A Waiter has no txreqs: iowait_get_priority's
// one more for a VIP txreq on its tx_head has no counterpart. Every context type wakes its waiters
// here, where sc_piobufavail returns at once for ACK and user contexts, whose waiters only
// sc_disable's flush wakes in the kernel (no kernel producer waits on those): here a pass wakes
// them in the order above, so that a blocking send on such a context does not wait for a Disable.
//
// # Concurrency
//
// A SendContext is safe for concurrent use. A Buf belongs to the goroutine that allocated it
// until its copy ends. Release callbacks and wake-ups run on whichever goroutine ran the pass;
// callbacks with the release lock held: they must not block or call into the same context.
// Wake-ups run with no lock held and may retry BufferAlloc, but must not block; one never runs
// inside BufferAlloc (see Waiter).
package pio
