/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool_pair_loop: N alloc+free pairs of ours and of rte_mempool (cache 256, one 4-byte element
 * per QPN, as qpn-perf's "mempool" peer), each in a function of its own, for instruction counts
 * per pair under callgrind, which the machine's load does not change:
 *
 *   valgrind --tool=callgrind --toggle-collect='loop_*' build/tests/pool/pool_pair_loop \
 *       --no-huge --no-pci -m 512 -l 0 -- ours 1000000
 *   callgrind_annotate --inclusive=yes callgrind.out.<pid> | grep loop_
 *
 * Arguments after "--": which loop (ours, mempool or all) and the pair count. Without
 * valgrind it prints TSC cycles per pair (one lcore; no timing assertion anywhere).
 */
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_mempool.h>

#include "mlx5_qpn_pool.h"

namespace {

constexpr uint32_t kRange = 65536, kCache = 256, kFirst = 0x1000;

__attribute__((noinline)) uint64_t
loop_ours(struct mlx5_qpn_pool *p, uint64_t n)
{
	uint64_t sum = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t q;
		if (mlx5_qpn_pool_alloc(p, &q) != 0)
			abort();
		sum += q;
		if (mlx5_qpn_pool_free(p, q) != 0)
			abort();
	}
	return sum;
}

__attribute__((noinline)) uint64_t
loop_mempool(struct rte_mempool *mp, uint64_t n)
{
	uint64_t sum = 0;
	for (uint64_t i = 0; i < n; i++) {
		void *o;
		if (rte_mempool_get(mp, &o) != 0)
			abort();
		sum += *static_cast<const uint32_t *>(o);
		rte_mempool_put(mp, o);
	}
	return sum;
}

void
obj_init(struct rte_mempool *, void *, void *obj, unsigned int idx)
{
	*static_cast<uint32_t *>(obj) = kFirst + idx;
}

template <typename F>
void
run(const char *name, uint64_t n, F f)
{
	f(n / 10); /* warm: caches filled, code paged in */
	uint64_t t0 = rte_rdtsc_precise();
	uint64_t sum = f(n);
	uint64_t t1 = rte_rdtsc_precise();
	printf("%-10s %" PRIu64 " pairs  %.2f TSC cycles/pair  (sum %" PRIu64 ")\n", name, n,
	       static_cast<double>(t1 - t0) / static_cast<double>(n), sum);
}

} /* namespace */

int
main(int argc, char **argv)
{
	int eal = rte_eal_init(argc, argv);
	if (eal < 0) {
		fprintf(stderr, "pool_pair_loop: EAL init failed\n");
		return 1;
	}
	argc -= eal;
	argv += eal;
	const char *which = argc > 1 ? argv[1] : "all";
	uint64_t n = argc > 2 ? strtoull(argv[2], nullptr, 0) : 1000000;
	bool all = strcmp(which, "all") == 0;

	struct mlx5_qpn_pool_params prm = {};
	prm.name = "pairloop";
	prm.cache_size = kCache;
	prm.capacity = kRange;
	prm.socket_id = SOCKET_ID_ANY;
	struct mlx5_qpn_pool *p = mlx5_qpn_pool_create(&prm);
	if (p == nullptr || mlx5_qpn_pool_range_add(p, kFirst, kRange) != 0) {
		fprintf(stderr, "pool_pair_loop: pool setup failed\n");
		return 1;
	}
	struct rte_mempool *mp = rte_mempool_create("pairloop_mp", kRange, sizeof(uint32_t), kCache,
						    0, nullptr, nullptr, obj_init, nullptr,
						    SOCKET_ID_ANY, 0);
	if (mp == nullptr) {
		fprintf(stderr, "pool_pair_loop: mempool setup failed\n");
		return 1;
	}
	if (all || strcmp(which, "ours") == 0)
		run("ours", n, [p](uint64_t k) { return loop_ours(p, k); });
	if (all || strcmp(which, "mempool") == 0)
		run("mempool", n, [mp](uint64_t k) { return loop_mempool(mp, k); });
	rte_mempool_free(mp);
	mlx5_qpn_pool_destroy(p);
	rte_eal_cleanup();
	return 0;
}
