package desc

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The expected words below are written out by hand from the field positions of the kernel's
// drivers/infiniband/hw/hfi1/sdma.h (SDMA_DESC0_* and SDMA_DESC1_*_SHIFT/_WIDTH/_FLAG), not
// computed with this package's constants.

func TestFieldPositionsByHand(t *testing.T) {
	var d Desc
	d.SetFirst(true)
	assert.Equal(t, Desc{Qw0: 0x8000_0000_0000_0000}, d, "FIRST is qw0 bit 63")

	d = Desc{}
	d.SetLast(true)
	assert.Equal(t, Desc{Qw0: 0x4000_0000_0000_0000}, d, "LAST is qw0 bit 62")

	d = Desc{}
	require.NoError(t, d.SetLen(1))
	assert.Equal(t, Desc{Qw0: 0x0001_0000_0000_0000}, d, "byte count starts at bit 48")
	require.NoError(t, d.SetLen(16383))
	assert.Equal(t, Desc{Qw0: 0x3fff_0000_0000_0000}, d, "byte count is bits 61:48")

	d = Desc{}
	require.NoError(t, d.SetAddr(0xffff_ffff_ffff))
	assert.Equal(t, Desc{Qw0: 0x0000_ffff_ffff_ffff}, d, "address is bits 47:0")

	d = Desc{}
	d.SetUpdate1(0xdead_beef)
	assert.Equal(t, Desc{Qw1: 0xdead_beef_0000_0000}, d, "update word is qw1 63:32")

	d = Desc{}
	require.NoError(t, d.SetHeaderMode(7))
	assert.Equal(t, Desc{Qw1: 0xe000}, d, "header mode is qw1 15:13")

	d = Desc{}
	require.NoError(t, d.SetHeaderIndex(31))
	assert.Equal(t, Desc{Qw1: 0x1f00}, d, "AHG index is qw1 12:8")

	d = Desc{}
	require.NoError(t, d.SetHeaderDWs(15))
	assert.Equal(t, Desc{Qw1: 0xf0}, d, "header dwords are qw1 7:4")

	d = Desc{}
	require.NoError(t, d.SetGeneration(3))
	assert.Equal(t, Desc{Qw1: 0xc}, d, "generation is qw1 3:2")

	d = Desc{}
	d.SetIntReq(true)
	assert.Equal(t, Desc{Qw1: 0x2}, d, "INT_REQ is qw1 bit 1")

	d = Desc{}
	d.SetHeadToHost(true)
	assert.Equal(t, Desc{Qw1: 0x1}, d, "HEAD_TO_HOST is qw1 bit 0")
}

func TestMakeByHand(t *testing.T) {
	d, err := Make(0x1234_5678_9abc, 100, MapPage)
	require.NoError(t, err)
	// 100 = 0x64 at bit 48; MapPage = 2 at bit 2 = 0x8.
	assert.Equal(t, Desc{Qw0: 0x0064_1234_5678_9abc, Qw1: 0x8}, d)
	assert.Equal(t, uint64(0x1234_5678_9abc), d.Addr())
	assert.Equal(t, 100, d.Len())
	assert.Equal(t, MapPage, d.MapType())
	assert.False(t, d.First())
	assert.False(t, d.Last())
}

func TestGettersByHand(t *testing.T) {
	d := Desc{
		Qw0: 0xc000_0000_0000_0000 | 0x0fff_0000_0000_0000 | 0xabcd,
		Qw1: 0x8000_0001_0000_0000 | 4<<13 | 17<<8 | 5<<4 | 2<<2 | 3,
	}
	assert.True(t, d.First())
	assert.True(t, d.Last())
	assert.Equal(t, 0xfff, d.Len())
	assert.Equal(t, uint64(0xabcd), d.Addr())
	assert.Equal(t, uint32(0x8000_0001), d.Update1())
	assert.Equal(t, AHGApplyUpdate3, d.HeaderMode())
	assert.Equal(t, 17, d.HeaderIndex())
	assert.Equal(t, 5, d.HeaderDWs())
	assert.Equal(t, Generation(2), d.Generation())
	assert.True(t, d.IntReq())
	assert.True(t, d.HeadToHost())
}

