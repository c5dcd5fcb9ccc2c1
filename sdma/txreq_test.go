package sdma

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
	"github.com/gosdma/gosdma/dma"
)

// txTestIOMMU returns a device over a fresh IOMMU, and the IOMMU for leak checks.
func txTestIOMMU(t testing.TB) (*Device, *dma.IOMMU) {
	t.Helper()
	m, err := dma.NewIOMMU(dma.IOMMUConfig{})
	require.NoError(t, err)
	dev, err := NewDevice(Config{Mapper: m})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	return dev, m
}

// txTestLive is the number of the txreq's live mappings: the IOMMU's minus the device's pad.
func txTestLive(m *dma.IOMMU) int { return m.LiveCount() - 1 }

func txTestErr(t *testing.T, err error, sentinel error) *TxError {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, sentinel)
	var te *TxError
	require.ErrorAs(t, err, &te)
	return te
}

func TestTxInitErrors(t *testing.T) {
	var tx TxReq
	txTestErr(t, tx.Init(0, 0, nil), ErrNoData)
	txTestErr(t, tx.Init(0, desc.MaxPktSize+1, nil), ErrMsgSize)
	txTestErr(t, tx.Init(0, -1, nil), ErrInvalid)
	txTestErr(t, tx.Init(0x8, 10, nil), ErrInvalid)
	txTestErr(t, tx.Init(FlagUseAHG, 10, nil), ErrInvalid) // USE_AHG needs words: InitAHG
	// A failed Init changes nothing.
	require.ErrorIs(t, tx.ready(), ErrInvalid)
	assert.Contains(t, tx.ready().Error(), "uninitialised")
	assert.Nil(t, tx.Descs())

	require.NoError(t, tx.Init(FlagUrgent|FlagVIP, desc.MaxPktSize, nil))
	assert.Equal(t, desc.MaxPktSize, tx.Remaining())
	assert.Equal(t, desc.MaxPktSize, tx.pktLen())
	assert.Equal(t, FlagUrgent|FlagVIP, tx.flags)
	assert.Equal(t, 0, tx.NumDesc())
	assert.Equal(t, desc.Desc{Qw0: desc.FirstFlag}, tx.descs[0])
}

func TestTxInitAHGCopy(t *testing.T) {
	var tx TxReq
	require.NoError(t, tx.InitAHG(FlagAHGCopy, 100, AHG{Entry: 17}, nil))
	d := tx.descs[0]
	assert.True(t, d.First())
	assert.Equal(t, desc.AHGCopy, d.HeaderMode())
	assert.Equal(t, 17, d.HeaderIndex())
	assert.Equal(t, 0, tx.NumDesc())
	// Init with FlagAHGCopy is entry 0, as sdma_txinit passes ahg_entry 0.
	require.NoError(t, tx.Init(FlagAHGCopy, 100, nil))
	assert.Equal(t, desc.AHGCopy, tx.descs[0].HeaderMode())
	assert.Equal(t, 0, tx.descs[0].HeaderIndex())
	// COPY wins over USE_AHG, as in the kernel; the words are ignored.
	require.NoError(t, tx.InitAHG(FlagAHGCopy|FlagUseAHG, 100, AHG{Entry: 3, Words: []uint32{1, 2}, HeaderLen: 20}, nil))
	assert.Equal(t, desc.AHGCopy, tx.descs[0].HeaderMode())
	assert.Equal(t, 0, tx.NumDesc())
}

