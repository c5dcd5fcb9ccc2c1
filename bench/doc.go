// Package bench holds gosdma's benchmarks, kept apart from the library packages so that their
// baselines (channels, other queue libraries) do not become dependencies of the library.
//
// Run them briefly on a shared machine, for example
//
//	go test -run '^$' -bench . -benchtime 200ms ./bench
//
// and compare with the C references with bench/compare.sh.
package bench
