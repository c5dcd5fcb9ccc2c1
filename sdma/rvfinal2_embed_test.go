package sdma_test

import (
	"errors"
	"testing"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/sdma"
)

// rvf2RefusingSole is a mapper as a user writes one: it embeds *dma.Direct and overrides
// MapSingle and MapSingleSole to refuse every map (a quota, say). It does not know of
// MapSingleSoleHint, which the embedded Direct promotes.
type rvf2RefusingSole struct{ *dma.Direct }

var errRVF2Quota = errors.New("quota")

func (m rvf2RefusingSole) MapSingle(buf []byte, dir dma.Direction) (dma.Addr, error) {
	return 0, errRVF2Quota
}

func (m rvf2RefusingSole) MapSingleSole(buf []byte, dir dma.Direction) (dma.Addr, dma.Sole, error) {
	return 0, 0, errRVF2Quota
}

// TestRVF2EmbeddedSoleOverride: a mapper that embeds *dma.Direct and overrides MapSingleSole
// (as sdma's own handleZeroSole test mapper did before 473adcf gave it MapSingleSoleHint too)
// is a dma.SoleMapper through the promoted MapSingleSoleHint, and sdma's addKV now calls that:
// the override was bypassed and the add mapped what the mapper refuses. Now the hint is used only
// for the library's own mappers (dma.HintIsOwn), bare or under Counting/FaultInjector.
func TestRVF2EmbeddedSoleOverride(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    dma.Mapper
	}{
		{"bare", rvf2RefusingSole{dma.NewDirect()}},
		{"counting", dma.NewCounting(rvf2RefusingSole{dma.NewDirect()})},
		{"faultinjector", dma.NewFaultInjector(rvf2RefusingSole{dma.NewDirect()})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, err := sdma.NewDevice(sdma.Config{Manual: true, Mapper: tc.m})
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			var tx sdma.TxReq
			buf := make([]byte, 64)
			if err := tx.Init(0, len(buf), nil); err != nil {
				t.Fatal(err)
			}
			err = tx.AddKVAddr(dev, buf)
			if !errors.Is(err, errRVF2Quota) {
				t.Errorf("AddKVAddr through a mapper whose MapSingleSole refuses: %v, want the mapper's error", err)
			}
			_ = tx.Clean()
		})
	}
	// The library's own mappers take the hint: the test above is not passing for want of it.
	for _, m := range []dma.Mapper{dma.NewDirect(), dma.NewCounting(nil), dma.NewFaultInjector(nil)} {
		if !dma.HintIsOwn(m) {
			t.Errorf("HintIsOwn(%T) = false, want true", m)
		}
	}
	if dma.HintIsOwn(rvf2RefusingSole{dma.NewDirect()}) {
		t.Error("HintIsOwn of a type embedding *dma.Direct = true, want false")
	}
}
