package pio

// PBC is the per-buffer control word, the first quadword of every PIO (and SDMA) packet on the
// chip (hfi1: the pbc of create_pbc; layout from hfi.h / chip.h for WFR). The chip reads it from
// the start-of-packet block and does not send it on the wire.
//
//	bits   field
//	 0..11  LengthDWs: the whole packet, PBC included, in dwords   (PBC_LENGTH_DWS)
//	12..15  VL                                                     (PBC_VL)
//	16..21  -
//	22      FECN                                                   (PBC_FECN)
//	23      TestBadICRC                                            (PBC_TEST_BAD_ICRC)
//	24      InsertBypassICRC                                       (PBC_INSERT_BYPASS_ICRC)
//	25      CreditReturn: return credits once this packet is sent  (PBC_CREDIT_RETURN)
//	26..27  InsertHCRC: 0 local KDETH, 1 global KDETH, 2 none      (PBC_INSERT_HCRC)
//	28      PacketBypass                                           (PBC_PACKET_BYPASS)
//	29      TestEBP                                                (PBC_TEST_EBP)
//	30      DCInfo (SC[4] of a 9B packet)                          (PBC_DC_INFO)
//	31      Intr                                                   (PBC_INTR)
//	32..47  StaticRateControlCount                                 (PBC_STATIC_RATE_CONTROL_COUNT)
type PBC uint64

// PBC flags (hfi1: PBC_* in hfi.h).
const (
	PBCIntr             PBC = 1 << 31 // PBC_INTR
	PBCDCInfo           PBC = 1 << 30 // PBC_DC_INFO (PBC_DC_INFO_SHIFT 30)
	PBCTestEBP          PBC = 1 << 29 // PBC_TEST_EBP
	PBCPacketBypass     PBC = 1 << 28 // PBC_PACKET_BYPASS
	PBCCreditReturn     PBC = 1 << 25 // PBC_CREDIT_RETURN
	PBCInsertBypassICRC PBC = 1 << 24 // PBC_INSERT_BYPASS_ICRC
	PBCTestBadICRC      PBC = 1 << 23 // PBC_TEST_BAD_ICRC
	PBCFECN             PBC = 1 << 22 // PBC_FECN
)

// PBC fields (hfi1: the *_SHIFT and *_MASK pairs in hfi.h).
const (
	PBCStaticRateShift = 32     // PBC_STATIC_RATE_CONTROL_COUNT_SHIFT
	PBCStaticRateMask  = 0xffff // PBC_STATIC_RATE_CONTROL_COUNT_MASK
	PBCInsertHCRCShift = 26     // PBC_INSERT_HCRC_SHIFT
	PBCInsertHCRCMask  = 0x3    // PBC_INSERT_HCRC_MASK
	PBCVLShift         = 12     // PBC_VL_SHIFT
	PBCVLMask          = 0xf    // PBC_VL_MASK
	PBCLengthDWsShift  = 0      // PBC_LENGTH_DWS_SHIFT
	PBCLengthDWsMask   = 0xfff  // PBC_LENGTH_DWS_MASK

	// MaxPacketDWs is the longest packet a PBC can describe, PBC included, in dwords.
	MaxPacketDWs = PBCLengthDWsMask
)

// InsertHCRC values (hfi1: PBC_IHCRC_*).
const (
	IHCRCLocalKDETH  = 0x0 // PBC_IHCRC_LKDETH: insert at the local KDETH offset
	IHCRCGlobalKDETH = 0x1 // PBC_IHCRC_GKDETH: insert at the global KDETH offset
	IHCRCNone        = 0x2 // PBC_IHCRC_NONE: no HCRC inserted
)

// CreatePBC builds a PBC (hfi1: create_pbc): flags, the static-rate delay count, InsertHCRC =
// none, the VL and the packet length in dwords (PBC included), each field masked to its width as
// the kernel masks it.
func CreatePBC(flags PBC, delay uint16, vl uint8, dwLen uint32) PBC {
	return flags |
		PBC(delay)<<PBCStaticRateShift |
		PBC(IHCRCNone)<<PBCInsertHCRCShift |
		PBC(uint64(vl)&PBCVLMask)<<PBCVLShift |
		PBC(uint64(dwLen)&PBCLengthDWsMask)<<PBCLengthDWsShift
}

// LengthDWs returns the packet length in dwords, PBC included.
func (p PBC) LengthDWs() int { return int(uint64(p) >> PBCLengthDWsShift & PBCLengthDWsMask) }

// VL returns the virtual lane.
func (p PBC) VL() uint8 { return uint8(uint64(p) >> PBCVLShift & PBCVLMask) }

// InsertHCRC returns the HCRC insertion mode (IHCRC*).
func (p PBC) InsertHCRC() int { return int(uint64(p) >> PBCInsertHCRCShift & PBCInsertHCRCMask) }

