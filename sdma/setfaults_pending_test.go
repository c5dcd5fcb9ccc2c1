package sdma_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosdma/gosdma/sdma"
	"github.com/gosdma/gosdma/sdma/sdmatest"
)

// TestSetFaultsUnderProcessAndPoll: a Sink that the caller's own Process runs, or a completion
// that its own Poll runs (a Manual engine: both hold hwMu), calls sdmatest.SetFaults. SetFaults
// waited for hwMu, which its own goroutine held: Process (or Poll) never returned. It must
// return nil at once and leave the plan to the next pass: the pass that ran it ends with the old
// plan (no halt), and the next Process halts where the plan says (HaltAt 3: at the third packet
// of that pass, one descriptor each), with the plan's cause.
func TestSetFaultsUnderProcessAndPoll(t *testing.T) {
	for _, where := range []string{"sink under Process", "completion under Poll"} {
		t.Run(where, func(t *testing.T) {
			plan := sdmatest.FaultPlan{HaltAt: 3, HaltCause: sdma.CauseWrongDW}
			var e *sdma.Engine
			var got []error // SetFaults' answers; written by the Sink or completion, read after the call that ran it
			set := func() { got = append(got, sdmatest.SetFaults(e, plan)) }
			sink := sdma.SinkFunc(func(int, [][]byte) error {
				if where == "sink under Process" && len(got) == 0 {
					set()
				}
				return nil
			})
			cfg := sdma.Config{Manual: true, RingSize: 64, Sink: sink}
			if where == "completion under Poll" {
				cfg.Completion = sdma.CompletePoll
			}
			dev, err := sdma.NewDevice(cfg)
			require.NoError(t, err)
			e = dev.Engine(0)
			hung := false
			defer func() {
				if !hung { // a hung call holds hwMu: Close would wait for it too
					require.NoError(t, dev.Close())
				}
			}()
			// within runs f on another goroutine and waits for it, failing the test if it hangs.
			within := func(what string, f func()) {
				done := make(chan struct{})
				go func() { f(); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					hung = true
					t.Fatalf("%s hung: SetFaults waited for the lock its own goroutine holds", what)
				}
			}
			var sts []sdma.Status // written by completions that the test's own calls run
			send := func(n int) {
				for range n {
					tx := new(sdma.TxReq)
					buf := make([]byte, 64) // one descriptor
					require.NoError(t, tx.Init(0, len(buf), sdma.CompleterFunc(func(_ *sdma.TxReq, st sdma.Status) {
						if where == "completion under Poll" && len(got) == 0 {
							set()
						}
						sts = append(sts, st)
					})))
					require.NoError(t, tx.AddKVAddr(dev, buf))
					require.NoError(t, e.Send(nil, tx, false))
				}
			}

			first := 1
			if where == "sink under Process" {
				first = 3 // the plan is set at the first packet: the other two still go out
			}
			send(first)
			var n int
			within("Process", func() { n, err = e.Process() })
			require.NoError(t, err, "the pass that ran SetFaults ends with the old plan")
			require.Equal(t, first, n)
			within("Poll", func() { e.Poll() })
			require.Equal(t, []error{nil}, got, "SetFaults from inside the pass")
			require.Zero(t, e.Stats().Faults)

			// The next pass takes the plan: packets 1 and 2 go, the third halts.
			send(4)
			within("Process", func() { n, err = e.Process() })
			var h *sdma.HaltError
			require.ErrorAs(t, err, &h)
			require.Equal(t, sdma.CauseWrongDW, h.Cause)
			require.EqualValues(t, first+2, h.Index, "HaltAt 3: the third descriptor of the pass that took the plan")
			require.Contains(t, h.Detail, "HaltAt")
			require.Equal(t, 2, n)
			within("Poll", func() { e.Poll() })
			want := make([]sdma.Status, 0, first+4)
			for range first + 2 {
				want = append(want, sdma.StatusOK)
			}
			want = append(want, sdma.StatusAborted, sdma.StatusAborted)
			require.Equal(t, want, sts)
			require.EqualValues(t, 1, e.Stats().Faults)

			// Once only: the next packets go out.
			send(2)
			within("Process", func() { n, err = e.Process() })
			require.NoError(t, err)
			require.Equal(t, 2, n)
			require.Len(t, got, 1)
		})
	}
}

// TestSetFaultsLatestWins: plans set one after another before a pass: the pass takes the last
// one (an earlier one left pending does not come back after it).
func TestSetFaultsLatestWins(t *testing.T) {
	dev, err := sdma.NewDevice(sdma.Config{Manual: true, RingSize: 64})
	require.NoError(t, err)
	defer dev.Close()
	e := dev.Engine(0)
	require.NoError(t, sdmatest.SetFaults(e, sdmatest.FaultPlan{HaltAt: 1}))
	require.NoError(t, sdmatest.SetFaults(e, sdmatest.FaultPlan{}))
	for range 2 {
		var tx sdma.TxReq
		buf := make([]byte, 64)
		require.NoError(t, tx.Init(0, len(buf), nil))
		require.NoError(t, tx.AddKVAddr(dev, buf))
		require.NoError(t, e.Send(nil, &tx, false))
		n, err := e.Process()
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	require.Zero(t, e.Stats().Faults)
	require.False(t, errors.Is(e.HaltCause(), sdma.ErrHalted))
}
