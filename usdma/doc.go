// Package usdma sends whole messages the way PSM does through hfi1's user SDMA: a packet queue
// (PktQ) takes a request of up to 8 data vectors and a header template, splits the data into
// MTU-sized packets, builds their headers with the engine's AHG (the first packet's header is
// stored in an AHG entry, the later ones are patched by update words), keeps the vectors pinned
// across requests in a cache, and reports each request's end in a completion ring that a
// poller reads without locks. It sits above package sdma and uses only its exported API.
//
// # A message's way
//
// Submit validates the request as the kernel does, claims its completion slot (QUEUED), pins
// the vectors, picks the engine from the destination LID and the VL, allocates an AHG entry
// for a multi-packet request, and then, at most MaxPktsPerQueue packets at a time, builds
// txreqs from the queue's allocator and hands them to the engine with SendList (an empty
// allocator sends what is built and waits for the queue's packets in flight to give txreqs
// back, failing with ENOMEM only when none is in flight). Packet 0 carries
// the template's header (AHG_COPY stores it in the entry); packet k carries update words for
// BTH.PSN (template PSN + k, masked to 24 or 31 bits; BTH.A on the last packet), the KDETH eager
// offset (template offset + bytes before it) and, when its length differs from the template's,
// PBC.LengthDWs and LRH.PktLen. With no AHG entry free (or Config.DisableAHG), every packet
// carries a full header built the same way. Payload is added one descriptor per page piece.
// When the ring is full the queue goes DEFERRED on the engine's wait list (the
// defer_packet_queue sleeper, with the 2019 sleep-window fix) and Submit waits until the
// completion pass makes it ACTIVE again, retrying every Config.Timeout (SDMA_IOWAIT_TIMEOUT).
// Each packet's completion frees its txreq; the last one releases the pins and writes the slot
// COMPLETE, or ERROR, exactly once: with the errno of the error that stopped sending if packets
// were left unsent (the kernel's free_req), else with the aborted packets' errcode.
//
// # Completion ring
//
// Comp(slot) reads an entry without locks, as PSM polls the ring the kernel maps for it: the
// errcode is stored before the status, the status store publishes it (see compEntry). Wait
// blocks a Go caller until a slot's request ended, or its context is done.
//
// # Differences from the kernel
//
// The zero Config is the kernel's default cap_mask but for two capabilities: it uses the
// engine's AHG (HFI1_CAP_SDMA_AHG in the user capabilities, off by default; Config.DisableAHG)
// and 24-bit PSNs (HFI1_CAP_EXTENDED_PSN, a global capability that user_sdma reads with
// HFI1_CAP_IS_KSET, on by default; Config.ExtendedPSN). The template's PBC static rate control
// count (pbc[2]) is sent as given, as the default HFI1_CAP_STATIC_RATE_CTRL in the user
// capabilities has it (Config.DisableStaticRate zeroes it).
//
// A request pass builds MAX_PKTS_PER_QUEUE (16) packets before handing them to the engine, as
// user_sdma.h defines it; the kernel's process_request passes initial_pkt_count (8) instead.
// EXPECTED (TID) requests are refused with ErrExpected: they need the receive side's TID
// entries, which gosdma does not model. The P_Key check and the SC-to-VL table are reduced to
// "VL below Config.NumVLs (the device's NumVLs unless fewer are set: vls_operational) and SC
// equal to VL". The checks the kernel makes after it claimed the
// slot run before the claim here, so a bad request changes nothing (the kernel ends the slot
// ERROR with -EINVAL: at once for the packet and vector counts, the template's opcode, SC/VL
// and LNH and an empty data vector, after marking it QUEUED for check_header_template's); a
// busy slot is still found first (ErrSlotInUse), as the kernel's claim comes before those
// checks. They also come before the engine check here: a request on a stopped engine whose
// fragment size or template length is bad is ErrInvalid, where the kernel, checking those on
// packet 0, ends it -ECOMM first. Submit also refuses what the kernel lets through: an io vector
// count in Ctrl below 1 + the data vectors given (a Submit is one request, where the kernel's
// writev may carry several: hfi1_write_iter makes the vectors past the count the next request,
// its sdma_req_info and header first, so that request is a Submit of its own), an opcode
// other than EXPECTED and EAGER (sent as EAGER), an info.NPkts that does not split the data
// exactly (the kernel sends NPkts packets, failing with -EFAULT if the data runs out first), and
// a fragment size over the MTU or MAX_SDMA_PKT_SIZE less the header (sdma_txinit fails such
// packets with -EMSGSIZE). A one-packet message of a length that is not a multiple of 4 is sent
// padded. A template asking for more than the data rounded up to a dword is refused with
// ErrInvalid, and so is one whose first packet carries no payload (LRH length 60 bytes, header
// and ICRC) with 4 bytes of data or more, where the kernel ends the slot ERROR with -EFAULT
// ("Request has data but pkt len is 0", user_sdma_send_pkts). For the first two the kernel's
// payload walk (hfi1_add_pages_to_sdma_packet, since the 2023 multi-iovec fix) goes on past the
// request's last vector, into iovs entries this request did not set (before that fix the packet
// was left unclosed and sdma_send_txlist failed it, -EINVAL). Submit returns as soon as its
// packets are in the ring, also after an error: the slot ends ERROR when the packets already
// handed over complete (the kernel waits for them). A request whose packets were all handed
// over ends ERROR if any of them completed aborted (user_sdma_txreq_cb looks only at the last
// one's status).
// A request that stopped sending early gives its AHG entry back too (the kernel frees it only
// once seqsubmitted reaches npkts, so its error path keeps the entry). Every batch of an AHG
// request goes in the engine epoch packet 0 was sent in (sdma.Engine.SendListIn): a halt that
// aborted packet 0 before the chip stored its header, coming after the request's last look at its
// failure, makes the engine refuse the next batch (sdma.ErrReset) and the request ends ERROR
// (EFAULT), where the kernel's user_sdma_send_pkts can send that batch into the recovered ring,
// whose chip then patches the entry's previous header (the previous request's destination); a
// halt after packet 0 completed does not fail the request. Pinning is registering the vector with the device
// (sdma.Device.Register): page pieces are added with AddKVAddr, which finds the registration and
// maps nothing, rather than mapped per packet (sdma_txadd_page's dma_map_page); a vector that
// cannot be registered is mapped per packet instead. The pin cache's limit is per queue,
// Config.PinLimit pages, DefaultPinLimit (the kernel's cache_size default, 256 MB) unless set,
// with NoPinLimit for none; the kernel's is the cache_size module parameter, shared by every
// queue's cache. Its test is hfi1_can_pin_pages' cache check (refused when pinned + new pages >
// limit; evict the page count to pin, look again only if that much was cleared, else pin
// anyway). A vector at a cached address with another length keeps that node, as
// pin_vector_pages does: a longer one pins only the pages past the node's end, a shorter one
// nothing (PinStats.Resized). A request that stops with packets unsent takes its vectors' nodes
// out of the cache, as the kernel's free_req does (user_sdma_free_request(req, true)), though a
// node another request holds is unmapped only when that one ends (PinStats.Dropped), and
// Invalidate takes a node a request holds out of the cache at once, where the kernel's
// sdma_rb_invalidate keeps it for later vectors at its address (see PktQ.Invalidate). The
// RLIMIT_MEMLOCK checks before the cache check (the process's pinned_vm, a quarter of the
// limit shared among the user contexts, skipped with CAP_IPC_LOCK) are not modelled: a Go
// process registers memory with a simulated device and locks nothing.
//
// # Kernel names
//
//	kernel (user_sdma.[ch], mmu_rb.c, uapi hfi1_user.h)  Go
//	struct hfi1_user_sdma_pkt_q, hfi1_user_sdma_alloc_queues  PktQ, New
//	hfi1_user_sdma_free_queues                            (*PktQ).Close
//	hfi1_user_sdma_process_request                        (*PktQ).Submit
//	struct sdma_req_info, req_opcode, req_iovcnt          ReqInfo, Opcode, IOVCnt, Ctrl
//	enum sdma_req_opcode EXPECTED, EAGER                  Expected (refused), Eager
//	struct hfi1_pkt_header, struct hfi1_kdeth_header      Header (64 bytes, uapi byte order), Template
//	struct user_sdma_request                              the slot's request (unexported)
//	struct user_sdma_txreq, pq->txreq_cache               TxReq, Config.Alloc (any alloc.Allocator)
//	struct iowait busy, iowait_init                       the queue's embedded sdma.IOWait
//	enum pkt_q_sdma_state, pq->state                      QState (Active, Deferred), (*PktQ).State
//	defer_packet_queue, activate_packet_queue             the queue's sleep and wakeup callbacks
//	SDMA_IOWAIT_TIMEOUT                                   IOWaitTimeout, Config.Timeout
//	MAX_VECTORS_PER_REQ, MAX_PKTS_PER_QUEUE               MaxVectorsPerReq, MaxPktsPerQueue
//	hfi1_sdma_comp_ring_size (sdma_comp_size)             DefaultSlots, Config.Slots
//	user_sdma_send_pkts, compute_data_length              the send loop (unexported)
//	check_header_template                                 Submit's validation
//	user_sdma_txadd_ahg (SDMA_TXREQ_F_AHG_COPY)           packet 0 of an AHG request
//	set_txreq_header_ahg, ahg_header_set                  later packets: USE_AHG update words
//	set_txreq_header, set_pkt_bth_psn                     full headers (no AHG entry free)
//	sdma_ahg_alloc, sdma_ahg_free                         sdma's (*Engine).AHGAlloc, AHGFree
//	user_sdma_txadd, sdma_txadd_page per page piece       one AddKVAddr per page piece of a pinned vector
//	user_sdma_txreq_cb, user_sdma_free_request            the packet callback; the request's end
//	struct hfi1_sdma_comp_entry, set_comp_state           CompEntry, (*PktQ).Comp, Wait
//	enum hfi1_sdma_comp_state FREE/QUEUED/COMPLETE/ERROR  CompState Free, Queued, Complete, Error
//	mmu_rb handler, struct sdma_mmu_node                  the pin cache (unexported), PinStats
//	pin_vector_pages, sdma_rb_evict, hfi1_can_pin_pages   pinning on Submit, LRU eviction, Config.PinLimit
//	cache_size module parameter (256 MB)                  DefaultPinLimit (pages)
//	MMU notifier invalidate (sdma_rb_invalidate)          (*PktQ).Invalidate
package usdma