// StaticRate returns the static-rate delay count.
func (p PBC) StaticRate() uint16 { return uint16(uint64(p) >> PBCStaticRateShift & PBCStaticRateMask) }

// Credit return word: what the chip writes back to host memory (hfi1: struct credit_return's
// cr[], CR_* in chip.h). Bits 0..10 are the context's free counter (in blocks, modulo 2048),
// bit 11 a status error, bits 12..15 why the credits came back.
const (
	crCounterMask    = 0x7ff         // CR_COUNTER_MASK (CR_COUNTER_SHIFT 0)
	crStatus         = 1 << 11       // CR_STATUS_SMASK
	crDueToPBC       = 1 << 12       // CR_CREDIT_RETURN_DUE_TO_PBC_SMASK
	crDueToThreshold = 1 << 13       // CR_CREDIT_RETURN_DUE_TO_THRESHOLD_SMASK
	crDueToErr       = 1 << 14       // CR_CREDIT_RETURN_DUE_TO_ERR_SMASK
	crDueToForce     = 1 << 15       // CR_CREDIT_RETURN_DUE_TO_FORCE_SMASK
	blockDWs         = BlockSize / 4 // BLOCK_DWORDS
	blockQWs         = BlockSize / 8 // PIO_BLOCK_QWS
	pbcBytes         = 8
)

// ReleaseCode tells a release callback why its credits came back (hfi1: the PRC_* bits; more than
// one may be set). PRCStatusErr, PRCFillErr and PRCForce are defined as the kernel defines them
// but never produced: the chip model reports no status or fill error (a packet it cannot send
// halts the context, whose flush releases it with PRCSCDisable), and a forced return reports
// PRCSCDisable, as the kernel's fill_code maps it.
type ReleaseCode uint8

// Release codes (hfi1: PRC_*).
const (
	PRCOK        ReleaseCode = 0    // PRC_OK: no known error
	PRCStatusErr ReleaseCode = 0x01 // PRC_STATUS_ERR: a status error; defined by the kernel, never produced (see fillCode)
	PRCPBC       ReleaseCode = 0x02 // PRC_PBC: the packet's PBC asked for the return
	PRCThreshold ReleaseCode = 0x04 // PRC_THRESHOLD: unreturned credits passed the threshold
	PRCFillErr   ReleaseCode = 0x08 // PRC_FILL_ERR: a fill error; defined by the kernel, never produced (see fillCode)
	PRCForce     ReleaseCode = 0x10 // PRC_FORCE: defined by the kernel, never produced (see fillCode)
	PRCSCDisable ReleaseCode = 0x20 // PRC_SC_DISABLE: the context was disabled (halt, Disable, Close) or a forced return
)

// Err reports whether the code carries an error: a status or fill error (which this package's
// chip never reports), or the clean-up of a disabled context. A forced credit return also carries
// PRCSCDisable (as in the kernel); a packet released that way was sent, but callers cannot tell it
// from one flushed by a disable.
func (c ReleaseCode) Err() bool { return c&(PRCStatusErr|PRCFillErr|PRCSCDisable) != 0 }

// String lists the set bits by name ("ok" for none).
func (c ReleaseCode) String() string {
	if c == PRCOK {
		return "ok"
	}
	names := [...]string{"status-err", "pbc", "threshold", "fill-err", "force", "sc-disable", "0x40", "0x80"}
	s := ""
	for i, n := range names {
		if c&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += n
		}
	}
	return s
}

// fillCode translates a credit return word into release codes (hfi1: fill_code). As in the
// kernel, a forced return maps to PRCSCDisable, not PRCForce. The chip model never sets the
// status bit (CR_STATUS) or the error reason (CR_CREDIT_RETURN_DUE_TO_ERR) in the word it writes
// back: a packet it cannot send halts the context instead, whose flush releases every pending
// packet with PRCSCDisable. So PRCStatusErr and PRCFillErr, whose translation is kept here as
// the kernel has it, are never produced either.
func fillCode(hwFree uint64) ReleaseCode {
	var c ReleaseCode
	if hwFree&crStatus != 0 {
		c |= PRCStatusErr
	}
	if hwFree&crDueToPBC != 0 {
		c |= PRCPBC
	}
	if hwFree&crDueToThreshold != 0 {
		c |= PRCThreshold
	}
	if hwFree&crDueToErr != 0 {
		c |= PRCFillErr
	}
	if hwFree&crDueToForce != 0 {
		c |= PRCSCDisable
	}
	return c
}

// dwordsToBlocks is the number of 64-byte blocks dw dwords occupy (hfi1: dwords_to_blocks).
func dwordsToBlocks(dw int) int { return (dw + blockDWs - 1) / blockDWs }
