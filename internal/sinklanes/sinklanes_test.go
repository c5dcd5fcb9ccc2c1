package sinklanes

import (
	"strings"
	"testing"
)

type sized int

func (s sized) Engines() int { return int(s) }

type panicky struct{}

func (panicky) Engines() int { panic("boom") }

// TestOf: a sink with Engines says its answer, 0 included; one without the method, nil, and a
// negative answer say nothing; a panic in Engines is an error quoting it, saying nothing.
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		s      any
		n      int
		ok     bool
		panics bool
	}{
		{sized(3), 3, true, false},
		{sized(0), 0, true, false},
		{sized(Unsized), 0, false, false},
		{sized(-7), 0, false, false},
		{struct{}{}, 0, false, false},
		{nil, 0, false, false},
		{panicky{}, 0, false, true},
	} {
		n, ok, err := Of(tc.s)
		if n != tc.n || ok != tc.ok || (err != nil) != tc.panics {
			t.Errorf("Of(%#v) = %d, %v, %v; want %d, %v, error %v", tc.s, n, ok, err, tc.n, tc.ok, tc.panics)
		}
		if tc.panics && (err == nil || !strings.Contains(err.Error(), "boom")) {
			t.Errorf("Of(%#v): error %v, want it to quote the panic", tc.s, err)
		}
	}
}

// TestForward: a wrapper answers the wrapped sink's Engines, Unsized if it has none or is nil.
func TestForward(t *testing.T) {
	for _, tc := range []struct {
		inner any
		want  int
	}{{sized(5), 5}, {sized(0), 0}, {sized(Unsized), Unsized}, {struct{}{}, Unsized}, {nil, Unsized}} {
		if got := Forward(tc.inner); got != tc.want {
			t.Errorf("Forward(%#v) = %d, want %d", tc.inner, got, tc.want)
		}
	}
}

// TestEngineCount: a refusal says "1 engine", not "1 engines".
func TestEngineCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 engines", 1: "1 engine", 2: "2 engines", 16: "16 engines"} {
		if got := EngineCount(n); got != want {
			t.Errorf("EngineCount(%d) = %q, want %q", n, got, want)
		}
	}
}
