/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The generic driver layer: probe, registry, the reserved-QPN API and the range supply that
 * feeds the pool. Everything that talks to the device (the backend's ops) runs under
 * dev->grow_mutex, which the allocation fast path (the pool) never takes.
 *
 * Invariant 5 (a QPN let go by a process that closed, crashed or was killed is not handed out
 * by anyone before its quarantine has passed) is kept through the per-device lease file
 * (lease/mlx5_qpn_lease.h), for every backend: each range the device gives is recorded there
 * before it feeds the pool, and one that overlaps a cooling entry is held aside ("cooling")
 * until the entry's time has passed; at close the ranges turn cooling in the lease before they
 * go back to the device.
 */
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include <pthread.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_memory.h>

#include "mlx5_qpn.h"
#include "mlx5_qpn_dev_internal.h"
#include "mlx5_qpn_dev_log.h"
#include "mlx5_qpn_devargs.h"
#include "mlx5_qpn_locality.h"
#include "mlx5_qpn_mp.h"
#include "mlx5_qpn_ops.h"
#include "lease/mlx5_qpn_lease.h"

RTE_LOG_REGISTER(mlx5_qpn_dev_logtype, mlx5_qpn.dev, NOTICE);

namespace {
constexpr auto rlx = std::memory_order_relaxed;
}

struct mlx5_qpn_dev {
	struct mlx5_qpn_devargs da;
	const struct mlx5_qpn_dev_ops *ops = nullptr;
	struct mlx5_qpn_backend *be = nullptr;
	struct mlx5_qpn_caps caps = {};
	enum mlx5_qpn_source source = MLX5_QPN_SRC_OBJECTS;
	uint32_t log_range = 0;
	uint64_t limit = 0;               /* most QPNs we may hold from the device */
	struct mlx5_qpn_pool *pool = nullptr;
	char pool_name[MLX5_QPN_POOL_NAMESIZE + 1] = {};
	int numa_node = -1;
	char cores[128] = {};

	std::mutex grow_mutex;            /* device commands; never taken by the fast path */
	std::vector<mlx5_qpn_range_obj> objs; /* under grow_mutex */
	std::atomic<uint64_t> held{0};    /* QPNs reserved from the device now */
	std::atomic<uint64_t> grown{0};   /* successful reservations: lets a waiter see it lost a race */

	std::atomic<uint64_t> ranges_reserved{0}, ranges_released{0}, qpns_reserved{0};
	std::atomic<uint64_t> reserve_failures{0}, sync_reserves{0}, bg_reserves{0};
	std::atomic<int> last_error{0};

	/* Back-off after a failed reservation (see backoff_failed()): no device command before
	 * backoff_until (mlx5_qpn_clock_ns()); read without the mutex by the allocation path. */
	std::atomic<uint64_t> backoff_until{0};
	std::atomic<uint64_t> backoff_skips{0};
	uint64_t backoff_ns = 0;          /* current step, 0: not backing off (grow_mutex) */
	uint64_t fail_streak = 0;         /* failed reservations in a row (grow_mutex) */
	uint64_t fail_logged = 0;         /* fail_streak at the last warning (grow_mutex) */
	uint64_t warn_next_ns = 0;        /* no warning before this (grow_mutex) */

	std::atomic<bool> stop{false};
	pthread_t ctrl{};
	bool ctrl_running = false;
	struct mlx5_qpn_mp *mp = nullptr; /* multi-process: mlx5_qpn_mp.cpp */
	bool secondary = false;           /* attached to a primary's device: never reserves */

	/* Invariant 5 across processes. Under grow_mutex. */
	qpn::lease::Lease lease;
	struct Cooling {
		uint32_t first, count; /* QPNs the device gave us that may not feed the pool yet */
		uint64_t until_ns;     /* when to look at the lease again */
	};
	std::vector<Cooling> cooling;
	std::atomic<uint64_t> cooling_qpns{0}, cooled_ranges{0}, lease_errors{0};
};

namespace {

std::mutex g_devs_mutex;
std::vector<mlx5_qpn_dev *> g_devs;

const char *source_name(mlx5_qpn_source s)
{
	switch (s) {
	case MLX5_QPN_SRC_OBJECTS: return "RESERVED_QPN objects";
	case MLX5_QPN_SRC_SINGLE: return "mlx5dv_reserved_qpn_alloc";
	case MLX5_QPN_SRC_ORDINARY: return "ordinary QPs";
	}
	return "?";
}

/* Give one device object (range or single QPN) back. */
void release_obj(mlx5_qpn_dev *d, const mlx5_qpn_range_obj &o)
{
	int rc = -EOPNOTSUPP;
	switch (d->source) {
	case MLX5_QPN_SRC_OBJECTS:
		if (d->ops->range_release)
			rc = d->ops->range_release(d->be, &o);
		break;
	case MLX5_QPN_SRC_SINGLE:
		if (d->ops->qpn_release_one)
			rc = d->ops->qpn_release_one(d->be, o.first_qpn);
		break;
	case MLX5_QPN_SRC_ORDINARY:
		if (d->ops->qp_destroy)
			rc = d->ops->qp_destroy(d->be, o.first_qpn);
		break;
	}
	if (rc != 0)
		DEV_LOG(WARNING, "%s: returning QPN 0x%06x to the device failed: %s", d->da.name,
			o.first_qpn, strerror(-rc));
	d->held.fetch_sub(1ull << o.log_size, rlx);
	d->ranges_released.fetch_add(1, rlx);
}

/* Process-wide: tells two device instances of one GUID apart in the lease file. */
std::atomic<uint32_t> g_lease_tag{0};

void lease_error(mlx5_qpn_dev *d, int rc, const char *what)
{
	d->lease_errors.fetch_add(1, rlx);
	DEV_LOG(ERR, "%s: lease file: %s failed: %s", d->da.name, what, strerror(-rc));
}

/*
 * The device gave us [first, first + 2^log): record it in the lease as ours and either add it
 * to the pool (no cooling entry overlaps it) or hold it aside until the lease lets it go.
 * The object is already in d->objs (close returns it whatever happens here).
 * @return 0 in the pool; 1 held aside; negative errno (lease full or unusable, or the pool
 *         refused): the QPNs are in neither, the caller gives the object back.
 */
int take_block(mlx5_qpn_dev *d, uint32_t first, uint32_t log)
{
	uint64_t until = 0;
	int rc = d->lease.acquire(first, log, &until);
	if (rc != 0) {
		lease_error(d, rc, "recording a range");
		return rc;
	}
	if (until != 0) {
		d->cooling.push_back({first, 1u << log, until});
		d->cooling_qpns.fetch_add(1ull << log, rlx);
		DEV_LOG(INFO, "%s: QPNs 0x%06x..0x%06x were let go by a process less than a quarantine ago: cooling for %" PRIu64 " ms",
			d->da.name, first, first + (1u << log) - 1,
			(until - mlx5_qpn_clock_ns()) / 1000000);
		return 1;
	}
	rc = mlx5_qpn_pool_add_range(d->pool, first, 1u << log);
	if (rc != 0)
		d->lease.drop(first, log);
	return rc;
}

/* Move ranges whose cooling is over into the pool. @return how many. Caller holds grow_mutex. */
int promote_locked(mlx5_qpn_dev *d)
{
	if (d->cooling.empty())
		return 0;
	uint64_t now = mlx5_qpn_clock_ns();
	int n = 0;
	for (size_t i = 0; i < d->cooling.size();) {
		auto &c = d->cooling[i];
		uint64_t until = 0;
		if (c.until_ns > now) {
			i++;
			continue;
		}
		int rc = d->lease.check(c.first, c.count, &until);
		if (rc != 0) {
			lease_error(d, rc, "checking a cooling range");
			c.until_ns = now + qpn::lease::Lease::kRecheckNs; /* stays out of the pool */
			i++;
			continue;
		}
		if (until != 0) {
			c.until_ns = until;
			i++;
			continue;
		}
		if (mlx5_qpn_pool_add_range(d->pool, c.first, c.count) != 0) {
			c.until_ns = now + qpn::lease::Lease::kRecheckNs;
			i++;
			continue;
		}
		d->cooling_qpns.fetch_sub(c.count, rlx);
		d->cooled_ranges.fetch_add(1, rlx);
		d->cooling.erase(d->cooling.begin() + static_cast<long>(i));
		n++;
	}
	return n;
}

/* One QPN at a time (SINGLE and ORDINARY sources): reserve up to n, add them to the pool as
 * runs of consecutive QPNs (the device's cursor makes most of them consecutive). */
int grow_singles(mlx5_qpn_dev *d, uint32_t n)
{
	std::vector<uint32_t> got;
	int rc = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t q;
		if (d->source == MLX5_QPN_SRC_SINGLE)
			rc = d->ops->qpn_reserve_one ? d->ops->qpn_reserve_one(d->be, &q) : -EOPNOTSUPP;
		else
			rc = d->ops->qp_create ? d->ops->qp_create(d->be, &q) : -EOPNOTSUPP;
		if (rc != 0)
			break;
		got.push_back(q);
		d->objs.push_back({q, 0, 1, 0, 0});
		d->held.fetch_add(1, rlx);
	}
	if (got.empty())
		return rc != 0 ? rc : -ENOSPC;
	std::sort(got.begin(), got.end());
	size_t start = 0;
	bool any_pool = false;
	for (size_t i = 1; i <= got.size(); i++) {
		if (i < got.size() && got[i] == got[i - 1] + 1)
			continue;
		/* The run as aligned power-of-two blocks, each recorded in the lease and added to
		 * the pool or held aside on its own. */
		int arc = 0;
		uint32_t fail_from = 0;
		for (uint32_t q = got[start], end = got[i - 1] + 1; q < end && arc >= 0;) {
			uint32_t log = 0;
			while (log < qpn::lease::kMaxLog && (q & ((2u << log) - 1)) == 0 &&
			       q + (2u << log) <= end)
				log++;
			arc = take_block(d, q, log);
			fail_from = q;
			any_pool |= arc == 0;
			q += 1u << log;
		}
		if (arc < 0) {
			/* Pool's range table or the lease is full: give the failed block and every
			 * later QPN back (the earlier blocks are in the pool or cooling). */
			for (size_t k = start; k < got.size(); k++)
				for (auto it = d->objs.begin(); it != d->objs.end() && got[k] >= fail_from; ++it)
					if (it->first_qpn == got[k]) {
						release_obj(d, *it);
						d->objs.erase(it);
						break;
					}
			return arc;
		}
		start = i;
	}
	d->ranges_reserved.fetch_add(got.size(), rlx); /* one device object per QPN here */
	d->qpns_reserved.fetch_add(got.size(), rlx);
	if (!any_pool) {
		d->grown.fetch_add(1, std::memory_order_release);
		return -EAGAIN; /* all of it must cool first */
	}
	return 0;
}

/*
 * Back-off. A device that refuses reservations (a persistent firmware error, a full range table)
 * would otherwise be asked again by every allocation that finds the pool empty and by the control
 * thread every 1 ms: tens of thousands of firmware commands a second that cannot succeed. After a
 * failed reservation no reservation is attempted for backoff_ns, which starts at 1 ms and doubles
 * up to 1 s per further failure; a success resets it. The allocation path then returns the
 * pool's -ENOSPC/-EAGAIN without a command (counted in backoff_skips). One WARNING starts a
 * streak of failures; while it lasts, at most one more line every 10 s says how many followed.
 */
constexpr uint64_t kBackoffMinNs = 1000000ull;       /* 1 ms */
constexpr uint64_t kBackoffMaxNs = 1000000000ull;    /* 1 s */
constexpr uint64_t kBackoffWarnNs = 10000000000ull;  /* 10 s between warnings */

/* Whether the back-off forbids a device command now (counts the skip). */
bool backoff_running(mlx5_qpn_dev *d)
{
	uint64_t until = d->backoff_until.load(std::memory_order_acquire);
	if (until == 0 || mlx5_qpn_clock_ns() >= until)
		return false;
	d->backoff_skips.fetch_add(1, rlx);
	return true;
}

/* A reservation reached the device and failed (rc). Caller holds grow_mutex. */
void backoff_failed(mlx5_qpn_dev *d, int rc)
{
	uint64_t now = mlx5_qpn_clock_ns();
	d->backoff_ns = d->backoff_ns == 0 ? kBackoffMinNs
					   : std::min(d->backoff_ns * 2, kBackoffMaxNs);
	d->backoff_until.store(now + d->backoff_ns, std::memory_order_release);
	d->fail_streak++;
	if (d->fail_streak == 1 || now >= d->warn_next_ns) {
		if (d->fail_streak == 1)
			DEV_LOG(WARNING, "%s: reserving QPNs from the device failed (%s); retrying with "
				"back-off from 1 ms up to 1 s", d->da.name, strerror(-rc));
		else
			DEV_LOG(WARNING, "%s: reserving QPNs still fails (%s): %" PRIu64 " failures "
				"since the last message, retrying every %" PRIu64 " ms", d->da.name,
				strerror(-rc), d->fail_streak - d->fail_logged, d->backoff_ns / 1000000);
		d->fail_logged = d->fail_streak;
		d->warn_next_ns = now + kBackoffWarnNs;
	}
}

/* A reservation succeeded. Caller holds grow_mutex. */
void backoff_reset(mlx5_qpn_dev *d)
{
	if (d->fail_streak != 0)
		DEV_LOG(NOTICE, "%s: reserving QPNs works again after %" PRIu64 " failures",
			d->da.name, d->fail_streak);
	d->backoff_ns = 0;
	d->fail_streak = 0;
	d->fail_logged = 0;
	d->warn_next_ns = 0;
	d->backoff_until.store(0, std::memory_order_release);
}

/* Reserve one more range from the device into the pool. Caller holds grow_mutex. */
int grow_locked(mlx5_qpn_dev *d)
{
	if (promote_locked(d) > 0) {
		d->grown.fetch_add(1, std::memory_order_release);
		return 0;
	}
	uint64_t held = d->held.load(rlx);
	if (held >= d->limit)
		return d->cooling.empty() ? -ENOSPC : -EAGAIN;
	uint64_t room = d->limit - held;
	int rc;
	if (d->source == MLX5_QPN_SRC_OBJECTS) {
		/* A range that must cool is held aside (it counts against the limit) and another
		 * one is asked for, a few times at most. */
		rc = -ENOSPC;
		for (int attempt = 0; attempt < 4; attempt++) {
			held = d->held.load(rlx);
			room = held < d->limit ? d->limit - held : 0;
			uint32_t log = d->log_range;
			while (log > d->caps.log_reserved_qpn_granularity && (1ull << log) > room)
				log--;
			if ((1ull << log) > room) {
				rc = -ENOSPC;
				break;
			}
			mlx5_qpn_range_obj o = {};
			rc = d->ops->range_reserve ? d->ops->range_reserve(d->be, log, &o) : -EOPNOTSUPP;
			if (rc != 0)
				break;
			d->objs.push_back(o);
			d->held.fetch_add(1ull << o.log_size, rlx);
			rc = take_block(d, o.first_qpn, o.log_size);
			if (rc < 0) {
				release_obj(d, o); /* held, ranges_released */
				d->objs.pop_back();
				break;
			}
			d->ranges_reserved.fetch_add(1, rlx);
			d->qpns_reserved.fetch_add(1ull << o.log_size, rlx);
			if (rc == 0)
				break;
		}
		if (rc != 0 && !d->cooling.empty() && (rc == 1 || rc == -ENOSPC)) {
			/* Nothing new for the pool now, but QPNs will come out of cooling. */
			d->grown.fetch_add(1, std::memory_order_release);
			return -EAGAIN;
		}
	} else {
		uint64_t n = std::min<uint64_t>(1ull << d->log_range, room);
		rc = grow_singles(d, static_cast<uint32_t>(n));
		if (rc == -EAGAIN)
			return rc; /* reserved, but cooling (grown already bumped) */
	}
	if (rc != 0) {
		d->reserve_failures.fetch_add(1, rlx);
		d->last_error.store(rc, rlx);
		backoff_failed(d, rc);
	} else {
		mlx5_qpn_mp_note_grow(d->mp, d->grown.fetch_add(1, std::memory_order_release) + 1);
		backoff_reset(d);
	}
	return rc;
}

/* Reserve more unless another thread did since the caller saw `seen` (then just retry), or the
 * back-off after a failure is running (-EAGAIN: the caller returns the pool's error). */
int grow(mlx5_qpn_dev *d, uint64_t seen)
{
	if (d->secondary)
		return mlx5_qpn_mp_grow(d->mp, 0); /* the primary grows; its counter, not ours */
	if (backoff_running(d))
		return -EAGAIN; /* checked before the mutex too: waiting for it would be a stall */
	std::lock_guard<std::mutex> g(d->grow_mutex);
	if (d->grown.load(std::memory_order_acquire) != seen)
		return 0;
	if (backoff_running(d))
		return -EAGAIN;
	return grow_locked(d);
}

/* The control thread: reserve ahead of need so that the fast path rarely meets an empty pool. */
/*
 * Give the newest range back to the device when the pool holds much more than it needs: at least
 * two ranges above the low-water mark (the hysteresis keeps it from fighting the growth below).
 * Only whole RESERVED_QPN objects, and only when all their QPNs are free (the pool refuses
 * otherwise, -EBUSY: try an older one next time). Caller holds grow_mutex.
 */
int shrink_locked(mlx5_qpn_dev *d, uint64_t free_now)
{
	if (d->source != MLX5_QPN_SRC_OBJECTS || d->objs.size() < 2)
		return -ENOENT;
	uint64_t rsize = 1ull << d->log_range;
	if (free_now < d->da.low_water + 2 * rsize)
		return -ENOENT;
	for (size_t k = d->objs.size(); k-- > 1;) { /* newest first; the first range stays */
		mlx5_qpn_range_obj o = d->objs[k];
		if ((1ull << o.log_size) + d->da.low_water > free_now)
			continue;
		if (mlx5_qpn_pool_range_remove(d->pool, o.first_qpn) != 0)
			continue;
		/* Wholly free and out of quarantine: it may go at once. */
		d->lease.drop(o.first_qpn, o.log_size);
		release_obj(d, o); /* held, ranges_released */
		d->objs.erase(d->objs.begin() + static_cast<long>(k));
		return 0;
	}
	return -EBUSY;
}

/* The control thread: reserve ahead of need so that the fast path rarely meets an empty pool,
 * and give ranges back when the pool holds far more than it uses. */
void *ctrl_main(void *arg)
{
	auto *d = static_cast<mlx5_qpn_dev *>(arg);
	unsigned tick = 0;
	while (!d->stop.load(std::memory_order_acquire)) {
		struct mlx5_qpn_pool_stats st;
		/* Expired quarantine counts as free: release it before judging the low-water mark. */
		mlx5_qpn_pool_drain(d->pool);
		mlx5_qpn_mp_tick(d->mp, d->pool);
		if (mlx5_qpn_pool_stats_get(d->pool, &st) == 0) {
			std::unique_lock<std::mutex> g(d->grow_mutex, std::try_to_lock);
			if (!g.owns_lock()) {
				/* someone else is talking to the device */
			} else if (promote_locked(d) > 0) {
				d->grown.fetch_add(1, std::memory_order_release);
			} else if (st.free < d->da.low_water && d->held.load(rlx) < d->limit) {
				if (!backoff_running(d) && grow_locked(d) == 0)
					d->bg_reserves.fetch_add(1, rlx);
			} else if (++tick % 100 == 0) {
				/* A removal walks the free list once: at most every 100 ms. */
				shrink_locked(d, st.free);
			}
		}
		usleep(1000);
	}
	return nullptr;
}

/* Decide where QPNs come from, proving support by a trial reservation (kept as the first
 * range): the cap bit can be set on a context that cannot create DEVX objects. */
int choose_source(mlx5_qpn_dev *d)
{
	if (d->da.reserved_qpn != MLX5_QPN_RSVD_NO) {
		if (d->caps.reserved_qpn_obj) {
			d->source = MLX5_QPN_SRC_OBJECTS;
			int rc = grow_locked(d);
			if (rc == 0 || (rc == -EAGAIN && !d->objs.empty()))
				return 0; /* proven, even if what it gave must cool first */
			DEV_LOG(INFO, "%s: RESERVED_QPN object creation failed (%s); trying "
				"mlx5dv_reserved_qpn_alloc", d->da.name, strerror(-rc));
		}
		d->source = MLX5_QPN_SRC_SINGLE;
		int rc = grow_locked(d);
		if (rc == 0 || (rc == -EAGAIN && !d->objs.empty()))
			return 0;
		if (d->da.reserved_qpn == MLX5_QPN_RSVD_YES) {
			DEV_LOG(ERR, "%s: no reserved-QPN support (%s) and reserved_qpn=yes", d->da.name,
				strerror(-rc));
			return -EOPNOTSUPP;
		}
		DEV_LOG(NOTICE, "%s: no reserved-QPN support (%s): using ordinary QPs (reserved_qpn=try)",
			d->da.name, strerror(-rc));
	}
	d->source = MLX5_QPN_SRC_ORDINARY;
	if (d->ops->qp_create == nullptr) {
		DEV_LOG(ERR, "%s: ordinary QP numbers are not available on this backend", d->da.name);
		return -EOPNOTSUPP;
	}
	d->limit = std::min<uint64_t>(d->da.max_qpns, 1ull << d->caps.log_max_qp);
	if (d->da.limit != 0)
		d->limit = std::min<uint64_t>(d->limit, d->da.limit);
	int rc = grow_locked(d);
	return rc == -EAGAIN && !d->objs.empty() ? 0 : rc;
}

void destroy(mlx5_qpn_dev *d)
{
	if (d->ctrl_running) {
		d->stop.store(true, std::memory_order_release);
		pthread_join(d->ctrl, nullptr);
	}
	/* After the control thread (it uses d->mp), before the pool goes: primary: no more IPC
	 * grows (waits for one in progress); secondary: detach. */
	mlx5_qpn_mp_close(d->mp);
	d->mp = nullptr;
	{
		std::lock_guard<std::mutex> g(d->grow_mutex);
		/*
		 * Invariant 5: the lease learns when our QPNs may be reused before the device gets
		 * them back. A range the pool can take out whole (every QPN free, none in
		 * quarantine) may go at once; every other one cools from now for our quarantine.
		 */
		if (d->lease.is_open()) {
			if (d->pool != nullptr && d->source == MLX5_QPN_SRC_OBJECTS) {
				mlx5_qpn_pool_drain(d->pool);
				for (auto &o : d->objs) {
					bool aside = false;
					for (auto &c : d->cooling)
						aside |= c.first == o.first_qpn;
					if (!aside && mlx5_qpn_pool_range_remove(d->pool, o.first_qpn) == 0)
						d->lease.drop(o.first_qpn, o.log_size);
				}
			}
			int rc = d->lease.release_all();
			if (rc != 0)
				lease_error(d, rc, "recording the close");
		}
		if (d->pool != nullptr && !d->secondary) /* a secondary's pool is the primary's */
			mlx5_qpn_pool_free_pool(d->pool);
		d->pool = nullptr;
		for (auto &o : d->objs)
			release_obj(d, o);
		d->objs.clear();
	}
	if (d->be != nullptr && d->ops->close != nullptr)
		d->ops->close(d->be);
	delete d;
}

/* Multi-process (mlx5_qpn_mp.h): the primary publishes what a secondary must use as it is. */
void publish(mlx5_qpn_dev *d, const char *devargs)
{
	mlx5_qpn_mp_devinfo di = {};
	di.caps = d->caps;
	di.source = d->source;
	di.log_range = d->log_range;
	di.limit = d->limit;
	di.numa_node = d->numa_node;
	snprintf(di.cores, sizeof(di.cores), "%s", d->cores);
	snprintf(di.pool_name, sizeof(di.pool_name), "%s", d->pool_name);
	int rc = mlx5_qpn_mp_publish(d, d->da.name, devargs, &di, &d->mp);
	if (rc != 0)
		DEV_LOG(WARNING, "%s: secondary processes cannot attach: %s", d->da.name,
			strerror(-rc));
}

/* A secondary attaches to the primary's device and pool and opens its own backend handle (for
 * the data path); it never reserves ranges (no control thread, grow() asks the primary). */
int probe_secondary(mlx5_qpn_dev *d, const char *devargs, mlx5_qpn_dev **out)
{
	mlx5_qpn_devargs mine = d->da;
	mlx5_qpn_mp_devinfo di;
	int rc = mlx5_qpn_mp_attach(&mine, devargs, &d->da, &di, &d->pool, &d->mp);
	if (rc != 0) {
		delete d;
		return rc;
	}
	d->secondary = true;
	d->caps = di.caps;
	d->source = static_cast<mlx5_qpn_source>(di.source);
	d->log_range = di.log_range;
	d->limit = di.limit;
	d->numa_node = di.numa_node;
	snprintf(d->cores, sizeof(d->cores), "%s", di.cores);
	snprintf(d->pool_name, sizeof(d->pool_name), "%s", di.pool_name);
	d->ops = d->da.kind == MLX5_QPN_BACKEND_SIM ? &mlx5_qpn_sim_ops : &mlx5_qpn_hw_ops;
	rc = d->ops->open(&d->da, &d->be);
	if (rc != 0) {
		d->be = nullptr;
		destroy(d);
		return rc;
	}
	DEV_LOG(INFO, "%s: secondary process attached to the primary's device (pool %s)",
		d->da.name, d->pool_name);
	std::lock_guard<std::mutex> g(g_devs_mutex);
	g_devs.push_back(d);
	*out = d;
	return 0;
}

} /* namespace */

