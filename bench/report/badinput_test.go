package main

import (
	"strings"
	"testing"
)

// TestParseRefusesBadFigures: a result line that is malformed, or whose figure is not a finite
// number, is an error naming its line. A NaN or infinite figure used to be printed as a table
// row with a ratio of "NaN×", "+Inf×" or "0.000×" and exit 0, and a malformed line beside good
// ones was dropped without a word, so the report said its benchmark was "not in this run".
func TestParseRefusesBadFigures(t *testing.T) {
	good := "BenchmarkPayload/impl=copy/size=4096-2 100 5 MB/s\n"
	for _, c := range []struct{ line, want string }{
		{"BenchmarkPayload/impl=sdma/size=4096-2 100 NaN MB/s\n", "bench output:2: BenchmarkPayload/impl=sdma/size=4096: NaN MB/s is not a finite figure"},
		{"BenchmarkPayload/impl=sdma/size=4096-2 100 +Inf MB/s\n", "bench output:2: BenchmarkPayload/impl=sdma/size=4096: +Inf MB/s is not a finite figure"},
		{"BenchmarkLatency/impl=sdma-2 100 -Inf p50-ns\n", "bench output:2: BenchmarkLatency/impl=sdma: -Inf p50-ns is not a finite figure"},
		{"BenchmarkPayload/impl=sdma/size=4096-2 100 abc MB/s\n", "bench output:2: parsing measurement: invalid syntax"},
		{"BenchmarkPayload/impl=sdma/size=4096-2 many 5 MB/s\n", "bench output:2: parsing iteration count: invalid syntax"},
	} {
		_, err := parse(strings.NewReader(good + c.line))
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: err %v, want %q", c.line, err, c.want)
		}
	}
	// A benchmark's log lines and a name printed alone before them are not results, as before.
	if _, err := parse(strings.NewReader(canned)); err != nil {
		t.Errorf("canned output: %v", err)
	}
}
