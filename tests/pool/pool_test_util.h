/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TEST_POOL_UTIL_H
#define QPN_TEST_POOL_UTIL_H

#include <atomic>
#include <cstdint>
#include <string>

#include <rte_lcore.h>
#include <rte_memory.h>

#include "mlx5_qpn_pool.h"

/* A pool that frees itself; each test gets a unique name. */
class TestPool {
public:
	TestPool(uint32_t capacity, uint32_t cache, uint64_t quarantine_ns)
	{
		static std::atomic<int> seq{0};
		name_ = "tp" + std::to_string(seq.fetch_add(1));
		struct mlx5_qpn_pool_params prm = {};
		prm.name = name_.c_str();
		prm.quarantine_ns = quarantine_ns;
		prm.cache_size = cache;
		prm.capacity = capacity;
		prm.socket_id = SOCKET_ID_ANY;
		pool_ = mlx5_qpn_pool_create(&prm);
	}
	~TestPool() { mlx5_qpn_pool_destroy(pool_); }
	TestPool(const TestPool &) = delete;
	TestPool &operator=(const TestPool &) = delete;
	struct mlx5_qpn_pool *get() const { return pool_; }
	const std::string &name() const { return name_; }

private:
	std::string name_;
	struct mlx5_qpn_pool *pool_ = nullptr;
};

inline struct mlx5_qpn_pool_stats
pool_stats(struct mlx5_qpn_pool *p)
{
	struct mlx5_qpn_pool_stats st = {};
	mlx5_qpn_pool_stats_get(p, &st);
	return st;
}

#endif
