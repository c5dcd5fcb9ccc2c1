package sdma

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gosdma/gosdma/dma"
	"github.com/gosdma/gosdma/internal/census"
)

// The second bad-input census of package sdma (badinput_test.go has the first: lengths, flags,
// adds, sends, configurations): misuse of TxList and of the devices and engines once closed, each
// call under census.Timeout so that a hang fails its row.

// TestCensusTxListDoubleLink: a txreq that is first or last on a list already is refused by
// PushBack onto that list, with a panic that says so, and the list stays as it was. PushBack used
// to relink it: pushed twice, the list's Len counted 3 where a walk found 1, and SendList sent the
// first txreq and then stopped with "sdma: Send: nil txreq", an error about a txreq the caller
// never passed.
func TestCensusTxListDoubleLink(t *testing.T) {
	walk := func(l *TxList) []*TxReq {
		var out []*TxReq
		for tx := l.Front(); tx != nil && len(out) <= 4; tx = l.Next(tx) {
			out = append(out, tx)
		}
		return out
	}
	dev, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
	var a, b TxReq
	engTestBuild(t, dev, &a, 0, engTestPattern(8, 1), nil)
	engTestBuild(t, dev, &b, 0, engTestPattern(8, 2), nil)
	var one, l TxList
	one.PushBack(&a)
	if r := census.Call(func() error { one.PushBack(&a); return nil }); !r.Panicked || !strings.Contains(r.String(), "already on the list") {
		t.Errorf("PushBack of a list's only txreq onto it again: %v, want a panic saying so", r)
	}
	if w := walk(&one); one.Len() != 1 || len(w) != 1 {
		t.Errorf("after: Len %d, walk %d; want 1, 1", one.Len(), len(w))
	}
	one.PopFront()
	l.PushBack(&a)
	l.PushBack(&b)
	for _, tx := range []*TxReq{&a, &b} {
		if r := census.Call(func() error { l.PushBack(tx); return nil }); !r.Panicked || !strings.Contains(r.String(), "already on the list") {
			t.Errorf("PushBack of a txreq on the list again: %v, want a panic saying so", r)
		}
		if w := walk(&l); l.Len() != 2 || len(w) != 2 || w[0] != &a || w[1] != &b {
			t.Fatalf("after: Len %d, walk %v; want a, b", l.Len(), w)
		}
	}
	if n, err := dev.Engine(0).SendList(nil, &l); n != 2 || err != nil {
		t.Errorf("SendList of the list: %d, %v; want 2 sent", n, err)
	}
	_, _ = dev.Engine(0).Process()
}

// TestCensusSdma: calls on closed devices and engines, on a device's engines out of range, and on
// idle iowaits, each with the answer its doc gives.
func TestCensusSdma(t *testing.T) {
	closed := func() (*Device, *Engine) {
		d, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
		_ = d.Close()
		return d, d.Engine(0)
	}
	bg := context.Background()
	buf := make([]byte, 64)
	cases := []census.Case{
		{"Close twice", func() error { d, _ := closed(); return d.Close() }, census.OK},
		{"Shutdown after Close", func() error { d, _ := closed(); return d.Shutdown(bg) }, census.OK},
		{"AddKVAddr on a closed device", func() error {
			d, _ := closed()
			var tx TxReq
			_ = tx.Init(0, 64, nil)
			return tx.AddKVAddr(d, buf)
		}, census.Is(ErrClosed)},
		{"Register after Close", func() error {
			d, _ := closed()
			r, err := d.Register(buf)
			if r != nil {
				return errors.New("registered")
			}
			return err
		}, census.Is(ErrClosed)},
		{"Start after Close", func() error { _, e := closed(); return e.Start() }, census.Is(ErrClosed)},
		{"Stop after Close", func() error { _, e := closed(); return e.Stop() }, census.Is(ErrClosed)},
		{"QueueWait after Close", func() error {
			_, e := closed()
			var w IOWait
			w.Init(nil, func(*IOWait, int) {}, nil)
			_, err := e.QueueWait(&w, 1, false)
			return err
		}, census.Is(ErrClosed)},
		{"Engine(-1) is nil", func() error {
			d, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
			if d.Engine(-1) != nil || d.Engine(MaxEngines) != nil {
				return errors.New("an engine")
			}
			return nil
		}, census.OK},
		{"SelectEngine of a VL past MaxVLs is engine 0", func() error {
			d, _ := engTestDevice(t, Config{Manual: true, RingSize: 64, Engines: 2})
			if d.SelectEngine(1, 200) != d.Engine(0) {
				return errors.New("not engine 0")
			}
			return nil
		}, census.OK},
		{"Drain of an idle iowait", func() error { var w IOWait; return w.Drain(bg) }, census.OK},
		{"SendList of an empty list", func() error {
			d, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
			var l TxList
			_, err := d.Engine(0).SendList(nil, &l)
			return err
		}, census.OK},
		{"SendListIn of an empty list", func() error {
			d, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
			var l TxList
			_, err := d.Engine(0).SendListIn(nil, &l, d.Engine(0).Epoch())
			return err
		}, census.OK},
		{"SendListIn in an epoch the engine never had", func() error {
			d, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
			var l TxList
			_, err := d.Engine(0).SendListIn(nil, &l, d.Engine(0).Epoch()+1)
			return err
		}, census.Is(ErrInvalid)},
	}
	census.Run(t, cases)
}

