// limits: the physical anchors that bench/compare.sh prints beside the ring figures, measured in
// the same run on the same machine, so that ring results can be quoted as ratios to them.
//
//   rtt      one cache line handed back and forth between a thread pinned to CPU 0 and one
//            pinned to CPU 1 (store-release / load-acquire ping-pong on two separate lines):
//            the floor of any cross-core hand-off, e.g. a bulk=1 cross-mode ring op
//   memcpy   single-thread memcpy bandwidth for a bulk of 32 descriptors (512 B), a 4 KiB and
//            a 16 KiB packet payload (the README's Payload benchmarks copy 4096 and 16380
//            bytes), a whole 2048-slot ring (32 KiB) and 1 MiB, also given as ns per 16-byte
//            descriptor: a ring moves each descriptor twice (enqueue copy, dequeue copy)
//
// Output, one measurement per line, for compare.sh's awk:
//   limit=rtt ns=<round trip>
//   limit=memcpy bytes=<n> GBps=<x> ns/desc=<y>
//
// Each memcpy figure is the best of 3 timings of 2 GiB copied between the same two buffers.
//
// Usage: limits [round trips, default 1000000]
//   cc -O2 -o /tmp/limits bench/dpdk/limits.c -lpthread && /tmp/limits
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void pin_to(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set); // best effort
}

// Two lines, 128 bytes apart (the adjacent-line prefetcher pairs 64-byte lines): ping is written
// by the initiator only, pong by the responder only.
static struct {
	_Alignas(128) _Atomic uint64_t ping;
	_Alignas(128) _Atomic uint64_t pong;
} lines;

static uint64_t rounds;

static void *responder(void *arg)
{
	(void)arg;
	pin_to(1);
	for (uint64_t i = 1; i <= rounds; i++) {
		while (atomic_load_explicit(&lines.ping, memory_order_acquire) != i)
			;
		atomic_store_explicit(&lines.pong, i, memory_order_release);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	rounds = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000ULL;
	pthread_t th;
	if (pthread_create(&th, NULL, responder, NULL) != 0) {
		fprintf(stderr, "limits: pthread_create failed\n");
		return 1;
	}
	pin_to(0);
	double t0 = now_ns();
	for (uint64_t i = 1; i <= rounds; i++) {
		atomic_store_explicit(&lines.ping, i, memory_order_release);
		while (atomic_load_explicit(&lines.pong, memory_order_acquire) != i)
			;
	}
	double rtt = (now_ns() - t0) / (double)rounds;
	pthread_join(th, NULL);
	printf("limit=rtt ns=%.1f\n", rtt);

	static const size_t sizes[] = {512, 4096, 16384, 32768, 1 << 20};
	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		char *a = aligned_alloc(4096, n), *b = aligned_alloc(4096, n);
		if (a == NULL || b == NULL) {
			fprintf(stderr, "limits: out of memory\n");
			return 1;
		}
		memset(a, 1, n);
		memset(b, 2, n);
		size_t reps = (size_t)(2ULL << 30) / n;
		double best = 0;
		for (int trial = 0; trial < 3; trial++) { // best of 3: the machine may be shared
			t0 = now_ns();
			for (size_t r = 0; r < reps; r++) {
				memcpy(b, a, n);
				__asm__ volatile("" : : "r"(b) : "memory"); // keep every copy
			}
			double gbps = (double)n * (double)reps / (now_ns() - t0);
			if (gbps > best)
				best = gbps;
		}
		printf("limit=memcpy bytes=%zu GBps=%.1f ns/desc=%.3f\n", n, best, 16.0 / best);
		free(a);
		free(b);
	}
	return 0;
}
