// Package bench holds gosdma's benchmarks, kept apart from the library packages so that their
// baselines (channels, other queue libraries) do not become dependencies of the library.
//
// Each benchmark runs its baseline in the same run, under benchstat-style names:
//
//	BenchmarkRingSPSC           the ring (impl=asm|go) against a buffered chan and Workiva's RingBuffer
//	BenchmarkRingMPSC           2 or 4 producers into one ring (CAS reservation), one consumer, impl=asm against go
//	BenchmarkAllocGetPut        each txreq allocator's Get and Put against new(T) and a sync.Pool
//	BenchmarkAllocGetPutParallel its RunParallel twin
//	BenchmarkPacket             a 296-byte packet's whole way, hw=inline (Process) against hw=goroutine
//	BenchmarkPacketPath         a packet's whole way on each allocator and mapper against a copy of its bytes
//	BenchmarkPacketPathParallel its RunParallel twin, two engines
//	BenchmarkPayload            payload bandwidth into a copying sink against copy
//	BenchmarkLatency            submit-to-completion p50/p99 against a cache-line ping-pong
//	BenchmarkUDPSink            the UDP sink, batch=1 (sendmsg) against batch=32 (sendmmsg, GSO) and net.UDPConn (Linux)
//	BenchmarkUDPIdle            a lone packet through a device into the UDP sink, batch=1 against 32 (Linux)
//	BenchmarkIdlePacket         the same into a dropping sink, a plain Sink against a BatchSink
//	BenchmarkPIOCopy            the PIO copy's writer (impl=asm|asm-nt|asm-movnti|go) against copy, 64 B..4 KiB
//	BenchmarkSmallPacket        a small packet's whole way, path=pio against path=sdma (ns/pkt, p50, p99)
//	BenchmarkMessage            a usdma message (impl=pq) against the same packets sent by hand (impl=hand)
//	BenchmarkVerbsSend          a packet through verbs.Flow.Send and Drain, path=pio|sdma, against the path by hand (impl=hand)
//
// Run them briefly on a shared machine, for example
//
//	go test -run '^$' -bench . -benchtime 200ms ./bench
//
// The README's performance table is made by bench/report, which runs the suite and prints every
// figure beside its baseline with their ratio (go run ./bench/report). Compare the ring with the C
// reference with bench/compare.sh.
package bench
