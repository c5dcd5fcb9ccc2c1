package sdma

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/desc"
)

// A txreq reused after every kind of packet (inline, extended, coalescing, AHG with edit
// descriptors, a pad, a failed add) starts the next one on its inline descriptors (reset tells
// them by descLimit), and its clean undoes each mapping exactly once (clean walks the mapped
// descriptors, skipping the edit descriptors and the unmapped pad).
func TestTxReqReuseAfterEveryShape(t *testing.T) {
	dev, m := txTestIOMMU(t)
	data := txTestPattern(8000, 3)
	shapes := []struct {
		name  string
		build func(tx *TxReq) error
	}{
		{"one descriptor", func(tx *TxReq) error {
			if err := tx.Init(0, 64, nil); err != nil {
				return err
			}
			return tx.AddKVAddr(dev, data[:64])
		}},
		{"extended, pad", func(tx *TxReq) error {
			if err := tx.Init(0, 7*9+1, nil); err != nil {
				return err
			}
			for i := range 7 {
				if err := tx.AddKVAddr(dev, data[i*9:(i+1)*9]); err != nil {
					return err
				}
			}
			return tx.AddKVAddr(dev, data[63:64])
		}},
		{"coalescing", func(tx *TxReq) error {
			if err := tx.Init(0, 70, nil); err != nil {
				return err
			}
			for i := range 70 {
				if err := tx.AddKVAddr(dev, data[i:i+1]); err != nil {
					return err
				}
			}
			return nil
		}},
		{"AHG edit descriptors, pad", func(tx *TxReq) error {
			words := []uint32{1, 2, 3, 4, 5, 6}
			if err := tx.InitAHG(FlagUseAHG, 30, AHG{Entry: 1, Words: words, HeaderLen: 24}, nil); err != nil {
				return err
			}
			if err := tx.AddKVAddr(dev, data[:20]); err != nil {
				return err
			}
			return tx.AddKVAddr(dev, data[20:30])
		}},
		{"daddr header, mapped payload", func(tx *TxReq) error {
			if err := tx.Init(0, 8+100, nil); err != nil {
				return err
			}
			if err := tx.AddDAddr(dev, dev.padAddr(), 8); err != nil {
				return err
			}
			return tx.AddKVAddr(dev, data[:100])
		}},
		{"failed add past 7", func(tx *TxReq) error {
			if err := tx.Init(0, 7*4+4, nil); err != nil {
				return err
			}
			for i := range 7 {
				if err := tx.AddKVAddr(dev, data[i*4:(i+1)*4]); err != nil {
					return err
				}
			}
			_ = tx.AddKVAddr(dev, data[:5]) // too long: fails and cleans the extended txreq
			return nil
		}},
	}
	var tx TxReq
	for round := range 2 {
		for _, s := range shapes {
			require.NoError(t, s.build(&tx), "%s, round %d", s.name, round)
			require.NoError(t, tx.Clean(), s.name)
			assert.Zero(t, txTestLive(m), "%s: every mapping undone once", s.name)
			assert.Zero(t, dev.UnmapErrors(), s.name)

			// The next packet is on the inline descriptors again.
			require.NoError(t, tx.Init(0, 4, nil), s.name)
			assert.Equal(t, desc.NumDesc, int(tx.descLimit), s.name)
			assert.Len(t, tx.descp, desc.NumDesc, s.name)
			assert.Same(t, &tx.descs[0], &tx.descp[0], "%s: descp is the inline array", s.name)
			require.NoError(t, tx.AddKVAddr(dev, data[:4]), s.name)
			assert.Equal(t, 1, tx.NumDesc(), s.name)
			require.NoError(t, tx.Clean(), s.name)
			assert.Zero(t, txTestLive(m), s.name)
		}
	}
}