func TestTxInitAHGLayout(t *testing.T) {
	words := []uint32{0xa0000000, 0xa1111111, 0xa2222222, 0xa3333333, 0xa4444444, 0xa5555555, 0xa6666666, 0xa7777777, 0xa8888888}
	for _, tc := range []struct {
		n       int
		mode    desc.HeaderMode
		numDesc int
	}{
		{1, desc.AHGApplyUpdate1, 1},
		{2, desc.AHGApplyUpdate2, 2},
		{5, desc.AHGApplyUpdate2, 2},
		{6, desc.AHGApplyUpdate3, 3},
		{9, desc.AHGApplyUpdate3, 3},
	} {
		var tx TxReq
		// Dirty the inline descriptors: the edit descriptors must be zeroed first.
		for i := range tx.descs {
			tx.descs[i] = desc.Desc{Qw0: ^uint64(0), Qw1: ^uint64(0)}
		}
		require.NoError(t, tx.InitAHG(FlagUseAHG, 64, AHG{Entry: 31, Words: words[:tc.n], HeaderLen: 60}, nil))
		require.Equal(t, tc.numDesc, tx.NumDesc(), "words %d", tc.n)
		d0 := tx.descs[0]
		assert.True(t, d0.First())
		assert.Equal(t, 0, d0.Len())
		assert.Equal(t, tc.mode, d0.HeaderMode())
		assert.Equal(t, 31, d0.HeaderIndex())
		assert.Equal(t, 15, d0.HeaderDWs())
		assert.Equal(t, words[0], d0.Update1())
		assert.Equal(t, desc.MapNone, d0.MapType())
		assert.Equal(t, tc.numDesc-1, desc.EditDescs(d0.HeaderMode()))
		// Words 1..4 in descs[1], 5..8 in descs[2]: qw0 lo, qw0 hi, qw1 lo, qw1 hi.
		got := []uint32{}
		for i := 1; i < tc.numDesc; i++ {
			d := tx.descs[i]
			got = append(got, uint32(d.Qw0), uint32(d.Qw0>>32), uint32(d.Qw1), uint32(d.Qw1>>32))
		}
		want := make([]uint32, 4*(tc.numDesc-1))
		copy(want, words[1:tc.n])
		assert.Equal(t, want, got, "words %d", tc.n)
		_, skip := tx.hwDescs()
		assert.Equal(t, tc.numDesc-1, skip)
	}
}

func TestTxInitAHGErrors(t *testing.T) {
	w := []uint32{1}
	for name, f := range map[string]func(*TxReq) error{
		"entry 32": func(tx *TxReq) error { return tx.InitAHG(FlagUseAHG, 8, AHG{Entry: 32, Words: w, HeaderLen: 8}, nil) },
		"entry -1": func(tx *TxReq) error { return tx.InitAHG(FlagAHGCopy, 8, AHG{Entry: -1}, nil) },
		"10 words": func(tx *TxReq) error {
			return tx.InitAHG(FlagUseAHG, 8, AHG{Entry: 0, Words: make([]uint32, 10), HeaderLen: 8}, nil)
		},
		"0 words":           func(tx *TxReq) error { return tx.InitAHG(FlagUseAHG, 8, AHG{Entry: 0, HeaderLen: 8}, nil) },
		"hlen 6":            func(tx *TxReq) error { return tx.InitAHG(FlagUseAHG, 8, AHG{Entry: 0, Words: w, HeaderLen: 6}, nil) },
		"hlen 4":            func(tx *TxReq) error { return tx.InitAHG(FlagUseAHG, 8, AHG{Entry: 0, Words: w, HeaderLen: 4}, nil) },
		"hlen 0":            func(tx *TxReq) error { return tx.InitAHG(FlagUseAHG, 8, AHG{Entry: 0, Words: w}, nil) },
		"hlen 68":           func(tx *TxReq) error { return tx.InitAHG(FlagUseAHG, 8, AHG{Entry: 0, Words: w, HeaderLen: 68}, nil) },
		"words, no USE_AHG": func(tx *TxReq) error { return tx.InitAHG(0, 8, AHG{Entry: 0, Words: w, HeaderLen: 8}, nil) },
		"words, AHG_COPY":   func(tx *TxReq) error { return tx.InitAHG(FlagAHGCopy, 8, AHG{Entry: 0, Words: w, HeaderLen: 8}, nil) },
		"tlen 0 before AHG": func(tx *TxReq) error { return tx.InitAHG(FlagUseAHG, 0, AHG{Entry: 0, Words: w, HeaderLen: 8}, nil) },
		"tlen 16384 too big": func(tx *TxReq) error {
			return tx.InitAHG(FlagUseAHG, 16384, AHG{Entry: 0, Words: w, HeaderLen: 8}, nil)
		},
	} {
		var tx TxReq
		err := f(&tx)
		require.Error(t, err, name)
		var te *TxError
		require.ErrorAs(t, err, &te, name)
		assert.Equal(t, "InitAHG", te.Op)
		assert.Equal(t, uint32(txFree), tx.state.Load(), name)
	}
}

