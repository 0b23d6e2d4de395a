/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The inline mlx5_qpn_reserved_alloc()/_dealloc() of mlx5_qpn.h and the exported functions of
 * the same names behave the same, from C and from C++ callers: one script (allocation up to the
 * device's limit, refusals, double free, -ENOSPC, quarantine and -EAGAIN, growth through the
 * slow path) on a fresh emulated device per path, and the four traces compared.
 */
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "mlx5_qpn.h"
#include "dev_paths.h"

namespace {

const struct dev_paths dev_paths_cpp_inline = {
	.name = "C++, inline",
	.alloc = mlx5_qpn_reserved_alloc,
	.dealloc = mlx5_qpn_reserved_dealloc,
};

const struct dev_paths *const all_paths[] = {&dev_paths_c_inline, &dev_paths_cpp_inline,
					     &dev_paths_c_exported, &dev_paths_cpp_exported};

std::string
fresh_name()
{
	static std::atomic<int> seq{0};
	return "simpath" + std::to_string(getpid()) + "x" + std::to_string(seq.fetch_add(1));
}

/* What one path did: every return code in order, and the pool's counters where the script
 * stops growing (the control thread may reserve ahead before, never after the limit). */
struct Trace {
	std::vector<int> rcs;
	std::vector<uint64_t> counts;
	bool operator==(const Trace &o) const { return rcs == o.rcs && counts == o.counts; }
};

std::vector<uint64_t>
counts_of(struct mlx5_qpn_dev *dev)
{
	struct mlx5_qpn_dev_stats st;
	EXPECT_EQ(mlx5_qpn_dev_stats_get(dev, &st), 0);
	return {st.pool.allocs, st.pool.frees,  st.pool.refused_frees, st.pool.enospc,
		st.pool.eagain, st.pool.in_use, st.pool.in_quarantine, st.qpns_reserved};
}

/* 48 QPNs at most in ranges of 16 (the first reserved at probe, the others on demand), a 60 s
 * quarantine: everything the driver's alloc/dealloc decides shows in the return codes. */
Trace
run_script(const struct dev_paths &p)
{
	std::string name = fresh_name();
	std::string args = name + ",quarantine_us=60000000,log_max_alloc=4,limit=48";
	struct mlx5_qpn_dev *dev = nullptr;
	Trace t;
	EXPECT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dev), 0) << p.name;
	if (dev == nullptr)
		return t;
	struct mlx5_qpn_pool *pool = mlx5_qpn_dev_pool(dev);
	uint32_t q = 1;
	/* NULL arguments. */
	t.rcs.push_back(p.alloc(nullptr, &q));
	t.rcs.push_back(p.alloc(dev, nullptr));
	t.rcs.push_back(p.dealloc(nullptr, 0x1000));
	/* Up to the limit, each QPN once, then -ENOSPC. */
	std::set<uint32_t> got;
	int rc;
	while ((rc = p.alloc(dev, &q)) == 0) {
		EXPECT_TRUE(got.insert(q).second) << p.name << ": QPN " << q << " twice";
		EXPECT_EQ(mlx5_qpn_pool_qpn_state(pool, q, nullptr), 1) << p.name;
		if (got.size() > 48)
			break;
	}
	t.rcs.push_back(rc);
	t.rcs.push_back(static_cast<int>(got.size()));
	std::vector<uint64_t> before = counts_of(dev);
	/* Refusals change nothing; a release quarantines; the double free is refused; the next
	 * allocation waits for the quarantine. */
	t.rcs.push_back(p.dealloc(dev, 0xFFFFFF));
	t.rcs.push_back(p.dealloc(dev, 0));
	t.rcs.push_back(p.alloc(dev, &q));
	uint32_t some = *got.begin();
	t.rcs.push_back(p.dealloc(dev, some));
	t.rcs.push_back(mlx5_qpn_pool_qpn_state(pool, some, nullptr));
	t.rcs.push_back(p.dealloc(dev, some));
	t.rcs.push_back(p.alloc(dev, &q));
	t.rcs.push_back(static_cast<int>(q));
	got.erase(some);
	for (uint32_t x : got)
		t.rcs.push_back(p.dealloc(dev, x));
	t.rcs.push_back(p.dealloc(dev, *got.begin()));
	t.rcs.push_back(p.alloc(dev, &q));
	std::vector<uint64_t> after = counts_of(dev);
	for (size_t i = 0; i < after.size(); i++)
		t.counts.push_back(after[i] - before[i]);
	t.counts.push_back(after[5]); /* in use */
	t.counts.push_back(after[6]); /* in quarantine */
	mlx5_qpn_dev_close(dev);
	mlx5_qpn_dev_purge(name.c_str());
	return t;
}

} // namespace

