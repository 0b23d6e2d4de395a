/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_MP_H
#define MLX5_QPN_MP_H

/*
 * Internal: DPDK multi-process support of the mlx5_qpn driver (primary and secondary processes
 * of one DPDK instance, as DPDK's mlx5 PMD has them). Not installed. doc/guides/driver.md §15
 * states the contract; in short:
 *
 *  - The primary probes the device as always and publishes a small *device info* memzone
 *    ("qpn_mp_<dev>"): its process identity (qpn::shm::ProcId: pid + start time), the devargs it
 *    probed with, the pool's name and what the reservation path decided (caps, source, range size,
 *    limit). It registers one IPC action, MLX5_QPN_MP_ACTION, for all its devices.
 *  - A secondary's probe attaches: it finds the info memzone, checks the primary is alive and
 *    that every devarg it gave agrees with the primary's, looks the pool up by name and opens its
 *    own backend handle (the data path needs one). It never reserves ranges: the device objects
 *    belong to the process that creates them, and the kernel destroys a dead process's objects,
 *    so ranges of a secondary in the shared pool would vanish with it.
 *  - A secondary whose pool is dry asks the primary to grow it (rte_mp_request_sync, bounded
 *    wait); the primary's handler runs the ordinary grow path.
 *  - Each slow path of a secondary (and its probe) first checks the primary's liveness: a dead
 *    primary makes them fail with -ENODEV and one log line.
 *  - Dead processes' caches and QPNs are reclaimed by the pool (mlx5_qpn_pool_reclaim_dead()):
 *    the primary's control thread (every 50 ms) and IPC handler, and secondaries' slow paths,
 *    call it.
 *
 * Lock order: the handler holds the process-local registry mutex of this file, then the device's
 * grow mutex (inside mlx5_qpn_dev_grow_if()). Nothing that holds a grow mutex takes the registry
 * mutex (mlx5_qpn_mp_note_grow() is a single atomic store).
 */

#include <cstdint>

#include "mlx5_qpn.h"
#include "mlx5_qpn_devargs.h"
#include "mlx5_qpn_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The IPC action name the primary registers (one for all devices of the process). */
#define MLX5_QPN_MP_ACTION "mlx5_qpn_mp"

/** Longest time a secondary waits for the primary's answer to a grow request. */
#define MLX5_QPN_MP_TIMEOUT_MS 5000

struct mlx5_qpn_mp; /* process-local attachment to one device's info memzone */

/** What the primary decided at probe and a secondary must use as it is. */
struct mlx5_qpn_mp_devinfo {
	struct mlx5_qpn_caps caps;
	uint32_t source; /* enum mlx5_qpn_source */
	uint32_t log_range;
	uint64_t limit;
	int32_t numa_node;
	char cores[128];
	char pool_name[MLX5_QPN_POOL_NAMESIZE + 1];
};

/* ---- primary ------------------------------------------------------------------------------- */

/**
 * Publish a probed device for secondaries: create its info memzone and register the IPC action.
 * Called at the end of a primary's probe. A process where DPDK IPC is off (--no-huge, --in-memory,
 * --no-shconf) still publishes; no secondary can exist there.
 * @return 0; -EEXIST another device of this process has the same (truncated) memzone name;
 *         -ENOMEM; -E2BIG devargs longer than the info memzone holds.
 */
int mlx5_qpn_mp_publish(struct mlx5_qpn_dev *dev, const char *name, const char *devargs,
			const struct mlx5_qpn_mp_devinfo *di, struct mlx5_qpn_mp **out);

/** The primary grew the pool: mirror its grow counter into the info memzone (lock-free). */
void mlx5_qpn_mp_note_grow(struct mlx5_qpn_mp *mp, uint64_t grown);

/** Control-thread tick of the primary: reclaims dead processes' QPNs every 50 ms. NULL ok. */
void mlx5_qpn_mp_tick(struct mlx5_qpn_mp *mp, struct mlx5_qpn_pool *pool);

/* ---- secondary ----------------------------------------------------------------------------- */

/**
 * Attach to the device the primary probed.
 * @param da          the secondary's parsed devargs (its name finds the device).
 * @param devargs     the secondary's devargs string (its keys are checked against the primary's).
 * @param[out] pda    the primary's parsed devargs: the device as it is.
 * @param[out] di     what the primary decided.
 * @param[out] pool   the shared pool.
 * @return 0; -ENODEV no primary has probed the device, or the primary is dead; -EINVAL a devarg
 *         differs from the primary's (one line names it); -EPROTO the info memzone is not ours.
 */
int mlx5_qpn_mp_attach(const struct mlx5_qpn_devargs *da, const char *devargs,
		       struct mlx5_qpn_devargs *pda, struct mlx5_qpn_mp_devinfo *di,
		       struct mlx5_qpn_pool **pool, struct mlx5_qpn_mp **out);

/**
 * A secondary's slow path: reclaim dead processes' QPNs and ask the primary to grow the pool.
 * Without `force`, the primary grows only if it has not grown since the caller's last look
 * (another process's growth answers this request too: retry the pool).
 * @return 0 (retry the pool); -ENODEV the primary is dead or gone; -ETIMEDOUT no answer;
 *         the primary's grow error (-ENOSPC ...).
 */
int mlx5_qpn_mp_grow(struct mlx5_qpn_mp *mp, int force);

/** -ENODEV (logged once) if the device's primary is dead or closed the device, else 0. */
int mlx5_qpn_mp_check_primary(struct mlx5_qpn_mp *mp);

/* ---- both ---------------------------------------------------------------------------------- */

/** Counters of the attachment (all may be NULL). */
void mlx5_qpn_mp_counters(const struct mlx5_qpn_mp *mp, uint64_t *grow_requests,
			  uint64_t *ipc_grows, uint64_t *dead_reclaimed, int32_t *primary_pid);

/**
 * Primary: unregister the device from the IPC handler (waits for a running request), mark the
 * info memzone closed and free it; logs a warning if live secondaries are attached.
 * Secondary: detach. NULL is ignored.
 */
void mlx5_qpn_mp_close(struct mlx5_qpn_mp *mp);

/* ---- implemented by the generic layer (mlx5_qpn_dev.cpp) for the IPC handler ----------------- */

/**
 * Grow a primary's pool by one range unless it grew since `seen`; `force` grows anyway.
 * *grown gets the grow counter afterwards.
 * @return 1 grown; 0 not needed (it grew since `seen`); a negative grow error.
 */
int mlx5_qpn_dev_grow_if(struct mlx5_qpn_dev *dev, uint64_t seen, int force, uint64_t *grown);

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_MP_H */
