package pio

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// kInitSCPoolsAndSizes is a literal model of hfi1's init_sc_pools_and_sizes (pio.c) with the
// default pool configuration (sc_mem_pool_config: pool 0 10000 centipercent, pool 1 0) and
// sc_config_sizes (SC_KERNEL: SCS_POOL_0 x SCC_PER_VL, SC_VL15: SCS_VL15_CREDITS x 1, SC_ACK:
// SCS_ACK_CREDITS x SCC_PER_KRCVQ, SC_USER: SCS_POOL_0 x SCC_PER_CPU), the types in SC_* order
// (SC_KERNEL 0, SC_VL15 1, SC_ACK 2, SC_USER 3). ok is false where the kernel returns -EINVAL.
// zeroSize reports that it handed out pool contexts of 0 blocks (pool_blocks / count == 0),
// which the kernel accepts and ContextSizes refuses.
func kInitSCPoolsAndSizes(memSize, chipContexts, numVLs, krcv, rcv int, sdma bool, piothreshold int) (out [NumTypes]TypeSize, ok, zeroSize bool) {
	const scsPool0 = -1
	totalBlocks := memSize/BlockSize - 1
	size := [NumTypes]int{Kernel: scsPool0, VL15: VL15Credits, ACK: ACKCredits, User: scsPool0}
	if sdma {
		// u16 max_pkt_size = (piothreshold < PIO_THRESHOLD_CEILING) ? piothreshold : PIO_THRESHOLD_CEILING;
		maxPkt := int(uint16(min(piothreshold, ThresholdCeiling)))
		size[Kernel] = 3 * (maxPkt + 128) / BlockSize
	}
	totalContexts, fixedBlocks, poolCount := 0, 0, 0
	for i := range NumTypes {
		var count int
		switch Type(i) {
		case ACK:
			count = krcv // dd->n_krcv_queues
		case Kernel:
			count = InitSCPerVL * numVLs
		case User:
			count = rcv - krcv // SCC_PER_CPU: dd->num_rcv_contexts - dd->n_krcv_queues
		default:
			count = 1
		}
		if totalContexts+count > chipContexts {
			count = chipContexts - totalContexts
		}
		totalContexts += count
		if size[i] >= 0 {
			fixedBlocks += size[i] * count
		} else {
			poolCount += count
		}
		out[i] = TypeSize{Count: count, Blocks: size[i]}
	}
	if fixedBlocks > totalBlocks {
		return out, false, false
	}
	poolBlocks := totalBlocks - fixedBlocks // ab_total is 0
	blocks := poolBlocks * 10000 / 10000    // pool 0's centipercent
	if blocks == 0 && poolCount != 0 {
		return out, false, false
	}
	poolSize := 0
	if poolCount != 0 {
		poolSize = blocks / poolCount
	}
	for i := range out {
		if out[i].Blocks < 0 {
			out[i].Blocks = poolSize
		}
		if out[i].Blocks > MaxBlocks { // PIO_MAX_BLOCKS
			out[i].Blocks = MaxBlocks
		}
	}
	return out, true, poolCount != 0 && poolSize == 0
}

// TestContextSizesMatchKernel draws chip and driver parameters (send memory from a handful of
// blocks to 1 MiB, 1..160 send contexts, 1..8 VLs, receive queues and contexts, SDMA on and off,
// thresholds across the ceiling) and compares ContextSizes with kInitSCPoolsAndSizes: the same
// counts and sizes where the kernel succeeds, ErrInvalid where it fails; where the kernel would
// hand out pool contexts of 0 blocks, ContextSizes refuses (ErrInvalid, its documented choice).
func TestContextSizesMatchKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(0x73697a65, 1))
	n := 20000
	if testing.Short() {
		n = 3000
	}
	for c := range n {
		cfg := SizeConfig{
			MemSize:      BlockSize * (2 + rng.IntN(1<<14)),
			SendContexts: 1 + rng.IntN(160),
			NumVLs:       1 + rng.IntN(8),
			KrcvQueues:   1 + rng.IntN(16),
			SDMA:         rng.IntN(2) == 0,
			PIOThreshold: 1 + rng.IntN(2*ThresholdCeiling),
		}
		if rng.IntN(4) == 0 {
			cfg.MemSize = BlockSize * (2 + rng.IntN(600))
		}
		cfg.RcvContexts = cfg.KrcvQueues + rng.IntN(160)
		want, ok, zero := kInitSCPoolsAndSizes(cfg.MemSize, cfg.SendContexts, cfg.NumVLs, cfg.KrcvQueues, cfg.RcvContexts, cfg.SDMA, cfg.PIOThreshold)
		got, err := ContextSizes(cfg)
		switch {
		case !ok || zero:
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("case %d %+v: kernel -EINVAL (or 0-block contexts: %v), ContextSizes %+v, %v", c, cfg, zero, got, err)
			}
		case err != nil:
			t.Fatalf("case %d %+v: kernel %+v, ContextSizes %v", c, cfg, want, err)
		case got != want:
			t.Fatalf("case %d %+v: ContextSizes %+v, kernel %+v", c, cfg, got, want)
		}
	}
}