// TestCensusZeroDeviceAdds: every add refuses the zero Device (not made by NewDevice) with
// ErrInvalid saying so, and cleans the txreq, as for a nil device. AddDAddr took it (the daddr
// needs no mapper), where AddKVAddr, AddBytes and AddPage panicked on its nil mapper.
func TestCensusZeroDeviceAdds(t *testing.T) {
	region, err := dma.AllocPages(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = region.Close() })
	page, err := region.Page(0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	adds := []struct {
		name string
		add  func(tx *TxReq, dev *Device) error
	}{
		{"AddDAddr", func(tx *TxReq, dev *Device) error { return tx.AddDAddr(dev, 0x1000, 64) }},
		{"AddKVAddr", func(tx *TxReq, dev *Device) error { return tx.AddKVAddr(dev, buf) }},
		{"AddBytes", func(tx *TxReq, dev *Device) error { return tx.AddBytes(dev, buf) }},
		{"AddPage", func(tx *TxReq, dev *Device) error { return tx.AddPage(dev, page, 0, 64) }},
		{"AddPages", func(tx *TxReq, dev *Device) error { return tx.AddPages(dev, region, 0, 64) }},
	}
	var cases []census.Case
	for _, a := range adds {
		cases = append(cases, census.Case{Name: a.name + " with the zero Device", F: func() error {
			var zero Device
			var tx TxReq
			if err := tx.Init(0, 64, nil); err != nil {
				return err
			}
			err := a.add(&tx, &zero)
			if tx.state.Load() != txFree || tx.numDesc != 0 {
				return errors.New("txreq not cleaned")
			}
			return err
		}, Check: func(r census.Result) bool {
			return !r.Hung && !r.Panicked && errors.Is(r.Err, ErrInvalid) && strings.Contains(r.Err.Error(), "zero Device, not made by NewDevice")
		}})
	}
	census.Run(t, cases)
}

// TestCensusZeroEngineAHG: AHGAlloc and AHGFree refuse the zero Engine (not one of a Device's)
// with ErrInvalid saying so, as they refuse a nil one. AHGAlloc handed out entry 0 of an engine
// that sends nothing, and AHGFree then took it back.
func TestCensusZeroEngineAHG(t *testing.T) {
	zeroRefused := func(r census.Result) bool {
		return !r.Hung && !r.Panicked && errors.Is(r.Err, ErrInvalid) && strings.Contains(r.Err.Error(), "zero Engine, not one of a Device's")
	}
	census.Run(t, []census.Case{
		{"AHGAlloc of the zero Engine", func() error {
			var e Engine
			i, err := e.AHGAlloc()
			if i != -1 || e.AHGInUse() != 0 {
				return errors.New("entry " + itoa(i) + " allocated")
			}
			return err
		}, zeroRefused},
		{"AHGFree of the zero Engine", func() error {
			var e Engine
			e.ahgBits.Store(1)
			err := e.AHGFree(0)
			if e.AHGInUse() != 1 {
				return errors.New("entry 0 freed")
			}
			return err
		}, zeroRefused},
		{"AHGAlloc of a Device's engine", func() error {
			d, _ := engTestDevice(t, Config{Manual: true, RingSize: 64})
			i, err := d.Engine(0).AHGAlloc()
			if err != nil {
				return err
			}
			return d.Engine(0).AHGFree(i)
		}, census.OK},
	})
}
