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
// writes back the hardware head, and raises interrupts. A BatchSink may hold packets and send
// many at once with no copy (sendmmsg, say): the head write-back and the interrupts of a held
// packet wait until the sink's Flush has finished with it. The completion pass (on interrupts, or
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
// # States and recovery
//
// Each engine runs the kernel's state machine (hfi1: __sdma_process_event): eleven states, fourteen
// events, and this table, which is the code's stateTable cell for cell (a test checks it). Rows
// are states, columns events; a cell gives the next state ("up": s99 if go_s99_running is set,
// else s20), "+g"/"-g" when it sets or clears go_s99_running, and after a colon the work it
// starts: H err_halt_worker (wait for the halt, then e15), S sw clean (complete what the hardware
// finished OK, abort the rest of the ring and the flush list, wake every waiter, reset the ring to
// index 0, then e40), C hw clean (then e25), U sdma_hw_start_up (the generation restarts with the
// ring), T sw tear-down, F freeze notify, D unfreeze done, P a final completion pass. "." does
// nothing.
//
//	    e00     e10     e15     e25     e30     e40     e50     e60     e70     e80     e81     e82     e85     e90
//	s00 .       s10     .       .       s10+g   :T      .       .       .       .       .       .       .       .
//	s10 s00:T   .       s15:C   .       +g      .       .       :H      -g      .       .       .       .       .
//	s15 s00:T   .       .       up:U    +g      .       .       .       -g      .       .       .       .       .
//	s20 s00:T   .       .       .       s99+g   .       .       s50:H   .       s80:F   .       .       s80:F   .
//	s30 s00     .       .       .       +g      s40:C   .       .       -g      .       .       .       -g      .
//	s40 s00:S   .       .       up:U    +g      .       .       .       -g      .       .       .       -g      .
//	s50 s00:S   .       s30:S   .       +g      .       .       :H      -g      .       .       .       -g      .
//	s60 s00:S   .       s30:S   .       +g      .       .       :H      -g      .       .       .       .       .
//	s80 s00:S   .       .       .       +g      .       .       .       -g      .       s82:S   .       .       .
//	s82 s00:S   .       .       .       +g      :D      .       .       -g      .       .       up:U    .       .
//	s99 s00:S   .       .       .       .       .       .       s50:HP  s60     s80:F   .       .       s80-g:F s50:H
//
// The states: s00 hw_down, s10 hw_start_up_halt_wait, s15 hw_start_up_clean_wait, s20 idle, s30
// sw_clean_up_wait, s40 hw_clean_up_wait, s50 hw_halt_wait, s60 idle_halt_wait, s80 hw_freeze, s82
// freeze_sw_clean, s99 running. Entering s10 or s60 halts the hardware (it raises e60); entering
// s00 or s60 clears go_s99_running and entering s99 sets it; entering s99 from another state
// flushes the flush list and wakes the waiters (sdma_flush, sdma_desc_avail).
//
// A software chip has nothing to wait for, so each step's "done" event follows at once, on the
// goroutine that raised the first event: the engine's own goroutine (or Process) for a halt the
// hardware model detects, the caller for Stop, Start, sdmatest.RaiseEvent and
// sdmatest.InjectHalt, Close for e00.
// A halt therefore runs s99 → s50 → s30 → s40 → s99 before that call returns: the txreqs the
// hardware had finished complete OK, every other one in the ring or on the flush list completes
// StatusAborted exactly once, every mapping is undone, every parked waiter is woken, and new sends
// go through a ring restarted at index 0, generation 0. The device's other engines are not
// touched (the kernel's progress check of them after a halt, sdma_err_progress_check, runs only
// on A-step chips). sdmatest.EngineState and History (the last 32 transitions with their
// causes) show the way; EngineStats counts halts by HaltCause and recoveries.
//
// Sends while the engine is not in s99 go to the flush list and return ErrNotRunning; the txreq
// completes StatusAborted when the flush runs (on the engine's goroutine, or the next Process or
// Poll of a manual engine), as the kernel's flush worker does. While the ring still holds txreqs
// sent before (frozen: e80 leaves the ring alone until e81), the flush waits for the sw clean
// that completes those first (sdmatest.Freeze, Stop, Close), so that completions keep submission
// order; the kernel's flush worker would abort the ring's txreqs, then the list, at once.
// Producers are not locked out by a lock: Send reads an atomic mirror of "state == s99", and the
// sw clean waits for the producers already past that check to publish before it aborts and resets
// the ring.
//
// # Fault injection
//
// Every failure path is reachable on purpose, through package sdmatest (kept apart so that this
// package's documentation reads as the everyday API): an sdmatest.FaultPlan (sdmatest.SetFaults)
// halts the hardware model at a chosen descriptor with a chosen cause, or at random with random
// causes; sdmatest.InjectHalt halts it now; dma.FaultInjector wrapped around the mapper fails map
// calls (Add returns ErrMapping) or Translate (a CauseMemRead halt); an sdmatest.FaultSink fails
// or stalls deliveries; sdmatest.RaiseEvent raises idle, freeze, unfreeze, link-down, stop and start
// on one engine, and sdmatest.FreezeNotify, Freeze and Unfreeze freeze and unfreeze them all.
//
// # Kernel names
//
//	kernel                                           Go
//	struct sdma_txreq, sdma_txinit, sdma_txinit_ahg  TxReq, (*TxReq).Init, (*TxReq).InitAHG
//	sdma_txadd_page, _kvaddr, _daddr                 (*TxReq).AddPage, AddKVAddr, AddDAddr
//	sdma_txclean                                     (*TxReq).Clean
//	sdma_send_txreq, sdma_send_txlist                (*Engine).Send, (*Engine).SendList
//	(none: a blocking send)                          (*Engine).SendWait
//	(none: several lists in one ring epoch)          (*Engine).Epoch, (*Engine).SendListIn
//	sdma_progress, raw_seqcount_begin(&head_lock)    (*Engine).Progress, (*Engine).HeadSeq
//	sdma_ahg_alloc, sdma_ahg_free                    (*Engine).AHGAlloc, AHGFree
//	sdma_empty, sdma_running                         (*Engine).Empty, (*Engine).Running
//	sdma_descq_freecnt, sdma_descq_inprocess         (*Engine).DescqFreeCnt (in process: Config.RingSize less it)
//	sdma_engine_progress_schedule                    (*Engine).ProgressSchedule
//	sdma_make_progress (interrupt or polled)         the completion pass; (*Engine).Poll
//	sdma_desc_avail, SDMA_WAIT_BATCH_SIZE            wake-up in the pass, 20 waiters at most
//	sdma_engine_interrupt                            an interrupt of the hardware model
//	sdma_sw_clean_up_task, sdma_flush                the sw clean (halt, Stop, freeze, Close)
//	enum sdma_states, enum sdma_events               sdmatest.State (S00HwDown..S99Running), Event (E00..E90)
//	sdma_process_event, sdma_state.current_state     sdmatest.RaiseEvent, EngineState, History
//	sdma_engine_error, ALL_SDMA_ENG_HALT_ERRS        a halt of the hardware model, HaltCause
//	sdma_hw_start_up, sdma_setlengen                 the restart: ring at index 0, generation 0
//	sdma_start, sdma_event_e00_go_hw_down            (*Engine).Start, (*Engine).Stop
//	sdma_freeze_notify, sdma_freeze, sdma_unfreeze   sdmatest.FreezeNotify, Freeze, Unfreeze
//	struct iowait, iowait_init                       IOWait, (*IOWait).Init
//	iowait_sdma_drain, iowait_sdma_pending           (*IOWait).Drain(ctx), (*IOWait).Busy
//	iowait_queue, sde->waitlock                      (*Engine).QueueWait (takes the wait lock)
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
// ErrMapping (from the adds; AHGAlloc's -ENOSPC, no free AHG entry, is ErrBusy: a resource that
// frees itself, as the ring's room), -ENOMEM ErrNoDesc, -EINVAL ErrInvalid, -EBUSY ErrBusy, -ECOMM ErrNotRunning,
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