/* The four callers reach two different functions: the inline copies are not the exported ones
 * (so the comparison below compares two implementations), and the handle's first bytes are
 * where the inline calls look for the pool. */
TEST(DevPaths, InlineIsNotTheExportedFunction)
{
	EXPECT_EQ(dev_paths_c_exported.alloc, dev_paths_cpp_exported.alloc);
	EXPECT_EQ(dev_paths_c_exported.dealloc, dev_paths_cpp_exported.dealloc);
	for (const struct dev_paths *p : {&dev_paths_c_inline, &dev_paths_cpp_inline}) {
		EXPECT_NE(p->alloc, dev_paths_cpp_exported.alloc) << p->name;
		EXPECT_NE(p->dealloc, dev_paths_cpp_exported.dealloc) << p->name;
	}
	std::string name = fresh_name();
	struct mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe((name + ",quarantine_us=0").c_str(), &dev), 0);
	EXPECT_EQ(reinterpret_cast<struct mlx5_qpn_dev_core *>(dev)->pool, mlx5_qpn_dev_pool(dev));
	EXPECT_NE(mlx5_qpn_dev_pool(dev), nullptr);
	mlx5_qpn_dev_close(dev);
	mlx5_qpn_dev_purge(name.c_str());
}

TEST(DevPaths, InlineAndExportedBehaveTheSame)
{
	Trace ref = run_script(*all_paths[0]);
	/* What the script must give, spelled out once for the first path. */
	const std::vector<int> head = {-EINVAL, -EINVAL, -EINVAL, -ENOSPC, 48,      -EINVAL,
				       -EINVAL, -ENOSPC, 0,       0,       -EINVAL, -EAGAIN};
	ASSERT_GE(ref.rcs.size(), head.size());
	EXPECT_EQ(std::vector<int>(ref.rcs.begin(), ref.rcs.begin() + head.size()), head);
	EXPECT_EQ(ref.rcs[head.size()], 0) << "q is 0 after a failed allocation";
	EXPECT_EQ(ref.rcs.size(), head.size() + 1 + 47 + 2);
	for (size_t i = head.size() + 1; i < head.size() + 1 + 47; i++)
		EXPECT_EQ(ref.rcs[i], 0) << "release " << i;
	EXPECT_EQ(ref.rcs[ref.rcs.size() - 2], -EINVAL) << "double free after the others";
	EXPECT_EQ(ref.rcs.back(), -EAGAIN);
	/* allocs, frees, refused, enospc, eagain, in_use, in_quarantine, reserved: deltas, then
	 * the final in_use and in_quarantine. */
	EXPECT_EQ(ref.counts[0], 0u);
	EXPECT_EQ(ref.counts[1], 48u);
	EXPECT_EQ(ref.counts[2], 4u);
	EXPECT_EQ(ref.counts[7], 0u) << "no reservation past the limit";
	EXPECT_EQ(ref.counts[8], 0u);
	EXPECT_EQ(ref.counts[9], 48u);
	for (size_t i = 1; i < std::size(all_paths); i++) {
		Trace t = run_script(*all_paths[i]);
		EXPECT_EQ(t.rcs, ref.rcs) << all_paths[i]->name << " vs " << all_paths[0]->name;
		EXPECT_EQ(t.counts, ref.counts)
			<< all_paths[i]->name << " vs " << all_paths[0]->name;
	}
}
