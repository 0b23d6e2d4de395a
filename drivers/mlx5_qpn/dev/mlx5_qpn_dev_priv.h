/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_DEV_PRIV_H
#define MLX5_QPN_DEV_PRIV_H

/*
 * Internal to the generic driver layer: the device struct and what its files share.
 *
 * The files, one concern each:
 *  - mlx5_qpn_probe.cpp     probe (primary and secondary), the choice of the QPN supply, close;
 *  - mlx5_qpn_supply.cpp    the three QPN supplies (RESERVED_QPN objects, single QPNs, ordinary
 *                           QPs) behind struct mlx5_qpn_supply_ops;
 *  - mlx5_qpn_grow.cpp      feeding the pool from the supply: growth, back-off, the lease and
 *                           its cooling ranges (invariant 5), shrinking, the control thread;
 *  - mlx5_qpn_registry.cpp  the registry of probed devices, queries by name;
 *  - mlx5_qpn_dev.cpp       the public reserved-QPN API, info, stats and dump;
 *  - mlx5_qpn_backend.cpp   the registry of backends (mlx5_qpn_backend.h);
 *  - mlx5_qpn_devargs.cpp   devargs (generic keys; a backend's own through its descriptor),
 *                           in bounded buffers; its text helpers (quoting) in mlx5_qpn_text.h.
 *
 * Invariant 5 (a QPN let go by a process that closed, crashed or was killed is not handed out
 * by anyone before its quarantine has passed) is kept through the per-device lease file
 * (lease/mlx5_qpn_lease.h), for every backend: each range the device gives is recorded there
 * before it feeds the pool, and one that overlaps a cooling entry is held aside ("cooling")
 * until the entry's time has passed; at close the ranges turn cooling in the lease before they
 * go back to the device.
 */
#include <atomic>
#include <mutex>

#include <pthread.h>

#include "mlx5_qpn_vec.h"
#include "mlx5_qpn.h"
#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_dev_log.h"
#include "mlx5_qpn_devargs.h"
#include "mlx5_qpn_ops.h"
#include "mlx5_qpn_lease.h"

struct mlx5_qpn_mp;

/*
 * Where QPNs come from, chosen once at probe (choose_source()): one implementation per source,
 * so that growing, shrinking and closing never ask which one it is.
 */
struct mlx5_qpn_supply_ops {
	const char *name;            /* in logs and dumps */
	enum mlx5_qpn_source source; /* what mlx5_qpn_dev_info.source reports */
	/* 1: reserve() gives aligned ranges of 2^log QPNs, one device object each, that may go
	 * back whole (shrink, close); 0: it gives one QPN per object, log is ignored. */
	int ranges;
	/* One device object: a range of 2^log QPNs, or one QPN. */
	int (*reserve)(const struct mlx5_qpn_dev_ops *ops, struct mlx5_qpn_backend *be,
		       uint32_t log, struct mlx5_qpn_range_obj *obj);
	/* Give one device object back. */
	int (*release)(const struct mlx5_qpn_dev_ops *ops, struct mlx5_qpn_backend *be,
		       const struct mlx5_qpn_range_obj *obj);
};

/* The supply of that source (mlx5_qpn_supply.cpp); never NULL for a valid source. */
const struct mlx5_qpn_supply_ops *mlx5_qpn_supply_of(enum mlx5_qpn_source source);

/*
 * The device, in the parts it holds. Each part is written by one concern (the file in
 * brackets) and read by the others:
 *  - id      what the device is: devargs, backend, capabilities, locality (probe; read-only
 *            after);
 *  - core    the pool, where the inline calls of mlx5_qpn.h find it (probe);
 *  - sup     where its QPNs come from and what it holds: the supply, the device objects,
 *            under grow_mutex (probe, grow);
 *  - cnt     the counters mlx5_qpn_dev_stats reports (grow, supply);
 *  - backoff the back-off after failed reservations (grow);
 *  - shrink  giving ranges back when the pool holds far more than it uses (grow);
 *  - ctrl    the control thread (probe starts and joins it, grow runs it);
 *  - proc    the multi-process side (probe; mlx5_qpn_mp.cpp);
 *  - lease   invariant 5 across processes: the lease file and the ranges cooling (grow, probe).
 */
