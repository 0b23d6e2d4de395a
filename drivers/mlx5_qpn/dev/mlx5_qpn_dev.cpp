/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The public reserved-QPN API of a probed device (mlx5_qpn.h): allocation and release through
 * the pool, with the slow path that grows it from the device (mlx5_qpn_grow.cpp), and the
 * device's info, counters and dump. The file map of the generic layer is in
 * mlx5_qpn_dev_priv.h.
 *
 * mlx5_qpn_reserved_alloc() and mlx5_qpn_reserved_dealloc() are inline in mlx5_qpn.h; the
 * functions of those names here are the exported ones (MLX5_QPN_NO_INLINE), the same calls out
 * of line, for applications built so or against an older header.
 */
#define MLX5_QPN_NO_INLINE 1

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include <rte_branch_prediction.h>

#include "mlx5_qpn_dev_internal.h"
#include "mlx5_qpn_dev_priv.h"
#include "mlx5_qpn_mp.h"

using namespace mlx5_qpn_dev_impl;

namespace {

/*
 * An allocation that found the pool empty, or all of it quarantined (rc): reserve more from the
 * device (slow path) and retry, at most `passes` times. `seen` is read before each retry: if
 * another thread reserved meanwhile, grow() returns at once and the next pass sees the new
 * count (a range can be consumed before its count is bumped). Out of line and cold, so that the
 * callers' fast path is the pool's inline call alone.
 */
template <typename Try>
[[gnu::noinline, gnu::cold]] int
alloc_growing(mlx5_qpn_dev *d, int rc, int passes, Try try_alloc)
{
	for (int pass = 0; pass < passes && (rc == -ENOSPC || rc == -EAGAIN); pass++) {
		uint64_t seen = d->sup.grown.load(std::memory_order_acquire);
		rc = try_alloc();
		if (rc != -ENOSPC && rc != -EAGAIN)
			break;
		int g = grow(d, seen);
		if (g != 0) {
			rc = g == -ENODEV ? g : rc; /* a secondary whose primary is gone */
			break;
		}
		d->cnt.sync_reserves.fetch_add(1, rlx);
		rc = try_alloc();
	}
	if (rc == -ENOSPC && d->lease.cooling_qpns.load(rlx) != 0)
		rc = -EAGAIN; /* QPNs exist; they are cooling (invariant 5) */
	return rc;
}

} // namespace

extern "C" {

struct mlx5_qpn_backend *
mlx5_qpn_dev_backend(struct mlx5_qpn_dev *d)
{
	return d != nullptr ? d->id.be : nullptr;
}

int
mlx5_qpn_reserved_alloc(struct mlx5_qpn_dev *d, uint32_t *qpn)
{
	if (unlikely(d == nullptr || qpn == nullptr))
		return -EINVAL;
	int rc = mlx5_qpn_pool_alloc(d->core.pool, qpn);
	if (likely(rc == 0))
		return 0;
	return alloc_growing(d, rc, 4, [d, qpn] { return mlx5_qpn_pool_alloc(d->core.pool, qpn); });
}

/* The inline mlx5_qpn_reserved_alloc() found the pool empty or quarantined (or got NULL): the
 * same retries as above, so that both paths try the pool as often and count alike. */
int
mlx5_qpn_reserved_alloc_slow(struct mlx5_qpn_dev *d, uint32_t *qpn)
{
	if (d == nullptr || qpn == nullptr)
		return -EINVAL;
	return alloc_growing(d, -ENOSPC, 4,
			     [d, qpn] { return mlx5_qpn_pool_alloc(d->core.pool, qpn); });
}

int
mlx5_qpn_reserved_dealloc(struct mlx5_qpn_dev *d, uint32_t qpn)
{
	if (unlikely(d == nullptr))
		return -EINVAL;
	return mlx5_qpn_pool_free(d->core.pool, qpn);
}

int
mlx5_qpn_reserved_alloc_bulk(struct mlx5_qpn_dev *d, uint32_t *qpns, unsigned int n)
{
	if (d == nullptr || (qpns == nullptr && n != 0))
		return -EINVAL;
	int rc = mlx5_qpn_pool_alloc_bulk(d->core.pool, qpns, n);
	if (rc == 0)
		return 0;
	/* More passes than one QPN takes: a bulk may need several ranges. */
	return alloc_growing(d, rc, 64, [d, qpns, n] {
		return mlx5_qpn_pool_alloc_bulk(d->core.pool, qpns, n);
	});
}

int
mlx5_qpn_reserved_dealloc_bulk(struct mlx5_qpn_dev *d, const uint32_t *qpns, unsigned int n)
{
	if (d == nullptr)
		return -EINVAL;
	return mlx5_qpn_pool_free_bulk(d->core.pool, qpns, n);
}

/* The backend's one-QPN op straight: it serialises on its own per-context mutex (rdma-core's),
 * so grow_mutex, which guards the pool's supply, is not taken; the QPNs never meet the pool. A
 * secondary process's handle is a context of its own, as in rdma-core. */
int
mlx5_qpn_dev_fw_qpn_alloc(struct mlx5_qpn_dev *d, uint32_t *qpn)
{
	if (d == nullptr || qpn == nullptr)
		return -EINVAL;
	if (d->id.ops->qpn_reserve_one == nullptr)
		return -EOPNOTSUPP;
	int rc = d->id.ops->qpn_reserve_one(d->id.be, qpn);
	if (rc == 0)
		d->cnt.fw_qpn_allocs.fetch_add(1, rlx);
	return rc;
}

int
mlx5_qpn_dev_fw_qpn_free(struct mlx5_qpn_dev *d, uint32_t qpn)
{
	if (d == nullptr)
		return -EINVAL;
	if (d->id.ops->qpn_release_one == nullptr)
		return -EOPNOTSUPP;
	int rc = d->id.ops->qpn_release_one(d->id.be, qpn);
	if (rc == 0)
		d->cnt.fw_qpn_frees.fetch_add(1, rlx);
	return rc;
}

struct mlx5_qpn_pool *
mlx5_qpn_dev_pool(struct mlx5_qpn_dev *d)
{
	return d != nullptr ? d->core.pool : nullptr;
}

int
mlx5_qpn_dev_info_get(struct mlx5_qpn_dev *d, struct mlx5_qpn_dev_info *info)
{
	if (d == nullptr || info == nullptr)
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "%s", d->id.da.name);
	info->backend = d->id.backend->name;
	info->node_guid = d->id.caps.node_guid;
	info->source = d->sup.ops->source;
	info->reserved_qpn_cap = d->id.caps.reserved_qpn_obj;
	info->log_reserved_qpn_granularity = d->id.caps.log_reserved_qpn_granularity;
	info->log_reserved_qpn_max_alloc = d->id.caps.log_reserved_qpn_max_alloc;
	info->log_max_num_reserved_qpn = d->id.caps.log_max_num_reserved_qpn;
	info->log_range = d->sup.log_range;
	info->max_qpns = static_cast<uint32_t>(d->sup.limit);
	info->quarantine_us = d->id.da.quarantine_us;
	info->numa_node = d->id.numa_node;
	snprintf(info->cores, sizeof(info->cores), "%s", d->id.cores);
	info->pool_name = d->sup.pool_name;
	info->secondary = static_cast<int>(d->proc.secondary);
	mlx5_qpn_mp_counters(d->proc.mp, nullptr, nullptr, nullptr, &info->primary_pid);
	if (d->id.backend->flags & MLX5_QPN_BACKEND_F_EMULATED)
		info->flags |= MLX5_QPN_DEV_F_EMULATED;
	info->port = d->id.caps.port != 0 ? d->id.caps.port : 1;
	return 0;
}

