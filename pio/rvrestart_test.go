package pio

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRestartRacingCloseSaysInvalid: Restart of a closing context gives ErrInvalid saying it is
// closed (sc_restart's -EINVAL on SCF_IN_FREE; TestRestartClosedSaysClosed). A Close that came
// after Restart's check and before its Enable made Restart return Enable's error instead,
// ErrClosed, named "Enable" (found by TestRVSoakPIOFaultSchedules, whose chaos Restarts while
// the soak closes: "Restart: pio: Enable: send context 0 is closed"). The window is made certain
// with a hook that closes the context right after Restart's check.
func TestRestartRacingCloseSaysInvalid(t *testing.T) {
	for _, manual := range []bool{true, false} {
		sc, err := New(Config{Type: Kernel, Credits: 8, Threshold: 1, Manual: manual})
		if err != nil {
			t.Fatal(err)
		}
		var released atomic.Int32
		b, err := sc.BufferAlloc(4, ReleaseFunc(func(ReleaseCode) { released.Add(1) }))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Copy(CreatePBC(0, 0, 0, 4), make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
		sc.Stop() // not enabled: the halt below is not restarted by the chip
		sc.stop(scfHalted)
		hook := func(sc *SendContext) {
			if err := sc.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
		testRestartChecked.Store(&hook)
		err = sc.Restart()
		testRestartChecked.Store(nil)
		if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "Restart") || !strings.Contains(err.Error(), "closed") {
			t.Errorf("manual %v: Restart racing Close: %v, want ErrInvalid from Restart saying it is closed", manual, err)
		}
		if n := released.Load(); n != 1 || sc.Enabled() {
			t.Errorf("manual %v: released %d times, enabled %v: want once, closed", manual, n, sc.Enabled())
		}
		if err := sc.Restart(); !errors.Is(err, ErrInvalid) {
			t.Errorf("manual %v: Restart after: %v", manual, err)
		}
	}
}
