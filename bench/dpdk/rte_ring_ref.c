// rte_ring_ref: the DPDK reference figures that bench/compare.sh sets beside gosdma's ring.
//
// A single-producer/single-consumer rte_ring (elem API, 16-byte elements like an SDMA
// descriptor, 2048 slots, RING_F_SP_ENQ | RING_F_SC_DEQ), used without the EAL: the ring lives in
// 64-byte-aligned heap memory and is set up with rte_ring_init. For each bulk size it measures
//
//   mode=same   one thread: enqueue a bulk, dequeue it again
//   mode=cross  producer thread pinned to CPU 0 (enqueue_burst), consumer pinned to CPU 1
//               (dequeue_burst), the same number of elements
//
// and prints one line per measurement: "mode=<m> bulk=<b> ns/desc=<x>".
//
// Usage: rte_ring_ref [elements per measurement, default 20000000]
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <rte_ring.h>
#include <rte_ring_elem.h>

#define RING_SLOTS 2048
#define MAX_BULK 64

struct desc { uint64_t qw0, qw1; }; // struct hw_sdma_desc's shape

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

static struct rte_ring *ring_new(void)
{
	ssize_t size = rte_ring_get_memsize_elem(sizeof(struct desc), RING_SLOTS);
	void *mem;
	if (size < 0 || posix_memalign(&mem, 64, (size_t)size) != 0) {
		fprintf(stderr, "rte_ring_ref: cannot allocate the ring\n");
		exit(1);
	}
	struct rte_ring *r = mem;
	if (rte_ring_init(r, "ref", RING_SLOTS, RING_F_SP_ENQ | RING_F_SC_DEQ) != 0) {
		fprintf(stderr, "rte_ring_ref: rte_ring_init failed\n");
		exit(1);
	}
	return r;
}

struct consumer_arg {
	struct rte_ring *r;
	unsigned bulk;
	uint64_t total;
	uint64_t sum; // keeps the reads alive
};

static void *consume(void *p)
{
	struct consumer_arg *a = p;
	struct desc buf[MAX_BULK];
	uint64_t got = 0, sum = 0;
	pin_to(1);
	while (got < a->total) {
		unsigned n = rte_ring_dequeue_burst_elem(a->r, buf, sizeof(struct desc), a->bulk, NULL);
		for (unsigned i = 0; i < n; i++)
			sum += buf[i].qw0;
		got += n;
	}
	a->sum = sum;
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t elems = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000000ULL;
	static const unsigned bulks[] = {1, 8, 32};
	struct desc src[MAX_BULK], dst[MAX_BULK];
	for (unsigned i = 0; i < MAX_BULK; i++) {
		src[i].qw0 = i;
		src[i].qw1 = ~(uint64_t)i;
	}
	printf("# rte_ring elem=16B slots=%d SP/SC, %llu elements per measurement\n", RING_SLOTS,
	       (unsigned long long)elems);

	for (unsigned b = 0; b < sizeof(bulks) / sizeof(bulks[0]); b++) {
		unsigned bulk = bulks[b];
		uint64_t ops = elems / bulk;
		struct rte_ring *r = ring_new();

		pin_to(0);
		double t0 = now_ns();
		for (uint64_t i = 0; i < ops; i++) {
			if (rte_ring_enqueue_bulk_elem(r, src, sizeof(struct desc), bulk, NULL) != bulk ||
			    rte_ring_dequeue_bulk_elem(r, dst, sizeof(struct desc), bulk, NULL) != bulk) {
				fprintf(stderr, "rte_ring_ref: short bulk\n");
				return 1;
			}
		}
		printf("mode=same bulk=%u ns/desc=%.3f\n", bulk, (now_ns() - t0) / (double)(ops * bulk));

		struct consumer_arg a = {r, bulk, ops * bulk, 0};
		pthread_t th;
		t0 = now_ns();
		if (pthread_create(&th, NULL, consume, &a) != 0) {
			fprintf(stderr, "rte_ring_ref: pthread_create failed\n");
			return 1;
		}
		for (uint64_t sent = 0; sent < a.total;) {
			unsigned want = a.total - sent < bulk ? (unsigned)(a.total - sent) : bulk;
			sent += rte_ring_enqueue_burst_elem(r, src, sizeof(struct desc), want, NULL);
		}
		pthread_join(th, NULL);
		printf("mode=cross bulk=%u ns/desc=%.3f\n", bulk, (now_ns() - t0) / (double)a.total);
		free(r);
	}
	return 0;
}
