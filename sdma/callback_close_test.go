package sdma

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hostedCase is one call that runs completion callbacks on its caller's goroutine, with the
// engine's locks held: setup readies the engine (sending txreqs with send), run is the call.
type hostedCase struct {
	name  string
	cfg   Config
	setup func(t *testing.T, e *Engine, send func() error)
	run   func(e *Engine) error
}

func hostedCases() []hostedCase {
	sendOne := func(t *testing.T, _ *Engine, send func() error) { require.NoError(t, send()) }
	return []hostedCase{
		{name: "Stop", cfg: Config{Manual: true}, setup: sendOne, // the sw clean aborts the txreq
			run: func(e *Engine) error { return e.Stop() }},
		{name: "Start", cfg: Config{Manual: true}, setup: func(t *testing.T, e *Engine, send func() error) {
			require.NoError(t, e.Stop())
			require.ErrorIs(t, send(), ErrNotRunning) // on the flush list: entering s99 flushes it
		}, run: func(e *Engine) error { return e.Start() }},
		{name: "InjectHalt", cfg: Config{Manual: true}, setup: sendOne, // the recovery's sw clean
			run: func(e *Engine) error { return e.injectHalt(CauseHalt) }},
		{name: "ProgressSchedule", cfg: Config{Manual: true, Completion: CompletePoll, RingSize: 64},
			setup: func(t *testing.T, e *Engine, send func() error) {
				for range 9 { // in process: at least an eighth of the ring
					require.NoError(t, send())
				}
				n, err := e.Process() // delivered; a polled engine completes nothing yet
				require.NoError(t, err)
				require.Equal(t, 9, n)
			}, run: func(e *Engine) error {
				if !e.ProgressSchedule() {
					return ErrBusy
				}
				return nil
			}},
		{name: "SendWait", cfg: Config{Manual: true, RingSize: 64},
			setup: func(t *testing.T, e *Engine, send func() error) {
				for {
					err := send()
					if err == ErrBusy {
						return // full: SendWait drives the engine (Process) to make room
					}
					require.NoError(t, err)
				}
			}, run: func(e *Engine) error {
				var tx TxReq
				if err := tx.Init(0, 64, nil); err != nil {
					return err
				}
				if err := tx.AddKVAddr(e.Device(), engTestPattern(64, 9)); err != nil {
					return err
				}
				return e.SendWait(context.Background(), &tx)
			}},
		{name: "Shutdown", cfg: Config{Manual: true}, setup: sendOne, // its drain drives Process
			run: func(e *Engine) error { return e.Device().Shutdown(context.Background()) }},
		{name: "Close", cfg: Config{Manual: true}, setup: sendOne, // its own sw clean
			run: func(e *Engine) error { return e.Device().Close() }},
	}
}

// TestCallbackCloseFromHostedPass: a completion callback that a call runs on its caller's
// goroutine (Stop's, Start's, InjectHalt's sw clean or flush, ProgressSchedule's pass,
// SendWait's and Shutdown's drive, Close's own sw clean) calls Close, Shutdown and an event on
// its engine: each is refused with ErrInvalid (it would wait for the locks its own goroutine
// holds) and changes nothing; the call returns, every txreq completes exactly once, and a Close
// afterwards returns nil.
func TestCallbackCloseFromHostedPass(t *testing.T) {
	for _, tc := range hostedCases() {
		t.Run(tc.name, func(t *testing.T) {
			dev, err := NewDevice(tc.cfg)
			require.NoError(t, err)
			e := dev.Engine(0)
			var calls atomic.Int32
			errs := make(chan [3]error, 64)
			c := &completions{}
			cb := CompleterFunc(func(tx *TxReq, st Status) {
				c.Complete(tx, st)
				if calls.Add(1) == 1 {
					errs <- [3]error{dev.Close(), dev.Shutdown(context.Background()), e.Start()}
				}
			})
			var txs []*TxReq
			send := func() error {
				tx := new(TxReq)
				engTestBuild(t, dev, tx, 0, engTestPattern(64, byte(len(txs))), cb)
				err := e.Send(nil, tx, false)
				if err == nil || err == ErrNotRunning {
					txs = append(txs, tx)
				}
				return err
			}
			tc.setup(t, e, send)
			require.NotEmpty(t, txs)
			done := make(chan error, 1)
			go func() { done <- tc.run(e) }()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second): // a hang guard, not a timing assumption
				t.Fatalf("%s did not return: Close from a callback it runs deadlocked", tc.name)
			}
			select {
			case got := <-errs:
				for i, op := range []string{"Close", "Shutdown", "Start"} {
					require.ErrorIs(t, got[i], ErrInvalid, op)
				}
			default:
				t.Fatalf("%s ran no callback", tc.name)
			}
			require.NoError(t, dev.Close())
			require.EqualValues(t, len(txs), c.n.Load(), "every txreq completes")
			require.Zero(t, c.dup.Load(), "none twice")
			require.EqualValues(t, 0, e.hosts.n.Load(), "no host left registered")
		})
	}
}
