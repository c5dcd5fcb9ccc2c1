// Package fuzz holds gosdma's fuzz targets. It has no API: run them with
//
//	go test -run=XXX -fuzz='^FuzzTxAdd$' -fuzztime=20s ./fuzz
//	go test -run=XXX -fuzz='^FuzzTxAddSplit$' -fuzztime=20s ./fuzz
//
// (-fuzz is a regular expression that must match one target: -fuzz=FuzzTxAdd matches both and
// fuzzes neither.) Other packages keep their own targets beside their tests; go test -list
// '^Fuzz' ./... lists every one. The seed corpora under testdata/fuzz/<FuzzName>/ hold the
// boundary cases and run with every plain go test.
//
// With a Go before 1.27, a run bounded by time (-fuzztime=20s) can end in "context deadline
// exceeded" and FAIL with no failing input written: a race in the toolchain's fuzzing
// coordinator at the deadline (go.dev/issue/75804), not a finding. A failure of a target writes
// its input under testdata/fuzz/ and prints it. A count (-fuzztime=2000x, as .ci/run uses) has
// no deadline to race.
package fuzz
