package sdma

import "math/bits"

// AHGAlloc allocates one of the engine's 32 AHG header entries and returns its index, for a
// sender whose packets differ only in a few header fields: the first packet stores its header
// with FlagAHGCopy, later ones patch it with FlagUseAHG and update words (hfi1: sdma_ahg_alloc).
// It returns ErrBusy when all 32 are taken (the kernel's -ENOSPC; callers then build full
// headers, as user_sdma does), and ErrInvalid for a nil engine or the zero Engine (not a
// Device's: no packet of it would be sent). Safe for concurrent use; lock-free (a CAS on the
// entry map, where the kernel takes the tail lock).
//
// The entry is the caller's until AHGFree. The chip holds an entry's header until the next
// AHG_COPY into it; because the engine processes descriptors in ring order, an entry may be
// freed as soon as the last packet using it is in the ring (user_sdma frees it then).
func (e *Engine) AHGAlloc() (int, error) {
	if e == nil {
		return -1, txErr("AHGAlloc", ErrInvalid, "nil engine")
	}
	if e.dev == nil {
		return -1, txErr("AHGAlloc", ErrInvalid, errZeroEngine)
	}
	for {
		old := e.ahgBits.Load()
		if old == ^uint32(0) {
			return -1, txErr("AHGAlloc", ErrBusy, "all 32 AHG entries in use")
		}
		i := bits.TrailingZeros32(^old) // ffz
		if e.ahgBits.CompareAndSwap(old, old|1<<i) {
			return i, nil
		}
	}
}

// AHGFree gives back an entry AHGAlloc returned (hfi1: sdma_ahg_free). An index outside
// 0..31, an entry that is not allocated, or a nil or zero engine is ErrInvalid and changes
// nothing (the kernel ignores a nil engine or an index outside 0..31 and clears the bit
// regardless).
func (e *Engine) AHGFree(entry int) error {
	if e == nil {
		return txErr("AHGFree", ErrInvalid, "nil engine")
	}
	if e.dev == nil {
		return txErr("AHGFree", ErrInvalid, errZeroEngine)
	}
	if entry < 0 || entry > MaxAHGEntry {
		return txErr("AHGFree", ErrInvalid, "AHG entry "+itoa(entry)+" out of 0.."+itoa(MaxAHGEntry))
	}
	for {
		old := e.ahgBits.Load()
		if old&(1<<entry) == 0 {
			return txErr("AHGFree", ErrInvalid, "AHG entry "+itoa(entry)+" is not allocated")
		}
		if e.ahgBits.CompareAndSwap(old, old&^(1<<entry)) {
			return nil
		}
	}
}

// errZeroEngine is the reason AHGAlloc and AHGFree give for the zero Engine (its dev is nil:
// every Engine a Device holds has its dev set by newEngine).
const errZeroEngine = "zero Engine, not one of a Device's"

// AHGInUse returns the number of AHG entries allocated now (0 for a nil engine).
func (e *Engine) AHGInUse() int {
	if e == nil {
		return 0
	}
	return bits.OnesCount32(e.ahgBits.Load())
}