namespace mlx5_qpn_dev_impl {

struct Identity {
	struct mlx5_qpn_devargs da;
	const struct mlx5_qpn_backend_desc *backend = nullptr; /* = da.backend */
	const struct mlx5_qpn_dev_ops *ops = nullptr;
	struct mlx5_qpn_backend *be = nullptr;
	struct mlx5_qpn_caps caps = {};
	int numa_node = -1;
	char cores[128] = {};
};

/* Everything that talks to the device (the backend's ops) runs under grow_mutex, which the
 * allocation fast path (the pool) never takes. */
struct Supply {
	const struct mlx5_qpn_supply_ops *ops = nullptr;
	uint32_t log_range = 0;
	uint64_t limit = 0; /* most QPNs we may hold from the device */
	/* the pool is mlx5_qpn_dev::core.pool, where the inline calls of mlx5_qpn.h read it */
	char pool_name[MLX5_QPN_POOL_NAMESIZE + 1] = {};
	std::mutex grow_mutex;
	NtVec<mlx5_qpn_range_obj> objs; /* under grow_mutex */
	std::atomic<uint64_t> held{0};  /* QPNs reserved from the device now */
	std::atomic<uint64_t> grown{
		0}; /* successful reservations: lets a waiter see it lost a race */
};

struct Counters {
	std::atomic<uint64_t> ranges_reserved{0}, ranges_released{0}, qpns_reserved{0};
	std::atomic<uint64_t> reserve_failures{0}, sync_reserves{0}, bg_reserves{0};
	std::atomic<uint64_t> fw_qpn_allocs{0}, fw_qpn_frees{0};
	std::atomic<int> last_error{0};
};

/* Back-off after a failed reservation (see backoff_failed()): no device command before `until`
 * (mlx5_qpn_clock_ns()); read without the mutex by the allocation path. */
struct Backoff {
	std::atomic<uint64_t> until{0};
	std::atomic<uint64_t> skips{0};
	uint64_t step_ns = 0;      /* current step, 0: not backing off (grow_mutex) */
	uint64_t fail_streak = 0;  /* failed reservations in a row (grow_mutex) */
	uint64_t fail_logged = 0;  /* fail_streak at the last warning (grow_mutex) */
	uint64_t warn_next_ns = 0; /* no warning before this (grow_mutex) */
	/* Probe's trial reservations (choose_source()): a source that fails is left for the next
	 * one, so its failure starts no streak warning and its end no "works again" line; the
	 * probe's own line says what happened (driver.md §4). grow_mutex. */
	bool quiet = false;
};

/* Shrinking (shrink_locked()): the last time the pool asked for more (no range goes back within
 * a settle time of it) and the next range to try (one walk of the free list per attempt, so at
 * most one per attempt). grow_mutex. */
struct Shrink {
	uint64_t last_demand_ns = 0;
	size_t next = SIZE_MAX;
};

struct Ctrl {
	std::atomic<bool> stop{false};
	pthread_t thread{};
	bool running = false;
};

struct Proc {
	struct mlx5_qpn_mp *mp = nullptr; /* multi-process: mlx5_qpn_mp.cpp */
	bool secondary = false;           /* attached to a primary's device: never reserves */
};

/* Invariant 5 across processes. Under grow_mutex. */
struct LeaseState {
	qpn::lease::Lease file;
	struct Cooling {
		uint32_t first, count; /* QPNs the device gave us that may not feed the pool yet */
		uint64_t until_ns;     /* when to look at the lease again */
	};
	NtVec<Cooling> cooling;
	std::atomic<uint64_t> cooling_qpns{0}, cooled_ranges{0}, errors{0};
};

} /* namespace mlx5_qpn_dev_impl */

struct mlx5_qpn_dev {
	/* First, at offset 0: the inline mlx5_qpn_reserved_alloc()/_dealloc() of mlx5_qpn.h read
	 * the pool through a cast of the handle (ABI; tests/dev checks the offset). Set by probe. */
	struct mlx5_qpn_dev_core core = {};
	struct mlx5_qpn_dev *reg_next = nullptr; /* the registry's list (mlx5_qpn_registry.cpp) */
	mlx5_qpn_dev_impl::Identity id;
	mlx5_qpn_dev_impl::Supply sup;
	mlx5_qpn_dev_impl::Counters cnt;
	mlx5_qpn_dev_impl::Backoff backoff;
	mlx5_qpn_dev_impl::Shrink shrink;
	mlx5_qpn_dev_impl::Ctrl ctrl;
	mlx5_qpn_dev_impl::Proc proc;
	mlx5_qpn_dev_impl::LeaseState lease;
};

namespace mlx5_qpn_dev_impl {

constexpr auto rlx = std::memory_order_relaxed;

/* ---- mlx5_qpn_grow.cpp ---- */

/* Give one device object back through the supply (counts it). Caller holds grow_mutex. */
void release_obj(mlx5_qpn_dev *d, const mlx5_qpn_range_obj &o);
void lease_error(mlx5_qpn_dev *d, int rc, const char *what);
/* Move ranges whose cooling is over into the pool. @return how many. Caller holds grow_mutex. */
int promote_locked(mlx5_qpn_dev *d);
/* Reserve one more range from the device into the pool. Caller holds grow_mutex. */
int grow_locked(mlx5_qpn_dev *d);
/* Reserve more unless another thread did since the caller saw `seen`, or the back-off runs. */
int grow(mlx5_qpn_dev *d, uint64_t seen);
/* Whether the back-off forbids a device command now (counts the skip). */
bool backoff_running(mlx5_qpn_dev *d);
/* The control thread's body (arg: the device). */
void *ctrl_main(void *arg);

/* ---- mlx5_qpn_registry.cpp ---- */

/* Add a probed device (its name was checked free with registry_has() at the start of probe). */
void registry_add(mlx5_qpn_dev *d);
/* Whether a device of that name is probed. */
bool registry_has(const char *name);
/* Remove d. @return false if it was not there. */
bool registry_remove(mlx5_qpn_dev *d);

} /* namespace mlx5_qpn_dev_impl */

#endif /* MLX5_QPN_DEV_PRIV_H */
