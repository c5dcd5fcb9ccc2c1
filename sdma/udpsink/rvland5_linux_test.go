//go:build linux

package udpsink

import "testing"

// TestSinkEngines: Engines is the number of engine numbers the sink takes (Config.Engines, 0
// meaning 1), 0 for the zero Sink; Deliver takes the last of them and refuses the one past it.
// verbs.New reads it to refuse a sink with no lane for its PIO contexts.
func TestSinkEngines(t *testing.T) {
	var zero Sink
	if n := zero.Engines(); n != 0 {
		t.Errorf("the zero Sink: Engines %d, want 0", n)
	}
	for _, tc := range []struct{ cfg, want int }{{0, 1}, {1, 1}, {5, 5}, {MaxEngines, MaxEngines}} {
		s, err := New(Config{Addr: "127.0.0.1:9", Engines: tc.cfg})
		if err != nil {
			t.Fatal(err)
		}
		if n := s.Engines(); n != tc.want {
			t.Errorf("Config.Engines %d: Engines %d, want %d", tc.cfg, n, tc.want)
		}
		if err := s.Deliver(tc.want-1, [][]byte{{1, 2, 3, 4}}); err != nil {
			t.Errorf("Config.Engines %d: Deliver on engine %d: %v", tc.cfg, tc.want-1, err)
		}
		if err := s.Deliver(tc.want, [][]byte{{1, 2, 3, 4}}); err == nil {
			t.Errorf("Config.Engines %d: Deliver on engine %d taken", tc.cfg, tc.want)
		}
		s.Close()
	}
}