func TestSettersKeepOtherBits(t *testing.T) {
	all := Desc{Qw0: math.MaxUint64, Qw1: math.MaxUint64}
	d := all
	require.NoError(t, d.SetLen(0))
	assert.Equal(t, Desc{Qw0: 0xc000_ffff_ffff_ffff, Qw1: math.MaxUint64}, d)
	d = all
	require.NoError(t, d.SetAddr(0))
	assert.Equal(t, Desc{Qw0: 0xffff_0000_0000_0000, Qw1: math.MaxUint64}, d)
	d = all
	require.NoError(t, d.SetGeneration(0))
	assert.Equal(t, Desc{Qw0: math.MaxUint64, Qw1: 0xffff_ffff_ffff_fff3}, d)
	d = all
	d.SetFirst(false)
	d.SetLast(false)
	d.SetIntReq(false)
	d.SetHeadToHost(false)
	assert.Equal(t, Desc{Qw0: 0x3fff_ffff_ffff_ffff, Qw1: 0xffff_ffff_ffff_fffc}, d)
	d = all
	require.NoError(t, d.SetHeaderMode(0))
	require.NoError(t, d.SetHeaderIndex(0))
	require.NoError(t, d.SetHeaderDWs(0))
	d.SetUpdate1(0)
	assert.Equal(t, Desc{Qw0: math.MaxUint64, Qw1: 0x0000_0000_ffff_000f}, d, "bits 31:16 of qw1 are not a field and stay")
}

func TestOutOfRangeNamesTheField(t *testing.T) {
	cases := []struct {
		name  string
		field string
		err   error
	}{
		{"address over 48 bits", "address", func() error { var d Desc; return d.SetAddr(1 << 48) }()},
		{"length over 16383", "byte count", func() error { var d Desc; return d.SetLen(16384) }()},
		{"negative length", "byte count", func() error { var d Desc; return d.SetLen(-1) }()},
		{"mode over 7", "header mode", func() error { var d Desc; return d.SetHeaderMode(8) }()},
		{"index over 31", "AHG index", func() error { var d Desc; return d.SetHeaderIndex(32) }()},
		{"negative index", "AHG index", func() error { var d Desc; return d.SetHeaderIndex(-1) }()},
		{"dwords over 16", "header dwords", func() error { var d Desc; return d.SetHeaderDWs(17) }()},
		{"generation over 3", "generation", func() error { var d Desc; return d.SetGeneration(4) }()},
		{"make: address", "address", func() error { _, err := Make(1<<48, 1, 0); return err }()},
		{"make: length", "byte count", func() error { _, err := Make(0, 1<<14, 0); return err }()},
		{"make: map type", "generation", func() error { _, err := Make(0, 1, 4); return err }()},
		{"AHG start bit", "AHG start bit", func() error { _, err := AHGUpdate(0, 0, 32, 1); return err }()},
		{"AHG zero bits", "AHG field length", func() error { _, err := AHGUpdate(0, 0, 0, 0); return err }()},
		{"AHG 17 bits", "AHG field length", func() error { _, err := AHGUpdate(0, 0, 0, 17); return err }()},
		{"AHG past dword", "AHG field end bit", func() error { _, err := AHGUpdate(0, 0, 20, 16); return err }()},
		{"AHG dword index", "AHG dword index", func() error { _, err := AHGUpdate(0, 16, 0, 1); return err }()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Error(t, c.err)
			assert.True(t, errors.Is(c.err, ErrRange))
			var fe *FieldError
			require.True(t, errors.As(c.err, &fe))
			assert.Equal(t, c.field, fe.Field)
			assert.Contains(t, c.err.Error(), c.field)
		})
	}
}

