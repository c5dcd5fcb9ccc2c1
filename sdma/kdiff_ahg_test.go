package sdma

import (
	"errors"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/require"
)

// kAHG is an engine's sde->ahg_bits with sdma_ahg_alloc and sdma_ahg_free (sdma.c), for
// TestAHGAllocFreeMatchesKernel. The word is 64 bits, initialised (sdma_init) to
// 0xfffffffe00000000ULL, "insure there is always a zero bit": bit 32 is the zero that ffz finds
// once entries 0..31 are all taken.
type kAHG struct{ bits uint64 }

// alloc is sdma_ahg_alloc: nr = ffz(ahg_bits); nr > 31 is -ENOSPC; else test_and_set_bit(nr).
func (k *kAHG) alloc() (int, bool) {
	nr := bits.TrailingZeros64(^k.bits) // ffz
	if nr > 31 {
		return -1, false // -ENOSPC
	}
	k.bits |= 1 << nr
	return nr, true
}

// free is sdma_ahg_free: an index outside 0..31 returns; else clear_bit, whether or not the bit
// was set.
func (k *kAHG) free(i int) {
	if i < 0 || i > 31 {
		return
	}
	k.bits &^= 1 << i
}

// TestAHGAllocFreeMatchesKernel runs random sequences of AHGAlloc and AHGFree (of allocated
// entries, entries not allocated, and indexes outside 0..31) against kAHG: the same entry
// allocated (lowest free first), ErrBusy exactly where the kernel says -ENOSPC, and the same
// entries in use after every step. A free the kernel ignores or that clears a clear bit is
// ErrInvalid here and changes nothing, as the kernel's changes nothing. The entries survive a
// halt and its recovery, as ahg_bits does (only sdma_init sets it).
func TestAHGAllocFreeMatchesKernel(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true})
	e := dev.Engine(0)
	k := &kAHG{bits: 0xfffffffe00000000}
	rng, n := kdiffRand(0x616867, 20000, 4000)
	inUse := func() uint32 { return uint32(k.bits) }
	for step := range n {
		switch r := rng.IntN(16); {
		case r < 7:
			got, err := e.AHGAlloc()
			want, ok := k.alloc()
			if ok {
				require.NoError(t, err, "step %d", step)
				require.Equal(t, want, got, "step %d: ffz", step)
			} else {
				require.True(t, errors.Is(err, ErrBusy), "step %d: the kernel's -ENOSPC, got %v", step, err)
			}
		case r < 14:
			i := rng.IntN(32)
			wasSet := k.bits&(1<<i) != 0
			err := e.AHGFree(i)
			k.free(i)
			if wasSet {
				require.NoError(t, err, "step %d: free %d", step, i)
			} else {
				require.ErrorIs(t, err, ErrInvalid, "step %d: free of %d, not allocated", step, i)
			}
		case r < 15:
			i := []int{-1, 32, 33, 63, 64, -1000}[rng.IntN(6)]
			require.ErrorIs(t, e.AHGFree(i), ErrInvalid, "step %d: free %d", step, i)
			k.free(i)
		default:
			if rng.IntN(8) == 0 {
				require.NoError(t, e.injectHalt(CauseHalt), "step %d", step) // halt and recover: ahg_bits untouched
				require.True(t, e.Running(), "step %d: recovered", step)
			}
		}
		require.Equal(t, inUse(), e.ahgBits.Load(), "step %d: entries in use", step)
		require.Equal(t, bits.OnesCount32(inUse()), e.AHGInUse(), "step %d: count in use", step)
		require.Equal(t, k.bits>>32, uint64(0xfffffffe), "step %d: the model's high word", step)
	}
}
