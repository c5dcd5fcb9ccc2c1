package sdma

import (
	"github.com/gosdma/gosdma/dma"
)

// Config configures a Device. The zero value is valid: one engine, a 2048-descriptor ring, the
// direct mapper.
type Config struct {
	// Mapper maps memory for the device; nil means dma.NewDirect().
	Mapper dma.Mapper
}

// Device is the hfi1_devdata of gosdma: it owns the DMA mapper, the shared zeroed pad buffer and
// the engines. It is safe for concurrent use.
type Device struct {
	mapper dma.Mapper    // set by NewDevice, read-only after
	pad    *dma.Coherent // 4 zeroed bytes that pad descriptors point at (dd->sdma_pad_phys)
}

// NewDevice builds a device from cfg, validating it.
func NewDevice(cfg Config) (*Device, error) {
	m := cfg.Mapper
	if m == nil {
		m = dma.NewDirect()
	}
	pad, err := m.AllocCoherent(4)
	if err != nil {
		return nil, err
	}
	return &Device{mapper: m, pad: pad}, nil
}

// Mapper returns the device's DMA mapper.
func (dev *Device) Mapper() dma.Mapper { return dev.mapper }

// padAddr is the bus address of the shared zeroed pad (sdma_pad_phys).
func (dev *Device) padAddr() dma.Addr { return dev.pad.Addr() }
