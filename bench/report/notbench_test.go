package main

import (
	"strings"
	"testing"
)

// TestParseSkipsNonBenchmarkNames: a line that begins with "Benchmark" and a lower-case letter
// ("Benchmarks ran on 2 CPUs", a program's own output in a saved log) is not a result: the
// testing package never names a benchmark so. benchfmt reads every line with the prefix as a
// result, and the report refused the whole input: "parsing iteration count: invalid syntax".
// A malformed result line is still an error, naming its line as counted in the input.
func TestParseSkipsNonBenchmarkNames(t *testing.T) {
	in := "Benchmarks ran on 2 CPUs\nBenchmarking: 3 engines, 4 runs\n" + canned
	s, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if v, ok := s.get("BenchmarkLatency/impl=sdma", "p50-ns"); !ok || v != 1500 {
		t.Errorf("p50 %v %v, want 1500", v, ok)
	}
	bad := "Benchmarks ran\nBenchmarkPayload/impl=sdma/size=4096-2 many 5 MB/s\n"
	if _, err := parse(strings.NewReader(bad)); err == nil || err.Error() != "bench output:2: parsing iteration count: invalid syntax" {
		t.Errorf("malformed result line: err %v", err)
	}
}