// Init does not clear wait (reset): the completion does, for every status, so a txreq that is
// not in flight has none.
func TestTxReqWaitClearedByCompletion(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true})
	e := dev.Engine(0)
	var w IOWait
	w.Init(nil, nil, nil)
	var tx TxReq

	engTestBuild(t, dev, &tx, 0, make([]byte, 8), nil)
	require.NoError(t, e.Send(&w, &tx, false))
	assert.Same(t, &w, tx.wait)
	_, err := e.Process()
	require.NoError(t, err)
	assert.Nil(t, tx.wait, "completed OK")

	// Aborted: sent while the engine is stopped, flushed when the engine runs again.
	var c completions
	engTestBuild(t, dev, &tx, 0, make([]byte, 8), &c)
	require.NoError(t, e.Stop())
	require.ErrorIs(t, e.Send(&w, &tx, false), ErrNotRunning)
	require.NoError(t, e.Start())
	_, err = e.Process()
	require.NoError(t, err)
	e.Poll()
	st, ok := c.status(&tx)
	require.True(t, ok, "the flushed txreq completed")
	assert.Equal(t, StatusAborted, st)
	assert.Nil(t, tx.wait, "completed aborted")
	require.NoError(t, tx.Init(0, 8, nil))
	assert.Nil(t, tx.wait)
}

// A txreq with more descriptors than the ring holds (64 in a ring of 64) is refused by every
// send path with ErrInvalid naming the capacity, and stays the caller's, ready: Send's common
// case leaves the capacity to the ring's reservation and takes the general path on its refusal.
func TestSendPastRingCapacityRefused(t *testing.T) {
	for _, cfg := range []Config{{Manual: true, RingSize: 64}, {RingSize: 64, Wait: WaitBusyPoll}} {
		dev, cs := engTestDevice(t, cfg)
		e := dev.Engine(0)
		var tx TxReq
		require.NoError(t, tx.Init(0, 63, nil))
		for range 63 {
			require.NoError(t, tx.AddKVAddr(dev, []byte{1}))
		}
		require.Equal(t, 64, tx.NumDesc())
		for name, send := range map[string]func() error{
			"Send":     func() error { return e.Send(nil, &tx, false) },
			"SendWait": func() error { return e.SendWait(t.Context(), &tx) },
			"SendList": func() error {
				var l TxList
				l.PushBack(&tx)
				n, err := e.SendList(nil, &l)
				assert.Zero(t, n, "SendList")
				assert.Equal(t, 1, l.Len(), "SendList: the txreq stays on the list")
				return err
			},
		} {
			err := send()
			te := txTestErr(t, err, ErrInvalid)
			assert.Contains(t, te.Reason, "capacity 63", name)
			require.NoError(t, tx.ready(), "%s: still ready", name)
			assert.True(t, e.Empty(), name)
		}
		// The ring took nothing: a packet that fits goes through.
		var ok TxReq
		var c completions
		engTestBuild(t, dev, &ok, 0, []byte{1, 2, 3, 4}, &c)
		require.NoError(t, e.Send(nil, &ok, false))
		if cfg.Manual {
			_, err := e.Process()
			require.NoError(t, err)
		}
		for c.n.Load() == 0 {
			runtime.Gosched() // the busy-polling engine's goroutine completes it
		}
		assert.Len(t, cs.Packets(0), 1)
		require.NoError(t, tx.Clean())
	}
}

// Send's common case has its own copy of sendable's test: in every state a txreq can be in,
// Send accepts exactly the txreqs that check passes, and refuses the others with check's error.
func TestSendAgreesWithCheck(t *testing.T) {
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	other, _ := engTestDevice(t, Config{Manual: true})
	e := dev.Engine(0)
	buf := txTestPattern(128, 1)
	build := func(n, added int, d *Device) *TxReq {
		tx := new(TxReq)
		require.NoError(t, tx.Init(0, n, nil))
		for ; added > 0; added-- {
			require.NoError(t, tx.AddKVAddr(d, buf[:1]))
		}
		return tx
	}
	cleaned := build(8, 8, dev)
	require.NoError(t, cleaned.Clean())
	inFlight := build(4, 4, dev)
	require.NoError(t, e.Send(nil, inFlight, false))
	cases := map[string]*TxReq{
		"nil":           nil,
		"uninitialised": new(TxReq),
		"initialised":   build(8, 0, dev),
		"half built":    build(8, 4, dev),
		"closed":        build(8, 8, dev),
		"other device":  build(8, 8, other),
		"in flight":     inFlight,
		"cleaned":       cleaned,
		"past the ring": build(63, 63, dev),
	}
	for name, tx := range cases {
		want := e.check(tx)
		err := e.Send(nil, tx, false)
		if want == nil {
			assert.NoError(t, err, name)
			continue
		}
		assert.Equal(t, want, err, name)
	}
	n, err := e.Process()
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the one in flight and the closed one")
}