int
mlx5_qpn_dev_stats_get(struct mlx5_qpn_dev *d, struct mlx5_qpn_dev_stats *st)
{
	if (d == nullptr || st == nullptr)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	mlx5_qpn_pool_stats_get(d->core.pool, &st->pool);
	st->ranges_reserved = d->cnt.ranges_reserved.load(rlx);
	st->ranges_released = d->cnt.ranges_released.load(rlx);
	st->qpns_reserved = d->cnt.qpns_reserved.load(rlx);
	st->reserve_failures = d->cnt.reserve_failures.load(rlx);
	st->sync_reserves = d->cnt.sync_reserves.load(rlx);
	st->bg_reserves = d->cnt.bg_reserves.load(rlx);
	st->last_error = d->cnt.last_error.load(rlx);
	st->backoff_skips = d->backoff.skips.load(rlx);
	st->cooling_qpns = d->lease.cooling_qpns.load(rlx);
	st->cooled_ranges = d->lease.cooled_ranges.load(rlx);
	st->lease_errors = d->lease.errors.load(rlx);
	mlx5_qpn_mp_counters(d->proc.mp, &st->mp_grow_requests, &st->mp_ipc_grows,
			     &st->mp_dead_reclaimed, nullptr);
	st->fw_qpn_allocs = d->cnt.fw_qpn_allocs.load(rlx);
	st->fw_qpn_frees = d->cnt.fw_qpn_frees.load(rlx);
	if (d->id.ops->cmd_count != nullptr && d->id.ops->cmd_count(d->id.be, &st->dev_commands))
		st->dev_commands = 0;
	return 0;
}

void
mlx5_qpn_dev_dump(FILE *f, struct mlx5_qpn_dev *d)
{
	if (f == nullptr || d == nullptr)
		return;
	struct mlx5_qpn_dev_info in;
	struct mlx5_qpn_dev_stats st;
	mlx5_qpn_dev_info_get(d, &in);
	mlx5_qpn_dev_stats_get(d, &st);
	fprintf(f, "device %s (%s): GUID %016" PRIx64 ", QPNs from %s\n", in.name, in.backend,
		in.node_guid, mlx5_qpn_supply_of(in.source)->name);
	fprintf(f,
		"  caps: reserved_qpn %u, log granularity %u, log max alloc %u, log max num %u\n",
		in.reserved_qpn_cap, in.log_reserved_qpn_granularity, in.log_reserved_qpn_max_alloc,
		in.log_max_num_reserved_qpn);
	fprintf(f,
		"  ranges of 2^%u, up to %u QPNs, quarantine %" PRIu64 " us, NUMA %d, cores %s\n",
		in.log_range, in.max_qpns, in.quarantine_us, in.numa_node,
		in.cores[0] ? in.cores : "-");
	fprintf(f,
		"  reserved %" PRIu64 " ranges (%" PRIu64 " QPNs), released %" PRIu64
		", failures %" PRIu64 " (last %d), on demand %" PRIu64 ", ahead %" PRIu64 "\n",
		st.ranges_reserved, st.qpns_reserved, st.ranges_released, st.reserve_failures,
		st.last_error, st.sync_reserves, st.bg_reserves);
	fprintf(f,
		"  lease: %" PRIu64 " QPNs cooling, %" PRIu64
		" ranges cooled into the pool, %" PRIu64 " lease errors\n",
		st.cooling_qpns, st.cooled_ranges, st.lease_errors);
	mlx5_qpn_pool_dump(f, d->core.pool);
}

} /* extern "C" */