extern "C" {

int mlx5_qpn_dev_grow_if(struct mlx5_qpn_dev *d, uint64_t seen, int force, uint64_t *grown)
{
	std::lock_guard<std::mutex> g(d->grow_mutex);
	int rc = 0;
	if (!force && backoff_running(d))
		rc = -EAGAIN; /* as the primary's own allocation path: no device command meanwhile */
	else if (force || d->grown.load(std::memory_order_acquire) == seen) {
		rc = grow_locked(d);
		rc = rc == 0 ? 1 : rc;
	}
	if (rc == 1)
		d->sync_reserves.fetch_add(1, rlx);
	*grown = d->grown.load(std::memory_order_acquire);
	return rc;
}

int mlx5_qpn_dev_probe(const char *devargs, struct mlx5_qpn_dev **out)
{
	if (devargs == nullptr || out == nullptr)
		return -EINVAL;
	auto *d = new (std::nothrow) mlx5_qpn_dev();
	if (d == nullptr)
		return -ENOMEM;
	int rc = mlx5_qpn_devargs_parse(devargs, &d->da);
	if (rc != 0) {
		delete d;
		return rc;
	}
	{
		std::lock_guard<std::mutex> g(g_devs_mutex);
		for (auto *x : g_devs)
			if (strcmp(x->da.name, d->da.name) == 0) {
				DEV_LOG(ERR, "device %s is already probed", d->da.name);
				delete d;
				return -EEXIST;
			}
	}
	if (rte_eal_process_type() == RTE_PROC_SECONDARY)
		return probe_secondary(d, devargs, out);
	d->ops = d->da.kind == MLX5_QPN_BACKEND_SIM ? &mlx5_qpn_sim_ops : &mlx5_qpn_hw_ops;
	rc = d->ops->open(&d->da, &d->be);
	if (rc != 0) {
		d->be = nullptr;
		destroy(d);
		return rc;
	}
	rc = d->ops->query_caps(d->be, &d->caps);
	if (rc != 0) {
		DEV_LOG(ERR, "%s: query caps failed: %s", d->da.name, strerror(-rc));
		destroy(d);
		return rc;
	}
	/* Reservation size: the devarg, else the largest object the device allows. */
	uint32_t gran = d->caps.log_reserved_qpn_granularity;
	uint32_t maxa = std::max<uint32_t>(d->caps.log_reserved_qpn_max_alloc, gran);
	if (d->da.log_range == UINT32_MAX) {
		d->log_range = maxa;
	} else if (d->da.log_range < gran || d->da.log_range > maxa) {
		DEV_LOG(ERR, "bad devarg log_range=%u: outside the device's [%u, %u]", d->da.log_range,
			gran, maxa);
		destroy(d);
		return -EINVAL;
	} else {
		d->log_range = d->da.log_range;
	}
	d->limit = std::min<uint64_t>(d->da.max_qpns, 1ull << d->caps.log_max_num_reserved_qpn);
	if (d->da.limit != 0)
		d->limit = std::min<uint64_t>(d->limit, d->da.limit);

	mlx5_qpn_locality(&d->da, &d->numa_node, d->cores, sizeof(d->cores));

	snprintf(d->pool_name, sizeof(d->pool_name), "qpn_%.19s", d->da.name);
	struct mlx5_qpn_pool_params prm = {};
	prm.name = d->pool_name;
	prm.quarantine_ns = d->da.quarantine_us * 1000;
	prm.cache_size = d->da.cache;
	/* Sized for max_qpns whichever source is chosen below, plus room for eight ranges: a range
	 * given back to the device leaves its slots unused for a grace period (pool docs). */
	prm.capacity = static_cast<uint32_t>(std::min<uint64_t>(
		uint64_t(d->da.max_qpns) + 8 * (1ull << d->log_range), (1u << 24) - 1));
	prm.socket_id = SOCKET_ID_ANY;
	if (d->numa_node >= 0) {
		/* Place the pool on the device's socket when EAL has memory there. */
		for (unsigned i = 0; i < rte_socket_count(); i++)
			if (rte_socket_id_by_idx(i) == d->numa_node)
				prm.socket_id = d->numa_node;
	}
	d->pool = mlx5_qpn_pool_create(&prm);
	if (d->pool == nullptr) {
		rc = -rte_errno;
		DEV_LOG(ERR, "%s: cannot create pool %s: %s", d->da.name, d->pool_name,
			rte_strerror(rte_errno));
		destroy(d);
		return rc != 0 ? rc : -ENOMEM;
	}
	rc = d->lease.open(d->caps.node_guid, g_lease_tag.fetch_add(1, rlx) + 1,
			   d->da.quarantine_us * 1000);
	if (rc != 0) {
		DEV_LOG(ERR, "%s: cannot open the lease file of GUID %016" PRIx64 ": %s", d->da.name,
			d->caps.node_guid, strerror(-rc));
		destroy(d);
		return rc;
	}
	{
		std::lock_guard<std::mutex> g(d->grow_mutex);
		rc = choose_source(d);
	}
	if (rc != 0) {
		if (rc != -EOPNOTSUPP)
			DEV_LOG(ERR, "%s: first reservation failed: %s", d->da.name, strerror(-rc));
		destroy(d);
		return rc;
	}
	publish(d, devargs); /* before the control thread: it reads d->mp */
	char tname[RTE_MAX_THREAD_NAME_LEN];
	snprintf(tname, sizeof(tname), "qpn-%.11s", d->da.name);
	if (rte_ctrl_thread_create(&d->ctrl, tname, nullptr, ctrl_main, d) == 0)
		d->ctrl_running = true;
	else
		DEV_LOG(WARNING, "%s: no control thread: ranges are reserved on demand only",
			d->da.name);
	DEV_LOG(INFO, "%s: %s backend, GUID %016" PRIx64 ", QPNs from %s, ranges of 2^%u, up to %"
		PRIu64 ", quarantine %" PRIu64 " us", d->da.name,
		d->da.kind == MLX5_QPN_BACKEND_SIM ? "emulated" : "hardware", d->caps.node_guid,
		source_name(d->source), d->log_range, d->limit, d->da.quarantine_us);
	{
		std::lock_guard<std::mutex> g(g_devs_mutex);
		g_devs.push_back(d);
	}
	*out = d;
	return 0;
}

struct mlx5_qpn_dev *mlx5_qpn_dev_get(const char *name)
{
	if (name == nullptr)
		return nullptr;
	std::lock_guard<std::mutex> g(g_devs_mutex);
	for (auto *d : g_devs)
		if (strcmp(d->da.name, name) == 0)
			return d;
	return nullptr;
}

int mlx5_qpn_dev_query(const char *name, struct mlx5_qpn_dev_info *info,
		       struct mlx5_qpn_dev_stats *stats, char *pool_name, size_t len)
{
	if (name == nullptr)
		return -ENODEV;
	std::lock_guard<std::mutex> g(g_devs_mutex);
	for (auto *d : g_devs) {
		if (strcmp(d->da.name, name) != 0)
			continue;
		if (info != nullptr) {
			mlx5_qpn_dev_info_get(d, info);
			snprintf(pool_name, len, "%s", d->pool_name);
			info->pool_name = pool_name;
		}
		if (stats != nullptr)
			mlx5_qpn_dev_stats_get(d, stats);
		return 0;
	}
	return -ENODEV;
}

struct mlx5_qpn_backend *mlx5_qpn_dev_backend(struct mlx5_qpn_dev *d)
{
	return d != nullptr ? d->be : nullptr;
}

int mlx5_qpn_dev_is_sim(struct mlx5_qpn_dev *d)
{
	if (d == nullptr)
		return -EINVAL;
	return d->da.kind == MLX5_QPN_BACKEND_SIM ? 1 : 0;
}

unsigned int mlx5_qpn_dev_names(char (*names)[32], unsigned int n)
{
	std::lock_guard<std::mutex> g(g_devs_mutex);
	unsigned int k = 0;
	for (; k < n && k < g_devs.size(); k++)
		snprintf(names[k], 32, "%s", g_devs[k]->da.name);
	return k;
}

unsigned int mlx5_qpn_dev_list(const char **names, unsigned int n)
{
	std::lock_guard<std::mutex> g(g_devs_mutex);
	for (unsigned i = 0; i < n && i < g_devs.size(); i++)
		names[i] = g_devs[i]->da.name;
	return static_cast<unsigned int>(g_devs.size());
}

void mlx5_qpn_dev_close(struct mlx5_qpn_dev *d)
{
	if (d == nullptr)
		return;
	{
		std::lock_guard<std::mutex> g(g_devs_mutex);
		auto it = std::find(g_devs.begin(), g_devs.end(), d);
		if (it == g_devs.end())
			return; /* not a probed device */
		g_devs.erase(it);
	}
	destroy(d);
}

int mlx5_qpn_reserved_alloc(struct mlx5_qpn_dev *d, uint32_t *qpn)
{
	if (unlikely(d == nullptr || qpn == nullptr))
		return -EINVAL;
	int rc = mlx5_qpn_pool_alloc(d->pool, qpn);
	if (likely(rc == 0))
		return 0;
	/*
	 * Empty, or all quarantined: reserve more from the device (slow path) and retry. `seen` is
	 * read before each retry: if another thread reserved meanwhile, grow() returns at once and
	 * the next pass sees the new count (a range can be consumed before its count is bumped).
	 */
	for (int pass = 0; pass < 4 && (rc == -ENOSPC || rc == -EAGAIN); pass++) {
		uint64_t seen = d->grown.load(std::memory_order_acquire);
		rc = mlx5_qpn_pool_alloc(d->pool, qpn);
		if (rc == 0 || (rc != -ENOSPC && rc != -EAGAIN))
			break;
		int g = grow(d, seen);
		if (g != 0) {
			rc = g == -ENODEV ? g : rc; /* a secondary whose primary is gone */
			break;
		}
		d->sync_reserves.fetch_add(1, rlx);
		rc = mlx5_qpn_pool_alloc(d->pool, qpn);
	}
	if (rc == -ENOSPC && d->cooling_qpns.load(rlx) != 0)
		rc = -EAGAIN; /* QPNs exist; they are cooling (invariant 5) */
	return rc;
}

int mlx5_qpn_reserved_dealloc(struct mlx5_qpn_dev *d, uint32_t qpn)
{
	if (unlikely(d == nullptr))
		return -EINVAL;
	return mlx5_qpn_pool_free(d->pool, qpn);
}

int mlx5_qpn_reserved_alloc_bulk(struct mlx5_qpn_dev *d, uint32_t *qpns, unsigned int n)
{
	if (d == nullptr || (qpns == nullptr && n != 0))
		return -EINVAL;
	int rc = mlx5_qpn_pool_alloc_bulk(d->pool, qpns, n);
	for (int pass = 0; (rc == -ENOSPC || rc == -EAGAIN) && pass < 64; pass++) {
		uint64_t seen = d->grown.load(std::memory_order_acquire);
		rc = mlx5_qpn_pool_alloc_bulk(d->pool, qpns, n);
		if (rc != -ENOSPC && rc != -EAGAIN)
			break;
		int g = grow(d, seen);
		if (g != 0) {
			rc = g == -ENODEV ? g : rc;
			break;
		}
		d->sync_reserves.fetch_add(1, rlx);
		rc = mlx5_qpn_pool_alloc_bulk(d->pool, qpns, n);
	}
	if (rc == -ENOSPC && d->cooling_qpns.load(rlx) != 0)
		rc = -EAGAIN;
	return rc;
}

int mlx5_qpn_reserved_dealloc_bulk(struct mlx5_qpn_dev *d, const uint32_t *qpns, unsigned int n)
{
	if (d == nullptr)
		return -EINVAL;
	return mlx5_qpn_pool_free_bulk(d->pool, qpns, n);
}

struct mlx5_qpn_pool *mlx5_qpn_dev_pool(struct mlx5_qpn_dev *d)
{
	return d != nullptr ? d->pool : nullptr;
}

int mlx5_qpn_dev_grow(struct mlx5_qpn_dev *d)
{
	if (d == nullptr)
		return -EINVAL;
	if (d->secondary)
		return mlx5_qpn_mp_grow(d->mp, 1);
	std::lock_guard<std::mutex> g(d->grow_mutex);
	return grow_locked(d);
}

int mlx5_qpn_dev_info_get(struct mlx5_qpn_dev *d, struct mlx5_qpn_dev_info *info)
{
	if (d == nullptr || info == nullptr)
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "%s", d->da.name);
	info->backend = d->da.kind == MLX5_QPN_BACKEND_SIM ? "sim" : "hw";
	info->node_guid = d->caps.node_guid;
	info->source = d->source;
	info->reserved_qpn_cap = d->caps.reserved_qpn_obj;
	info->log_reserved_qpn_granularity = d->caps.log_reserved_qpn_granularity;
	info->log_reserved_qpn_max_alloc = d->caps.log_reserved_qpn_max_alloc;
	info->log_max_num_reserved_qpn = d->caps.log_max_num_reserved_qpn;
	info->log_range = d->log_range;
	info->max_qpns = static_cast<uint32_t>(d->limit);
	info->quarantine_us = d->da.quarantine_us;
	info->numa_node = d->numa_node;
	snprintf(info->cores, sizeof(info->cores), "%s", d->cores);
	info->pool_name = d->pool_name;
	info->secondary = d->secondary;
	mlx5_qpn_mp_counters(d->mp, nullptr, nullptr, nullptr, &info->primary_pid);
	return 0;
}

