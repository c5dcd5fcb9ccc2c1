// Package verbs sends packets by whichever of hfi1's two transmit paths suits each one, as the
// kernel's verbs layer does (hfi1_verbs_send): programmed I/O (package pio) for a packet up to
// PIOThreshold bytes, send DMA (package sdma) above it, both delivering to the same sink, each
// PIO send context as an engine of its own past the SDMA engines (see Device).
//
// # Why a package of its own
//
// The choice needs both paths, and pio and sdma are siblings that know nothing of each other:
// putting the chooser in sdma would make sdma import pio (and a PIO-only user pull in the SDMA
// engine), putting it in pio the reverse. In the kernel too it lives above both, in verbs.c. So
// verbs imports sdma and pio and nothing imports verbs: imports keep pointing down.
//
// # Order per flow
//
// A Flow is a QP: its packets reach the sink in the order they were sent, whichever path each
// took. Within a path order is the path's own (one send context, one engine per flow). Across
// paths the flow counts its packets in flight on each (the iowait's pio_busy and sdma_busy): a
// small packet goes by PIO only when no SDMA packet of the flow is in flight (get_send_routine's
// iowait_sdma_pending check; otherwise it follows the others by SDMA), and a large packet waits
// for the flow's PIO packets to drain before it goes by SDMA (pio_wait with
// HFI1_S_WAIT_PIO_DRAIN, forcing a credit return so the drain does not wait for the threshold).
// A PIO packet counts as in flight until its credits come back, which the chip does only after
// it has handed the packet to the sink. The size compared with the threshold is the packet's own;
// the kernel compares an RC or UC QP's running average (s_running_pkt_size) and the path MTU, and
// sends only some opcodes by PIO (pio_opmask), none of which a Flow has.
//
// # One API, two kinds of memory access (seed 004)
//
// Send takes the caller's []byte. The SDMA path maps each piece through the device's dma.Mapper
// (the device reads a bus address, through Translate); the PIO path copies from the CPU address
// directly, the identity, no mapping at all. That a driver can pick per packet between "give the
// device a mapped address" and "read it myself through the CPU" is what the 2006 patch's
// interposable dma mapping ops were for. TestSeed004PIOIsIdentitySDMAIsMapped holds the two
// apart with a counting mapper over an IOMMU.
//
// # Kernel names
//
//	kernel                                         Go
//	hfi1_verbs_send, get_send_routine              (*Flow).Send, the choice in it
//	piothreshold (default 256), PIO_THRESHOLD_CEILING  Config.PIOThreshold, pio.ThresholdCeiling
//	hfi1_verbs_send_pio, verbs_pio_complete        the PIO path, its release callback (pioRelease)
//	hfi1_verbs_send_dma, verbs_sdma_complete       the SDMA path, its Completer
//	struct rvt_qp + its iowait (pio_busy, sdma_busy)  Flow
//	pio_wait(HFI1_S_WAIT_PIO_DRAIN), iowait_drain  the drain before an SDMA packet, (*Flow).Drain
//	pio_select_send_context_vl, sdma_select_engine_vl  NewFlow's selector and VL
//
// Device and Flow creation are safe for concurrent use; one Flow is used by one goroutine at a
// time.
package verbs
