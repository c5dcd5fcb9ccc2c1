package sdma

import (
	"math/bits"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// TestPadAddressBeyond48Bits: the shared pad that every 1..3-byte pad descriptor points at
// (dd->sdma_pad_phys) is a bus address from the mapper like any other. A mapper that hands it out
// beyond the descriptor's 48 bits (here an IOMMU with a 56-bit IOVA space and 1 TiB granules,
// shared with memory mapped before the device was made, so that its cursor is past 2^48) must
// not get a device whose pad descriptors are silently masked (_pad_sdma_tx_descs's
// make_tx_sdma_desc masks; gosdma promises an error instead): the chip would read the pad from
// another address, halting the engine (nothing mapped there) or padding the packet with another
// mapping's bytes. NewDevice refuses such a pad (ErrMapping) and leaves nothing mapped.
func TestPadAddressBeyond48Bits(t *testing.T) {
	if bits.UintSize < 64 {
		t.Skip("1 TiB IOVA granules need a 64-bit int")
	}
	granule := 40 // a variable shift: the constant 1<<40 does not compile where int is 32 bits
	iommu, err := dma.NewIOMMU(dma.IOMMUConfig{PageSize: 1 << granule, IOVABits: 56})
	require.NoError(t, err)
	// Coherent memory of the caller's, mapped until after the device is made: the IOVA cursor
	// walks past the 256 granules below 2^48.
	var held []*dma.Coherent
	for range 1<<(desc.PhyAddrWidth-granule) + 8 {
		c, err := iommu.AllocCoherent(64)
		require.NoError(t, err)
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			require.NoError(t, iommu.FreeCoherent(c))
		}
	}()
	base := iommu.LiveCount()

	dev, err := NewDevice(Config{Mapper: iommu, Manual: true})
	if err == nil {
		defer dev.Close()
		// Before the fix: the pad at 0x1xxxxxxxxxxxx, and a 5-byte packet of held[0] (below
		// 2^48) halted the engine reading its pad descriptor at the masked address.
		t.Fatalf("NewDevice took a pad at bus address %#x, beyond 48 bits", dev.padAddr())
	}
	te := txTestErr(t, err, ErrMapping)
	assert.Contains(t, te.Reason, "beyond 48 bits")
	assert.Equal(t, base, iommu.LiveCount(), "the refused pad was freed: %v", iommu.Live())
}
