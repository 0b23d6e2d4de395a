/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Feeding a device's pool from its QPN supply (mlx5_qpn_supply.cpp): growth on demand and
 * ahead of need (the control thread), the back-off after failures, the lease file and the
 * ranges held aside while they cool (invariant 5, see mlx5_qpn_dev_priv.h), and giving ranges
 * back when the pool holds far more than it uses. Everything here runs under dev->sup.grow_mutex
 * unless it says otherwise.
 */
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include <unistd.h>

#include "mlx5_qpn_dev_priv.h"
#include "mlx5_qpn_mp.h"

namespace mlx5_qpn_dev_impl {

std::atomic<int> g_test_fail_push_backs{0}; /* mlx5_qpn_vec.h */
std::atomic<int> g_test_pass_push_backs{0};

/* Give one device object (range or single QPN) back. */
void
release_obj(mlx5_qpn_dev *d, const mlx5_qpn_range_obj &o)
{
	int rc = d->sup.ops->release(d->id.ops, d->id.be, &o);
	if (rc != 0)
		DEV_LOG(WARNING, "%s: returning QPN 0x%06x to the device failed: %s", d->id.da.name,
			o.first_qpn, strerror(-rc));
	d->sup.held.fetch_sub(1ull << o.log_size, rlx);
	d->cnt.ranges_released.fetch_add(1, rlx);
}

void
lease_error(mlx5_qpn_dev *d, int rc, const char *what)
{
	d->lease.errors.fetch_add(1, rlx);
	DEV_LOG(ERR, "%s: lease file: %s failed: %s", d->id.da.name, what, strerror(-rc));
}

namespace {

/*
 * The device gave us [first, first + 2^log): record it in the lease as ours and either add it
 * to the pool (no cooling entry overlaps it) or hold it aside until the lease lets it go.
 * The object is already in d->sup.objs (close returns it whatever happens here).
 * @return 0 in the pool; 1 held aside; negative errno (lease full or unusable, or the pool
 *         refused): the QPNs are in neither, the caller gives the object back.
 */
int
take_block(mlx5_qpn_dev *d, uint32_t first, uint32_t log)
{
	uint64_t until = 0;
	int rc = d->lease.file.acquire(first, log, &until);
	if (rc != 0) {
		lease_error(d, rc, "recording a range");
		return rc;
	}
	if (until != 0) {
		if (!d->lease.cooling.push_back({first, 1u << log, until})) {
			d->lease.file.drop(first, log);
			return -ENOMEM;
		}
		d->lease.cooling_qpns.fetch_add(1ull << log, rlx);
		DEV_LOG(INFO,
			"%s: QPNs 0x%06x..0x%06x were let go by a process less than a quarantine ago: cooling for %" PRIu64
			" ms",
			d->id.da.name, first, first + (1u << log) - 1,
			(until - mlx5_qpn_clock_ns()) / 1000000);
		return 1;
	}
	rc = mlx5_qpn_pool_range_add(d->core.pool, first, 1u << log);
	if (rc != 0)
		d->lease.file.drop(first, log);
	return rc;
}

} /* namespace */

/* Move ranges whose cooling is over into the pool. @return how many. Caller holds grow_mutex. */
int
promote_locked(mlx5_qpn_dev *d)
{
	if (d->lease.cooling.empty())
		return 0;
	uint64_t now = mlx5_qpn_clock_ns();
	int n = 0;
	for (size_t i = 0; i < d->lease.cooling.size();) {
		auto &c = d->lease.cooling[i];
		uint64_t until = 0;
		if (c.until_ns > now) {
			i++;
			continue;
		}
		/* ASIDE in the lease until now: from here on a close or a death makes it cool. */
		int rc = d->lease.file.admit(c.first, c.count, &until);
		if (rc != 0) {
			lease_error(d, rc, "checking a cooling range");
			c.until_ns = now +
				     qpn::lease::Lease::kRecheckNs; /* stays out of the pool */
			i++;
			continue;
		}
		if (until != 0) {
			c.until_ns = until;
			i++;
			continue;
		}
		if (mlx5_qpn_pool_range_add(d->core.pool, c.first, c.count) != 0) {
			c.until_ns = now + qpn::lease::Lease::kRecheckNs;
			i++;
			continue;
		}
		d->lease.cooling_qpns.fetch_sub(c.count, rlx);
		d->lease.cooled_ranges.fetch_add(1, rlx);
		d->lease.cooling.erase(d->lease.cooling.begin() + i);
		n++;
	}
	return n;
}

namespace {

/* One QPN at a time (a supply of single QPNs or ordinary QPs): reserve up to n, add them to the pool as
 * runs of consecutive QPNs (the device's cursor makes most of them consecutive). */
int
grow_singles(mlx5_qpn_dev *d, uint32_t n)
{
	NtVec<uint32_t> got;
	int rc = 0;
	for (uint32_t i = 0; i < n; i++) {
		mlx5_qpn_range_obj o;
		rc = d->sup.ops->reserve(d->id.ops, d->id.be, 0, &o);
		if (rc != 0)
			break;
		d->sup.held.fetch_add(1, rlx);
		if (!got.push_back(o.first_qpn)) {
			release_obj(d, o);
			rc = -ENOMEM;
			break;
		}
		if (!d->sup.objs.push_back(o)) {
			got.pop_back();
			release_obj(d, o);
			rc = -ENOMEM;
			break;
		}
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
				for (auto it = d->sup.objs.begin();
				     it != d->sup.objs.end() && got[k] >= fail_from; ++it)
					if (it->first_qpn == got[k]) {
						release_obj(d, *it);
						d->sup.objs.erase(it);
						break;
					}
			return arc;
		}
		start = i;
	}
	d->cnt.ranges_reserved.fetch_add(got.size(), rlx); /* one device object per QPN here */
	d->cnt.qpns_reserved.fetch_add(got.size(), rlx);
	if (!any_pool) {
		d->sup.grown.fetch_add(1, std::memory_order_release);
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
constexpr uint64_t kBackoffMinNs = 1000000ull;      /* 1 ms */
constexpr uint64_t kBackoffMaxNs = 1000000000ull;   /* 1 s */
constexpr uint64_t kBackoffWarnNs = 10000000000ull; /* 10 s between warnings */

} /* namespace */

/* Whether the back-off forbids a device command now (counts the skip). */
bool
backoff_running(mlx5_qpn_dev *d)
{
	uint64_t until = d->backoff.until.load(std::memory_order_acquire);
	if (until == 0 || mlx5_qpn_clock_ns() >= until)
		return false;
	d->backoff.skips.fetch_add(1, rlx);
	return true;
}

namespace {

/* The next step of the back-off: no device command for it. Caller holds grow_mutex. */
uint64_t
backoff_step(mlx5_qpn_dev *d)
{
	uint64_t now = mlx5_qpn_clock_ns();
	d->backoff.step_ns = d->backoff.step_ns == 0 ?
				     kBackoffMinNs :
				     std::min(d->backoff.step_ns * 2, kBackoffMaxNs);
	d->backoff.until.store(now + d->backoff.step_ns, std::memory_order_release);
	return now;
}

/* A reservation reached the device and failed (rc). Caller holds grow_mutex. */
void
backoff_failed(mlx5_qpn_dev *d, int rc)
{
	uint64_t now = backoff_step(d);
	d->backoff.fail_streak++;
	if (d->backoff.quiet) {
		d->backoff.fail_logged = d->backoff.fail_streak;
	} else if (d->backoff.fail_streak == 1 || now >= d->backoff.warn_next_ns) {
		if (d->backoff.fail_streak == 1)
			DEV_LOG(WARNING,
				"%s: reserving QPNs from the device failed (%s); retrying with "
				"back-off from 1 ms up to 1 s",
				d->id.da.name, strerror(-rc));
		else
			DEV_LOG(WARNING,
				"%s: reserving QPNs still fails (%s): %" PRIu64 " failures "
				"since the last message, retrying every %" PRIu64 " ms",
				d->id.da.name, strerror(-rc),
				d->backoff.fail_streak - d->backoff.fail_logged,
				d->backoff.step_ns / 1000000);
		d->backoff.fail_logged = d->backoff.fail_streak;
		d->backoff.warn_next_ns = now + kBackoffWarnNs;
	}
}

/* A reservation succeeded. Caller holds grow_mutex. */
void
backoff_reset(mlx5_qpn_dev *d)
{
	if (d->backoff.fail_streak != 0 && !d->backoff.quiet)
		DEV_LOG(NOTICE, "%s: reserving QPNs works again after %" PRIu64 " failures",
			d->id.da.name, d->backoff.fail_streak);
	d->backoff.step_ns = 0;
	d->backoff.fail_streak = 0;
	d->backoff.fail_logged = 0;
	d->backoff.warn_next_ns = 0;
	d->backoff.until.store(0, std::memory_order_release);
}

/* Ranges (RESERVED_QPN objects): one of 2^log_range, smaller near the limit. A range that must
 * cool is held aside (it counts against the limit) and another one is asked for, a few times
 * at most. @return as take_block(), or a reservation error. */
int
grow_ranges(mlx5_qpn_dev *d)
{
	int rc = -ENOSPC;
	for (int attempt = 0; attempt < 4; attempt++) {
		uint64_t held = d->sup.held.load(rlx);
		uint64_t room = held < d->sup.limit ? d->sup.limit - held : 0;
		uint32_t log = d->sup.log_range;
		while (log > d->id.caps.log_reserved_qpn_granularity && (1ull << log) > room)
			log--;
		if ((1ull << log) > room) {
			rc = -ENOSPC;
			break;
		}
		mlx5_qpn_range_obj o = {};
		rc = d->sup.ops->reserve(d->id.ops, d->id.be, log, &o);
		if (rc != 0)
			break;
		d->sup.held.fetch_add(1ull << o.log_size, rlx);
		if (!d->sup.objs.push_back(o)) {
			release_obj(d, o); /* held, ranges_released */
			rc = -ENOMEM;
			break;
		}
		rc = take_block(d, o.first_qpn, o.log_size);
		if (rc < 0) {
			release_obj(d, o); /* held, ranges_released */
			d->sup.objs.pop_back();
			break;
		}
		d->cnt.ranges_reserved.fetch_add(1, rlx);
		d->cnt.qpns_reserved.fetch_add(1ull << o.log_size, rlx);
		if (rc == 0)
			break;
	}
	return rc;
}

} /* namespace */

/* Reserve one more range from the device into the pool. Caller holds grow_mutex. */
int
grow_locked(mlx5_qpn_dev *d)
{
	d->shrink.last_demand_ns = mlx5_qpn_clock_ns();
	if (promote_locked(d) > 0) {
		d->sup.grown.fetch_add(1, std::memory_order_release);
		return 0;
	}
	uint64_t held = d->sup.held.load(rlx);
	if (held >= d->sup.limit)
		return d->lease.cooling.empty() ? -ENOSPC : -EAGAIN;
	int rc;
	if (d->sup.ops->ranges) {
		rc = grow_ranges(d);
		if (rc != 0 && !d->lease.cooling.empty() &&
		    (rc == 1 || rc == -ENOSPC || rc == -ENOMEM)) {
			/* Nothing new for the pool now, but QPNs will come out of cooling: the
			 * caller waits for them (-EAGAIN), whether the limit or the device (out of
			 * QPNs: its others are held) stopped us. The device is not asked again
			 * before a back-off step; the cooling ranges come in meanwhile. */
			if (rc == -ENOMEM)
				backoff_step(d);
			d->sup.grown.fetch_add(1, std::memory_order_release);
			return -EAGAIN;
		}
	} else {
		uint64_t n = std::min<uint64_t>(1ull << d->sup.log_range, d->sup.limit - held);
		rc = grow_singles(d, static_cast<uint32_t>(n));
		if (rc == -EAGAIN)
			return rc; /* reserved, but cooling (grown already bumped) */
	}
	if (rc != 0) {
		d->cnt.reserve_failures.fetch_add(1, rlx);
		d->cnt.last_error.store(rc, rlx);
		backoff_failed(d, rc);
	} else {
		mlx5_qpn_mp_note_grow(d->proc.mp,
				      d->sup.grown.fetch_add(1, std::memory_order_release) + 1);
		backoff_reset(d);
	}
	return rc;
}

/* Reserve more unless another thread did since the caller saw `seen` (then just retry), or the
 * back-off after a failure is running (-EAGAIN: the caller returns the pool's error). */
int
grow(mlx5_qpn_dev *d, uint64_t seen)
{
	if (d->proc.secondary)
		return mlx5_qpn_mp_grow(d->proc.mp,
					0); /* the primary grows; its counter, not ours */
	if (backoff_running(d))
		return -EAGAIN; /* checked before the mutex too: waiting for it would be a stall */
	std::lock_guard<std::mutex> g(d->sup.grow_mutex);
	if (d->sup.grown.load(std::memory_order_acquire) != seen)
		return 0;
	if (backoff_running(d))
		return -EAGAIN;
	return grow_locked(d);
}

namespace {

/*
 * Give a range back to the device when the pool holds much more than it needs: at least two
 * ranges above the low-water mark (the hysteresis keeps it from fighting the growth below), and
 * not within a settle time of the last time the pool asked for more — the larger of 1 s and two
 * quarantines: under a long CM timewait most QPNs sit in quarantine and come back in bursts, so
 * the free count swings far above the mark between two growths, and a range given back would be
 * reserved again moments later. Only whole RESERVED_QPN objects, and only when all their QPNs are
 * free (the pool refuses otherwise, -EBUSY). Each removal attempt walks the pool's free list while
 * allocations that find the shared pool empty wait for it, so one attempt per call: newest range
 * first, and after a refusal the next older one on the next call. Caller holds grow_mutex.
 */
int
shrink_locked(mlx5_qpn_dev *d, uint64_t free_now)
{
	if (!d->sup.ops->ranges || d->sup.objs.size() < 2)
		return -ENOENT;
	uint64_t rsize = 1ull << d->sup.log_range;
	if (free_now < d->id.da.low_water + 2 * rsize)
		return -ENOENT;
	const uint64_t settle = std::max<uint64_t>(1000000000ull,
						   2 * d->id.da.quarantine_us * 1000);
	if (mlx5_qpn_clock_ns() - d->shrink.last_demand_ns < settle)
		return -EAGAIN;
	size_t n = d->sup.objs.size();
	size_t k = d->shrink.next < n && d->shrink.next > 0 ? d->shrink.next : n - 1;
	for (; k > 0; k--) /* the first range stays */
		if ((1ull << d->sup.objs[k].log_size) + d->id.da.low_water <= free_now)
			break;
	if (k == 0) {
		d->shrink.next = SIZE_MAX;
		return -ENOENT;
	}
	mlx5_qpn_range_obj o = d->sup.objs[k];
	if (mlx5_qpn_pool_range_remove(d->core.pool, o.first_qpn) != 0) {
		d->shrink.next = k - 1; /* 0: start again from the newest */
		return -EBUSY;
	}
	/* Wholly free and out of quarantine: it may go at once. */
	d->lease.file.drop(o.first_qpn, o.log_size);
	release_obj(d, o); /* held, ranges_released */
	d->sup.objs.erase(d->sup.objs.begin() + k);
	d->shrink.next = SIZE_MAX;
	return 0;
}

} /* namespace */

/* The control thread: reserve ahead of need so that the fast path rarely meets an empty pool,
 * and give ranges back when the pool holds far more than it uses. */
void *
ctrl_main(void *arg)
{
	auto *d = static_cast<mlx5_qpn_dev *>(arg);
	unsigned tick = 0;
	while (!d->ctrl.stop.load(std::memory_order_acquire)) {
		struct mlx5_qpn_pool_stats st;
		/* Expired quarantine counts as free: release it before judging the low-water mark. */
		mlx5_qpn_pool_drain(d->core.pool);
		mlx5_qpn_mp_tick(d->proc.mp, d->core.pool);
		if (mlx5_qpn_pool_stats_get(d->core.pool, &st) == 0) {
			std::unique_lock<std::mutex> g(d->sup.grow_mutex, std::try_to_lock);
			if (!g.owns_lock()) {
				/* someone else is talking to the device */
			} else if (promote_locked(d) > 0) {
				d->sup.grown.fetch_add(1, std::memory_order_release);
			} else if (st.free < d->id.da.low_water &&
				   d->sup.held.load(rlx) < d->sup.limit) {
				if (!backoff_running(d) && grow_locked(d) == 0)
					d->cnt.bg_reserves.fetch_add(1, rlx);
			} else if (++tick % 100 == 0) {
				/* A removal walks the free list once: at most every 100 ms. */
				shrink_locked(d, st.free);
			}
		}
		usleep(1000);
	}
	return nullptr;
}

} /* namespace mlx5_qpn_dev_impl */

using namespace mlx5_qpn_dev_impl;

extern "C" {

int
mlx5_qpn_dev_grow_if(struct mlx5_qpn_dev *d, uint64_t seen, int force, uint64_t *grown)
{
	std::lock_guard<std::mutex> g(d->sup.grow_mutex);
	int rc = 0;
	if (!force && backoff_running(d))
		rc = -EAGAIN; /* as the primary's own allocation path: no device command meanwhile */
	else if (force || d->sup.grown.load(std::memory_order_acquire) == seen) {
		rc = grow_locked(d);
		rc = rc == 0 ? 1 : rc;
	}
	if (rc == 1)
		d->cnt.sync_reserves.fetch_add(1, rlx);
	*grown = d->sup.grown.load(std::memory_order_acquire);
	return rc;
}

int
mlx5_qpn_dev_grow(struct mlx5_qpn_dev *d)
{
	if (d == nullptr)
		return -EINVAL;
	if (d->proc.secondary)
		return mlx5_qpn_mp_grow(d->proc.mp, 1);
	std::lock_guard<std::mutex> g(d->sup.grow_mutex);
	return grow_locked(d);
}

} /* extern "C" */
