package dma

// Direct is the identity mapper, after InfiniPath's ipath_dma_mapping_ops (2006): the bus address
// of a buffer is its own virtual address, so mapping costs a record and nothing else. It still
// records every live mapping, so Translate is checked exactly as an IOMMU would check it: an
// address that was never mapped, was unmapped, or is used against its direction faults.
//
// Overlapping mappings are fine (the same buffer mapped twice is two mappings, each unmapped once).
// Because the bus address is the CPU address, a stale address can become valid again if the Go
// heap reuses the memory for a buffer that is mapped later; use IOMMU to catch use-after-unmap
// deterministically.
//
// A Direct is safe for concurrent use. The zero value is not usable (its methods panic, as a nil
// receiver's do); call NewDirect.
type Direct struct {
	core
}

// directShift is the granule of Direct's page table, PageSize.
const directShift = 12

// NewDirect returns an identity mapper.
func NewDirect() *Direct {
	d := new(Direct)
	d.init(directShift, nil)
	return d
}

var _ Mapper = (*Direct)(nil)
