package pio

import (
	"math"
	"strconv"
)

// Sizes and limits (hfi1: pio.c and pio.h).
const (
	BlockSize        = 64   // PIO_BLOCK_SIZE: one credit
	MaxBlocks        = 1024 // PIO_MAX_BLOCKS: the most credits one context may have
	WaitBatchSize    = 5    // PIO_WAIT_BATCH_SIZE: waiters woken per credit-return pass
	ThresholdCeiling = 4096 // PIO_THRESHOLD_CEILING: the largest PIO packet the kernel sizes for
	DefaultThreshold = 256  // the piothreshold module parameter's default: PIO up to 256 bytes
	ACKCredits       = 32   // SCS_ACK_CREDITS
	VL15Credits      = 102  // SCS_VL15_CREDITS: 3 packets of 2048 bytes of data + 128 of header
	InitSCPerVL      = 2    // INIT_SC_PER_VL: kernel contexts per data VL

	// DefaultMemSize is the model's PIO send memory (a real chip reports SEND_PIO_MEM_SIZE):
	// 160 KiB, 2560 blocks.
	DefaultMemSize = 160 << 10
)

// Type is a send context type (hfi1: SC_KERNEL, SC_VL15, SC_ACK, SC_USER).
type Type uint8

const (
	Kernel Type = 0 // SC_KERNEL: verbs traffic, sized for 3 packets of the PIO threshold when SDMA is on
	VL15   Type = 1 // SC_VL15: management packets, VL15Credits
	ACK    Type = 2 // SC_ACK: one per kernel receive queue, ACKCredits
	User   Type = 3 // SC_USER: one per user receive context, an even share of pool 0

	// NumTypes is the number of context types (SC_MAX).
	NumTypes = 4
)