func TestRefusedValueChangesNothing(t *testing.T) {
	d := Desc{Qw0: 0x1234, Qw1: 0x5678}
	before := d
	assert.Error(t, d.SetAddr(1<<60))
	assert.Error(t, d.SetLen(1<<20))
	assert.Error(t, d.SetHeaderIndex(99))
	assert.Error(t, d.SetGeneration(9))
	assert.Equal(t, before, d)
}

func TestRoundTripAtLimits(t *testing.T) {
	for _, addr := range []uint64{0, 1, 0x7fff_ffff_ffff, MaxAddr} {
		for _, n := range []int{0, 1, 16382, MaxByteCount} {
			for mt := MapType(0); mt <= 3; mt++ {
				d, err := Make(addr, n, mt)
				require.NoError(t, err)
				assert.Equal(t, addr, d.Addr())
				assert.Equal(t, n, d.Len())
				assert.Equal(t, mt, d.MapType())
				assert.Equal(t, Generation(mt), d.Generation())
			}
		}
	}
	var d Desc
	for _, v := range []HeaderMode{0, 1, 6, 7} {
		require.NoError(t, d.SetHeaderMode(v))
		assert.Equal(t, v, d.HeaderMode())
	}
	for _, v := range []int{0, 1, 30, 31} {
		require.NoError(t, d.SetHeaderIndex(v))
		assert.Equal(t, v, d.HeaderIndex())
	}
	for _, v := range []int{0, 1, 14, 15} {
		require.NoError(t, d.SetHeaderDWs(v))
		assert.Equal(t, v, d.HeaderDWs())
	}
	for _, v := range []uint32{0, 1, 0x7fff_ffff, math.MaxUint32} {
		d.SetUpdate1(v)
		assert.Equal(t, v, d.Update1())
	}
}

func TestWithGenerationMasks(t *testing.T) {
	d := Desc{Qw1: 0xf0}
	assert.Equal(t, uint64(0xf0|0x4), d.WithGeneration(1).Qw1)
	assert.Equal(t, uint64(0xf0|0x4), d.WithGeneration(5).Qw1, "only the low two bits of the pass count")
	assert.Equal(t, uint64(0xf0), Desc{Qw1: 0xfc}.WithGeneration(4).Qw1)
}

func TestEditDescs(t *testing.T) {
	// submit_tx: skip = mode > SDMA_AHG_APPLY_UPDATE1 ? mode >> 1 : 0
	assert.Equal(t, 0, EditDescs(AHGNoAHG))
	assert.Equal(t, 0, EditDescs(AHGCopy))
	assert.Equal(t, 0, EditDescs(AHGApplyUpdate1))
	assert.Equal(t, 1, EditDescs(AHGApplyUpdate2))
	assert.Equal(t, 2, EditDescs(AHGApplyUpdate3))
}

func TestAHGUpdateByHand(t *testing.T) {
	// enable(31) | start 16 (28:24) | 16 bits encoded 0 (23:20) | dword 6 (19:16) | 0xbeef
	w, err := AHGUpdate(0xbeef, 6, 16, 16)
	require.NoError(t, err)
	assert.Equal(t, uint32(0x8000_0000|16<<24|0<<20|6<<16|0xbeef), w)
	assert.Equal(t, uint32(0x9006_beef), w)
	assert.Equal(t, AHGWord{Enable: true, StartBit: 16, Bits: 16, DWIndex: 6, Value: 0xbeef}, DecodeAHG(w))

	w, err = AHGUpdate(0x1, 15, 31, 1)
	require.NoError(t, err)
	assert.Equal(t, uint32(0x8000_0000|0x1f00_0000|0x0010_0000|0x000f_0000|1), w)
	assert.Equal(t, AHGWord{Enable: true, StartBit: 31, Bits: 1, DWIndex: 15, Value: 1}, DecodeAHG(w))
}
