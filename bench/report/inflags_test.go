package main

import (
	"strings"
	"testing"
)

// TestInRefusesRunFlags: with -in the suite is not run, so -benchtime, -count and -bench would be
// ignored without a word (the caption then said "the median of the -count runs" whatever -count
// said). They are refused, naming the flag.
func TestInRefusesRunFlags(t *testing.T) {
	for _, f := range []string{"benchtime", "count", "bench"} {
		err := checkInFlags("out.txt", map[string]bool{"in": true, f: true})
		if err == nil || !strings.Contains(err.Error(), "-"+f) {
			t.Errorf("-in with -%s: %v, want an error naming -%s", f, err, f)
		}
	}
	if err := checkInFlags("out.txt", map[string]bool{"in": true}); err != nil {
		t.Errorf("-in alone: %v", err)
	}
	if err := checkInFlags("", map[string]bool{"count": true, "bench": true, "benchtime": true}); err != nil {
		t.Errorf("a run's flags without -in: %v", err)
	}
}