// String names the type as the kernel's sc_type_name would ("kernel", "vl15", "ack", "user").
// (The kernel's own table lists "kernel", "ack", "user", "vl15", out of step with the SC_*
// values; gosdma names each type after its constant.)
func (t Type) String() string {
	switch t {
	case Kernel:
		return "kernel"
	case VL15:
		return "vl15"
	case ACK:
		return "ack"
	case User:
		return "user"
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// SizeConfig is the input to ContextSizes: the chip and driver parameters the kernel's
// init_sc_pools_and_sizes reads.
type SizeConfig struct {
	MemSize      int  // PIO send memory in bytes (chip_pio_mem_size); 0: DefaultMemSize
	SendContexts int  // contexts the chip has (chip_send_contexts); 0: 160
	NumVLs       int  // data VLs (num_vls), 1..8; 0: 8
	KrcvQueues   int  // kernel receive queues (n_krcv_queues): the ACK context count; 0: 1
	RcvContexts  int  // receive contexts (num_rcv_contexts): user contexts = this - KrcvQueues; 0: KrcvQueues
	SDMA         bool // SDMA enabled (HFI1_CAP_SDMA): kernel contexts get the fixed 3-deep size
	PIOThreshold int  // piothreshold; 0: DefaultThreshold
}

// TypeSize is one context type's count and size in blocks (hfi1: struct sc_config_sizes after
// init_sc_pools_and_sizes).
type TypeSize struct {
	Count  int // contexts of this type
	Blocks int // credits of each
}

// ContextSizes computes each type's context count and size (hfi1: init_sc_pools_and_sizes, with
// the default pool configuration: 100% of the memory in pool 0).
//
// Kernel contexts: 2 per data VL (INIT_SC_PER_VL); with SDMA on, 3 × (min(threshold, 4096) + 128)
// / 64 blocks each (3-deep buffering of the largest PIO packet plus a 128-byte header), else an
// even share of pool 0. VL15: one of 102 blocks. ACK: one per kernel receive queue, 32 blocks.
// User: one per remaining receive context, an even share of pool 0. Counts are clipped to the
// chip's contexts in type order, sizes to MaxBlocks. The memory is (MemSize / 64) − 1 blocks (block
// 0 is not used). An over-committed configuration, a negative field or more than 8 data VLs is an
// error matching ErrInvalid.
func ContextSizes(cfg SizeConfig) ([NumTypes]TypeSize, error) {
	var out [NumTypes]TypeSize
	cfg = cfg.withDefaults()
	for _, f := range []struct {
		name string
		v    int
	}{
		{"MemSize", cfg.MemSize}, {"SendContexts", cfg.SendContexts}, {"NumVLs", cfg.NumVLs},
		{"KrcvQueues", cfg.KrcvQueues}, {"RcvContexts", cfg.RcvContexts}, {"PIOThreshold", cfg.PIOThreshold},
	} {
		if f.v < 0 {
			return out, &Error{Op: "ContextSizes", Msg: "negative " + f.name + " " + strconv.Itoa(f.v), Err: ErrInvalid}
		}
	}
	if cfg.NumVLs > 8 {
		return out, &Error{Op: "ContextSizes", Msg: "NumVLs " + strconv.Itoa(cfg.NumVLs) + " outside 1..8 (num_vls)", Err: ErrInvalid}
	}
	total := cfg.MemSize/BlockSize - 1
	const pool0 = -1 // SCS_POOL_0
	size := [NumTypes]int{Kernel: pool0, VL15: VL15Credits, ACK: ACKCredits, User: pool0}
	if cfg.SDMA {
		size[Kernel] = 3 * (min(cfg.PIOThreshold, ThresholdCeiling) + 128) / BlockSize
	}
	count := [NumTypes]int{
		Kernel: InitSCPerVL * cfg.NumVLs,
		VL15:   1,
		ACK:    cfg.KrcvQueues,
		User:   cfg.RcvContexts - cfg.KrcvQueues,
	}
	contexts, fixed, poolCount := 0, 0, 0
	for t := range NumTypes {
		// Clipped without overflow (c > SendContexts - contexts, not contexts + c > ...): a
		// count near MaxInt wrapped past the test and was kept whole.
		c := min(max(count[t], 0), cfg.SendContexts-contexts)
		contexts += c
		out[t].Count = c
		if size[t] == pool0 {
			poolCount += c
		} else if c > 0 && size[t] > (math.MaxInt-fixed)/c { // size × c past MaxInt: more than any memory
			return out, &Error{Op: "ContextSizes", Msg: "fixed block count larger than total block count " + strconv.Itoa(total), Err: ErrInvalid}
		} else {
			fixed += size[t] * c
		}
	}
	if fixed > total {
		return out, &Error{Op: "ContextSizes", Msg: "fixed block count " + strconv.Itoa(fixed) + " larger than total block count " + strconv.Itoa(total), Err: ErrInvalid}
	}
	poolSize := 0
	if poolCount > 0 {
		poolSize = (total - fixed) / poolCount
		if poolSize == 0 { // the kernel refuses only total-fixed == 0 and sizes the rest 0 credits
			return out, &Error{Op: "ContextSizes", Msg: "pool 0 has " + strconv.Itoa(poolCount) + " contexts but " + strconv.Itoa(total-fixed) + " blocks (0 credits each)", Err: ErrInvalid}
		}
	}
	for t := range NumTypes {
		s := size[t]
		if s == pool0 {
			s = poolSize
		}
		out[t].Blocks = min(s, MaxBlocks)
	}
	return out, nil
}

func (cfg SizeConfig) withDefaults() SizeConfig {
	if cfg.MemSize == 0 {
		cfg.MemSize = DefaultMemSize
	}
	if cfg.SendContexts == 0 {
		cfg.SendContexts = 160
	}
	if cfg.NumVLs == 0 {
		cfg.NumVLs = 8
	}
	if cfg.KrcvQueues == 0 {
		cfg.KrcvQueues = 1
	}
	if cfg.RcvContexts == 0 {
		cfg.RcvContexts = cfg.KrcvQueues
	}
	if cfg.PIOThreshold == 0 {
		cfg.PIOThreshold = DefaultThreshold
	}
	return cfg
}

// MTUToThreshold is the credit-return threshold that returns credits when one MTU plus a
// header's worth of blocks remain (hfi1: sc_mtu_to_threshold; hdrqentsize in dwords).
func MTUToThreshold(credits, mtu, hdrqentsize int) int {
	release := (mtu + hdrqentsize<<2 + BlockSize - 1) / BlockSize
	if credits <= release {
		return 1
	}
	return credits - release
}

// PercentToThreshold is percent of the credits (hfi1: sc_percent_to_threshold).
func PercentToThreshold(credits, percent int) int { return credits * percent / 100 }

// DefaultCreditThreshold is the threshold sc_alloc programs for a context of type t: half the
// credits for ACK, percent of them for User (user_credit_return_threshold, 33 by default), and the
// smaller of half and MTUToThreshold(mtu, hdrqentsize) for kernel and VL15 contexts.
func DefaultCreditThreshold(t Type, credits, mtu, hdrqentsize int) int {
	switch t {
	case ACK:
		return PercentToThreshold(credits, 50)
	case User:
		return PercentToThreshold(credits, 33)
	}
	return min(PercentToThreshold(credits, 50), MTUToThreshold(credits, mtu, hdrqentsize))
}