func TestTxReadyAndClean(t *testing.T) {
	dev, m := txTestIOMMU(t)
	var tx TxReq
	assert.Contains(t, tx.ready().Error(), "uninitialised")
	require.NoError(t, tx.Clean()) // never initialised: a no-op

	buf := []byte("0123456789")
	require.NoError(t, tx.Init(0, 10, nil))
	require.NoError(t, tx.AddKVAddr(dev, buf[:4]))
	err := tx.ready()
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "unfinished: 6 bytes missing")
	require.NoError(t, tx.AddKVAddr(dev, buf[4:]))
	require.NoError(t, tx.ready())
	assert.Equal(t, 2, txTestLive(m))

	ds, skip := tx.hwDescs()
	assert.Len(t, ds, 3)
	assert.Equal(t, 0, skip)

	// In flight: Clean, Init, adds are refused and change nothing.
	tx.state.Store(txInFlight)
	assert.Contains(t, tx.ready().Error(), "in flight")
	txTestErr(t, tx.Clean(), ErrInvalid)
	txTestErr(t, tx.Init(0, 4, nil), ErrInvalid)
	txTestErr(t, tx.AddKVAddr(dev, buf[:1]), ErrInvalid)
	assert.Equal(t, 3, tx.NumDesc())
	assert.Equal(t, 2, txTestLive(m))

	// The completion pass: clean, then state free.
	tx.clean()
	assert.Equal(t, 0, txTestLive(m))
	assert.Equal(t, 0, tx.NumDesc())
	assert.Contains(t, tx.ready().Error(), "cleaned")
	for range 3 {
		require.NoError(t, tx.Clean())
	}
	assert.Equal(t, 0, txTestLive(m))
	te := txTestErr(t, tx.AddKVAddr(dev, buf[:1]), ErrInvalid)
	assert.Contains(t, te.Reason, "cleaned")
}

func TestTxInitCleansUnsentTxReq(t *testing.T) {
	dev, m := txTestIOMMU(t)
	var tx TxReq
	buf := make([]byte, 8)
	require.NoError(t, tx.Init(0, 8, nil))
	require.NoError(t, tx.AddKVAddr(dev, buf[:4]))
	assert.Equal(t, 1, txTestLive(m))
	require.NoError(t, tx.Init(0, 8, nil)) // built but never sent: cleaned, not leaked
	assert.Equal(t, 0, txTestLive(m))
	require.NoError(t, tx.AddKVAddr(dev, buf))
	require.NoError(t, tx.Clean())
	assert.Equal(t, 0, txTestLive(m))
}

func TestTxErrorFormat(t *testing.T) {
	cause := errors.New("boom")
	err := error(&TxError{Op: "AddPage", Reason: "mapping 4 bytes of a page", Err: ErrMapping, Cause: cause})
	assert.Equal(t, "sdma: AddPage: mapping 4 bytes of a page: boom", err.Error())
	assert.ErrorIs(t, err, ErrMapping)
	assert.ErrorIs(t, err, cause)
	assert.NotErrorIs(t, err, ErrInvalid)
}

func TestStatusString(t *testing.T) {
	assert.Equal(t, "ok", StatusOK.String())
	assert.Equal(t, "senderror", StatusSendError.String())
	assert.Equal(t, "aborted", StatusAborted.String())
	assert.Equal(t, "shutdown", StatusShutdown.String())
	assert.Equal(t, "Status(9)", Status(9).String())
}

func TestTxListNilIsAClearPanic(t *testing.T) {
	var l TxList
	assert.PanicsWithValue(t, "sdma: TxList.PushBack of a nil txreq", func() { l.PushBack(nil) })
	assert.PanicsWithValue(t, "sdma: TxList.pushFront of a nil txreq", func() { l.pushFront(nil) })
	assert.Zero(t, l.Len())
}
