// Package sdma brings the Linux hfi1 send-DMA programming model to user space: transmit requests
// (TxReq) built from scattered memory, submitted to an engine's lock-free descriptor ring, and a
// software model of the SDMA hardware that gathers each packet through the DMA mapper, hands it
// to a Sink, writes its head back and completes the txreqs.
//
// # One packet's way
//
// A caller Inits a TxReq with flags, total length and a completion callback; each Add maps
// memory through the Device's dma.Mapper and appends descriptors, and the add that reaches the
// length closes the packet. Engine.Send reserves room in the ring (lock-free, many producers),
// writes the descriptors with each slot's generation, records the txreq against its last slot
// and publishes the tail in reservation order. The hardware model (one goroutine per engine, or
// the caller's Process calls) checks and gathers each packet, hands it to the Sink, advances and
// writes back the hardware head, and raises interrupts. The completion pass (on interrupts, or
// the caller's Poll) unmaps each finished txreq, calls its callback once with StatusOK or
// StatusAborted, drops its IOWait's busy count and wakes parked waiters while room lasts.
//
// # Flow control
//
// When the ring is full, Send calls the IOWait's sleep callback with a head-seqcount snapshot;
// the sleeper checks Progress under the engine's wait lock and either asks for a retry
// (ErrAgain) or parks on the wait list (ErrBusy). ParkOrRetry and DeferOrRetry are correct
// sleepers (the kernel's verbs and user_sdma ones, with the 2019 sleep-window fix). SendWait is
// the blocking send for Go callers, on a context.Context.
//
// # Kernel names
//
//	kernel                                           Go
//	struct sdma_txreq, sdma_txinit, sdma_txinit_ahg  TxReq, (*TxReq).Init, (*TxReq).InitAHG
//	sdma_txadd_page, _kvaddr, _daddr                 (*TxReq).AddPage, AddKVAddr, AddDAddr
//	sdma_txclean                                     (*TxReq).Clean
//	sdma_send_txreq, sdma_send_txlist                (*Engine).Send, (*Engine).SendList
//	(none: a blocking send)                          (*Engine).SendWait
//	sdma_progress, raw_seqcount_begin(&head_lock)    (*Engine).Progress, (*Engine).HeadSeq
//	sdma_empty, sdma_running                         (*Engine).Empty, (*Engine).Running
//	sdma_descq_freecnt, sdma_descq_inprocess         (*Engine).DescqFreeCnt, DescqInProcess
//	sdma_engine_progress_schedule                    (*Engine).ProgressSchedule
//	sdma_make_progress (interrupt or polled)         the completion pass; (*Engine).Poll
//	sdma_desc_avail, SDMA_WAIT_BATCH_SIZE            wake-up in the pass, 20 waiters at most
//	sdma_engine_interrupt                            an interrupt of the hardware model
//	sdma_sw_clean_up_task, sdma_flush                the sw clean (halt, Close)
//	struct iowait, iowait_init                       IOWait, (*IOWait).Init
//	iowait_sdma_drain, iowait_sdma_pending           (*IOWait).Drain(ctx), (*IOWait).Busy
//	iowait_queue, sde->waitlock                      (*Engine).QueueWait, LockWait, UnlockWait
//	qp.c iowait_sleep, user_sdma defer_packet_queue  (*Engine).ParkOrRetry, DeferOrRetry
//	struct sdma_map_elem, sdma_select_engine_vl      the VL→engine map, (*Device).SelectEngine
//	struct sdma_engine, struct hfi1_devdata          Engine, Device
//	sdma_init, sdma_exit                             NewDevice, (*Device).Close / Shutdown
//	descq_full_count and the interrupt counters      (*Engine).Stats
//	ib_dma_mapping_ops (the 2006 seed)               dma.Mapper
//	dma_pool_create/alloc/free                       dma.Pool
//
// # Errors
//
// The kernel's errnos are sentinels: -ENODATA ErrNoData, -EMSGSIZE ErrMsgSize, -ENOSPC
// ErrMapping, -ENOMEM ErrNoDesc, -EINVAL ErrInvalid, -EBUSY ErrBusy, -ECOMM ErrNotRunning,
// -EAGAIN ErrAgain, -EIOCBQUEUED ErrQueued. Typed errors (TxError, ConfigError, HaltError,
// SinkError) carry detail and match them with errors.Is.
//
// # Concurrency
//
// Device and Engine are safe for concurrent use. A TxReq belongs to one goroutine at a time: the
// caller's while it is built and after its callback ran, the engine's between Send and the
// callback. Callbacks run on the completion goroutine with the engine's head lock held: they
// must not block.
package sdma