int mlx5_qpn_dev_stats_get(struct mlx5_qpn_dev *d, struct mlx5_qpn_dev_stats *st)
{
	if (d == nullptr || st == nullptr)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	mlx5_qpn_pool_stats_get(d->pool, &st->pool);
	st->ranges_reserved = d->ranges_reserved.load(rlx);
	st->ranges_released = d->ranges_released.load(rlx);
	st->qpns_reserved = d->qpns_reserved.load(rlx);
	st->reserve_failures = d->reserve_failures.load(rlx);
	st->sync_reserves = d->sync_reserves.load(rlx);
	st->bg_reserves = d->bg_reserves.load(rlx);
	st->last_error = d->last_error.load(rlx);
	st->backoff_skips = d->backoff_skips.load(rlx);
	st->cooling_qpns = d->cooling_qpns.load(rlx);
	st->cooled_ranges = d->cooled_ranges.load(rlx);
	st->lease_errors = d->lease_errors.load(rlx);
	mlx5_qpn_mp_counters(d->mp, &st->mp_grow_requests, &st->mp_ipc_grows,
			     &st->mp_dead_reclaimed, nullptr);
	return 0;
}

void mlx5_qpn_dev_dump(FILE *f, struct mlx5_qpn_dev *d)
{
	if (f == nullptr || d == nullptr)
		return;
	struct mlx5_qpn_dev_info in;
	struct mlx5_qpn_dev_stats st;
	mlx5_qpn_dev_info_get(d, &in);
	mlx5_qpn_dev_stats_get(d, &st);
	fprintf(f, "device %s (%s): GUID %016" PRIx64 ", QPNs from %s\n", in.name, in.backend,
		in.node_guid, source_name(in.source));
	fprintf(f, "  caps: reserved_qpn %u, log granularity %u, log max alloc %u, log max num %u\n",
		in.reserved_qpn_cap, in.log_reserved_qpn_granularity, in.log_reserved_qpn_max_alloc,
		in.log_max_num_reserved_qpn);
	fprintf(f, "  ranges of 2^%u, up to %u QPNs, quarantine %" PRIu64 " us, NUMA %d, cores %s\n",
		in.log_range, in.max_qpns, in.quarantine_us, in.numa_node,
		in.cores[0] ? in.cores : "-");
	fprintf(f, "  reserved %" PRIu64 " ranges (%" PRIu64 " QPNs), released %" PRIu64
		   ", failures %" PRIu64 " (last %d), on demand %" PRIu64 ", ahead %" PRIu64 "\n",
		st.ranges_reserved, st.qpns_reserved, st.ranges_released, st.reserve_failures,
		st.last_error, st.sync_reserves, st.bg_reserves);
	fprintf(f, "  lease: %" PRIu64 " QPNs cooling, %" PRIu64 " ranges cooled into the pool, %" PRIu64
		   " lease errors\n", st.cooling_qpns, st.cooled_ranges, st.lease_errors);
	mlx5_qpn_pool_dump(f, d->pool);
}

} /* extern "C" */
