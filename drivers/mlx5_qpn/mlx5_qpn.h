/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_H
#define MLX5_QPN_H

/**
 * @file
 * mlx5_qpn driver: reserved QP numbers of an mlx5 device, handed out lock-free.
 *
 * The calls mirror rdma-core's mlx5dv_reserved_qpn_alloc()/mlx5dv_reserved_qpn_dealloc() on a
 * device handle, with DPDK conventions (negative errno) and bulk variants. Behind them, a
 * lock-free pool (mlx5_qpn_pool.h) with per-thread caches and a timewait quarantine is fed with
 * ranges that the driver reserves from the device as RESERVED_QPN objects. Firmware commands run
 * outside every lock of the fast path: a control thread reserves ahead of need when the pool's
 * free count falls under the low-water mark, and an allocation that finds the pool empty
 * reserves synchronously (serialised by a per-device mutex that the fast path never takes).
 *
 * Devices are probed from devargs: "sim0,..." for the emulated device (the default everywhere
 * without a ConnectX) or "ib=mlx5_0,..." for hardware through rdma-core. See
 * doc/guides/driver.md for the keys.
 *
 * Thread safety: alloc/dealloc/stats may be called from any thread concurrently; probe and close
 * of one device must not race with each other or with other calls on that device.
 *
 * Multi-process (doc/guides/driver.md §15): in a DPDK secondary process, mlx5_qpn_dev_probe()
 * attaches to the device its primary probed and shares the primary's pool. A secondary never
 * reserves from the device: when its pool is dry it asks the primary (DPDK IPC) to grow it. Its
 * devargs must agree with the primary's (a bare name always does). When the primary dies, the
 * secondary's slow paths (probe, an allocation that finds the pool empty, grow) fail with
 * -ENODEV and one log line; until it meets one, its fast path may still hand out QPNs already in
 * the pool. The primary must close the device last.
 *
 * Names, in every public header: mlx5_qpn_<object>_<verb>. A lookup by name is _lookup
 * (mlx5_qpn_dev_lookup(), mlx5_qpn_pool_lookup()); a getter that fills a struct is _get and
 * returns 0 or a negative errno (mlx5_qpn_dev_info_get()); a getter of one value is named for
 * the value and returns it (mlx5_qpn_dev_pool()). A renamed call keeps its old name for the
 * rest of its ABI as an exported alias marked MLX5_QPN_DEPRECATED.
 */

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "mlx5_qpn_pool.h"

/* Marks a public name kept for one ABI as an alias of its successor: a call compiles, with a
 * warning that names the successor. */
#if defined(__GNUC__) || defined(__clang__)
#define MLX5_QPN_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define MLX5_QPN_DEPRECATED(msg)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque device handle (process-local). */
struct mlx5_qpn_dev;

/** Where the QPNs come from. */
enum mlx5_qpn_source {
	MLX5_QPN_SRC_OBJECTS = 0, /**< RESERVED_QPN general objects (DEVX), ranges of 2^g. */
	MLX5_QPN_SRC_SINGLE,      /**< mlx5dv_reserved_qpn_alloc() one QPN at a time. */
	MLX5_QPN_SRC_ORDINARY, /**< Ordinary QP numbers (reserved_qpn=try without support, or no). */
};

/**
 * mlx5_qpn_dev_info.flags: the device is emulated (the embedded mlx5 model, "simN"). Its
 * connections run over the emulated CM fabric between processes of this host, not over a
 * network, and its QPNs exist only in the emulated device. Test this rather than comparing
 * mlx5_qpn_dev_info.backend with a backend's name.
 */
#define MLX5_QPN_DEV_F_EMULATED (1u << 0)

/** Device information. */
struct mlx5_qpn_dev_info {
	char name[32];                        /**< "sim0", "mlx5_0". */
	const char *backend;                  /**< The backend's registered name: "sim" or "hw". */
	uint64_t node_guid;                   /**< Node GUID (host order). */
	enum mlx5_qpn_source source;          /**< How QPNs are reserved. */
	uint8_t reserved_qpn_cap;             /**< general_obj_types bit 44. */
	uint8_t log_reserved_qpn_granularity; /**< Smallest RESERVED_QPN object: 2^g QPNs. */
	uint8_t log_reserved_qpn_max_alloc;   /**< Largest RESERVED_QPN object: 2^m QPNs. */
	uint8_t log_max_num_reserved_qpn;     /**< Most reserved QPNs in total: 2^n. */
	uint32_t log_range;                   /**< log2 QPNs per reservation used. */
	uint32_t max_qpns;                    /**< Most QPNs the pool may hold. */
	uint64_t quarantine_us;               /**< Quarantine of released QPNs. */
	int numa_node;                        /**< Device's NUMA node, -1 if unknown. */
	char cores[128];       /**< Cores near the device, hwloc list syntax ("0-3"). */
	const char *pool_name; /**< The pool behind the device (mlx5_qpn_pool_lookup()). */
	int secondary;         /**< 1: this handle is a secondary process's attachment. */
	int32_t primary_pid;   /**< pid of the primary that probed the device (0: none
					     published, e.g. DPDK IPC off). */
	uint32_t flags;        /**< MLX5_QPN_DEV_F_* of the device's backend. */
	/**
	 * The 1-based physical port this handle serves: its DC objects and address handles use
	 * it, and on a multi-port ConnectX each port has its own GUID and QPN space, so a
	 * connection manager must route through this port (qpn-testpmd refuses a cm_id on
	 * another). The emulated device: 1. Hardware: the port the probe queried.
	 */
	uint8_t port;
};

/** Device counters (the pool's are in the pool's stats). */
struct mlx5_qpn_dev_stats {
	struct mlx5_qpn_pool_stats pool; /**< The pool's counters. */
	uint64_t ranges_reserved;        /**< Reservations that succeeded. */
	uint64_t ranges_released;        /**< Ranges returned to the device. */
	uint64_t qpns_reserved;          /**< QPNs reserved from the device, in total. */
	uint64_t reserve_failures;       /**< Reservations the device refused. */
	uint64_t sync_reserves; /**< Reservations made on the allocation path (pool empty). */
	uint64_t bg_reserves;   /**< Reservations made ahead of need by the control thread. */
	int last_error;         /**< Last reservation error (negative errno), 0 if none. */
	/**
	 * Reservations not attempted because the back-off after a failed one was running: after a
	 * failure the driver sends the device no reservation for 1 ms, doubling per further
	 * failure up to 1 s, until one succeeds. Meanwhile mlx5_qpn_reserved_alloc() returns the
	 * pool's -ENOSPC/-EAGAIN at once, and the control thread waits.
	 */
	uint64_t backoff_skips;
	uint64_t cooling_qpns;      /**< QPNs the device gave that the lease file keeps out of
					      the pool now: let go by a process (closed, crashed or
					      killed) less than a quarantine ago (invariant 5). */
	uint64_t cooled_ranges;     /**< Such ranges that went into the pool once cool. */
	uint64_t lease_errors;      /**< Lease file operations that failed (a range that could
					      not be recorded is given back to the device). */
	uint64_t mp_grow_requests;  /**< Grow requests: sent (secondary), handled (primary). */
	uint64_t mp_ipc_grows;      /**< Ranges the primary reserved for secondaries' requests. */
	uint64_t mp_dead_reclaimed; /**< QPNs of dead processes that the driver's calls of
					      mlx5_qpn_pool_reclaim_dead() recovered (any process
					      of the device; the pool also recovers on its own). */
	uint64_t fw_qpn_allocs;     /**< QPNs mlx5_qpn_dev_fw_qpn_alloc() handed out. */
	uint64_t fw_qpn_frees;      /**< QPNs mlx5_qpn_dev_fw_qpn_free() took back. */
	/**
	 * Commands the device executed, every opener's and every kind (reservations, QPs, DC
	 * objects, UARs), where the backend counts them (the emulated device); 0 on hardware. A
	 * difference over an interval tells the commands of that interval.
	 */
	uint64_t dev_commands;
};

/**
 * Probe a device from devargs and reserve its first range; in a DPDK secondary process, attach
 * to the device the primary probed (no reservation).
 *
 * @param devargs  "sim0[,key=value...]" or "ib=mlx5_0[,key=value...]", at most 1023 characters
 *                 (longer: -EINVAL). Parsing allocates nothing.
 * @param[out] dev the device.
 * @return 0; -EINVAL bad devargs (one log line names the key), or in a secondary a devarg that
 *         differs from the primary's; -EEXIST already probed; -EPERM called before
 *         rte_eal_init() (one log line: "EAL not initialised");
 *         -ENODEV (secondary) no primary has probed the device, or the primary is dead;
 *         -ENODEV no such device (one log line, e.g. `no RDMA device "mlx5_0" (0 devices found)`);
 *         -EOPNOTSUPP no reserved-QPN support with reserved_qpn=yes; -ENOMEM (out of memory, or
 *         the device out of reserved QPNs at the trial reservation: try again later; the probe
 *         does not fall back to another source for it); other device errors.
 */
int mlx5_qpn_dev_probe(const char *devargs, struct mlx5_qpn_dev **dev);

/**
 * Check devargs as mlx5_qpn_dev_probe() would, without touching a device: the same grammar,
 * backends, keys, ranges and cross-key rules (checks that need the device's capabilities, such
 * as log_range against its granularity, are made at probe). Nothing is logged: the reason is
 * given to the caller, so that a tool can print it as its own one line.
 *
 * @param devargs  as for mlx5_qpn_dev_probe().
 * @param[out] why if not NULL and len > 0: on -EINVAL the reason, e.g.
 *                 `bad devarg cache=0: out of range [1, 65536]` (truncated to len); "" on 0.
 * @param len      size of why.
 * @return 0 valid; -EINVAL refused.
 * Thread safety: any thread, concurrently.
 */
int mlx5_qpn_devargs_check(const char *devargs, char *why, size_t len);

/** Bytes that always hold devargs with their NUL (the longest devargs a probe takes: 1023). */
#define MLX5_QPN_DEVARGS_SIZE 1024
/** Bytes that always hold a device name with its NUL (struct mlx5_qpn_dev_info::name). */
#define MLX5_QPN_NAME_SIZE 32

/**
 * The devargs and the device name of a DPDK vdev of this driver: what the driver probes when the
 * EAL hands it the vdev (--vdev=VDEV_NAME,ARGS, or rte_dev_probe()), so that an application finds
 * the device the EAL probed for it (mlx5_qpn_dev_lookup(name)) and can probe it again with
 * other devargs (hot-plug):
 *
 *     "mlx5_qpn_sim7", "quarantine_us=5000"  ->  "sim7,quarantine_us=5000", device "sim7"
 *     "mlx5_qpn0", "ib=mlx5_0,cache=64"       ->  "ib=mlx5_0,cache=64", device "mlx5_0"
 *
 * A vdev name is "mlx5_qpn" and a suffix: one that a backend takes as a device name ("sim7",
 * or "_sim7") is the device; any other only tells vdevs apart, and the args name the device
 * (ib=). Nothing is logged and no device is touched.
 *
 * @param vdev_name  the vdev's name (rte_dev_name()).
 * @param args       the vdev's args (struct rte_devargs::args); NULL or "" for none.
 * @param[out] devargs  if not NULL: the devargs, NUL-terminated (MLX5_QPN_DEVARGS_SIZE bytes
 *                      always suffice).
 * @param size       bytes at devargs.
 * @param[out] name  if not NULL: the device's name, NUL-terminated (MLX5_QPN_NAME_SIZE bytes
 *                   always suffice).
 * @param name_size  bytes at name.
 * @return 0; -EINVAL a NULL vdev_name, a name that is not this driver's, or devargs that name no
 *         device or that mlx5_qpn_devargs_check() refuses (it gives the reason); -E2BIG the
 *         devargs or the name longer than their buffer (nothing written).
 * Thread safety: any thread, concurrently.
 */
int mlx5_qpn_vdev_devargs(const char *vdev_name, const char *args, char *devargs, size_t size,
			  char *name, size_t name_size);

/**
 * Remove the state that crashed processes left behind for a device name, so that the next probe
 * starts afresh: the device's lease file (keyed by its node GUID: the quarantine of the QPNs
 * its processes let go) and, for the emulated device, its shared-memory segment. A process that
 * closed cleanly leaves neither; one killed may leave both. A hardware device keeps nothing
 * else (the kernel destroys a dead process's objects): its name is resolved to its node GUID
 * through rdma-core (ibv_get_device_list, ibv_get_device_guid; no context is opened). The
 * state is shared by every process that opens the name, so the purge is refused while a live
 * process has the device open (the emulated device's owner table or the lease file's users
 * show one): a fresh device would hand out again QPNs that process holds (invariant 1).
 *
 * @param name  a device name as in devargs: "sim0", "mlx5_0" or "ib=mlx5_0".
 * @return 0 removed; -ENOENT nothing left for that name; -EBUSY the device is probed in this
 *         process (close it first), or a live process has it open (one ERR line names its
 *         pid; the lease file is kept); -EINVAL NULL, empty or malformed name; -ENODEV no backend
 *         takes that name, or no RDMA device has it (or rdma-core is unavailable), and nothing
 *         is removed; -ENOTSUP the RDMA device of that name is not an mlx5 device.
 * Thread safety: must not race a probe or close of the same name.
 */
int mlx5_qpn_dev_purge(const char *name);

/**
 * Find a probed device by name (as mlx5_qpn_pool_lookup() finds a pool).
 *
 * @param name  the device's name as probed ("sim0", "mlx5_0").
 * @return the device; NULL if none of that name is probed in this process (or name is NULL).
 * Thread safety: any thread; the device stays valid until it is closed.
 */
struct mlx5_qpn_dev *mlx5_qpn_dev_lookup(const char *name);

/**
 * Deprecated name of mlx5_qpn_dev_lookup(), kept exported (the same function) for applications
 * built against the 2.0 ABI; it leaves with the next ABI number.
 */
struct mlx5_qpn_dev *mlx5_qpn_dev_get(const char *name)
	MLX5_QPN_DEPRECATED("use mlx5_qpn_dev_lookup()");

/**
 * Close a device: stops its control thread, frees its pool and returns every range to the device.
 * QPNs still allocated are forgotten. NULL is ignored.
 */
void mlx5_qpn_dev_close(struct mlx5_qpn_dev *dev);

/**
 * @internal The first bytes of every device handle: what the inline mlx5_qpn_reserved_alloc()
 * and mlx5_qpn_reserved_dealloc() read. As with mlx5_qpn_pool_core.h, an application compiled
 * against this header has the layout built into its code: a change is an ABI break. Do not use
 * it: everything else of a device stays private to the library.
 */
struct mlx5_qpn_dev_core {
	struct mlx5_qpn_pool *pool; /**< the device's pool, set at probe, never changed */
};

/** @internal The out-of-line part of the inline mlx5_qpn_reserved_alloc(): an allocation the
 *  pool could not serve (NULL arguments, pool empty or quarantined, whence the device is asked
 *  for more). Same contract as mlx5_qpn_reserved_alloc(). */
int mlx5_qpn_reserved_alloc_slow(struct mlx5_qpn_dev *dev, uint32_t *qpn);

/*
 * The calls below are inline (as rte_mempool_get()): a pool hit costs what the pool's inline
 * call costs, with no call into the library. Define MLX5_QPN_NO_INLINE before including this
 * header to call the exported functions of the same names and contracts instead (the library
 * defines them so: an application built against an older header calls them).
 */
#ifdef MLX5_QPN_NO_INLINE

/**
 * Allocate one reserved QPN (mlx5dv_reserved_qpn_alloc()).
 *
 * @return 0; -EAGAIN all free QPNs are in quarantine and the device gives no more;
 *         -ENOSPC none left and the device gives no more; -EOPNOTSUPP no support; -EINVAL;
 *         -ENODEV (secondary) the pool is empty and the primary is gone.
 */
int mlx5_qpn_reserved_alloc(struct mlx5_qpn_dev *dev, uint32_t *qpn);

/**
 * Release a reserved QPN into quarantine (mlx5dv_reserved_qpn_dealloc()).
 *
 * @return 0; -EINVAL if it is not an allocated QPN of this device (nothing changes).
 */
int mlx5_qpn_reserved_dealloc(struct mlx5_qpn_dev *dev, uint32_t qpn);

#else /* !MLX5_QPN_NO_INLINE */

/**
 * Allocate one reserved QPN (mlx5dv_reserved_qpn_alloc()).
 *
 * Inline: the pool's inline mlx5_qpn_pool_alloc() on the device's pool; anything it does not
 * serve goes to mlx5_qpn_reserved_alloc_slow(), which reserves from the device.
 *
 * @return 0; -EAGAIN all free QPNs are in quarantine and the device gives no more;
 *         -ENOSPC none left and the device gives no more; -EOPNOTSUPP no support; -EINVAL;
 *         -ENODEV (secondary) the pool is empty and the primary is gone.
 */
static inline __attribute__((always_inline)) int
mlx5_qpn_reserved_alloc(struct mlx5_qpn_dev *dev, uint32_t *qpn)
{
	if (__builtin_expect(dev != NULL, 1) &&
	    __builtin_expect(mlx5_qpn_pool_alloc(((struct mlx5_qpn_dev_core *)dev)->pool, qpn) == 0,
			     1))
		return 0;
	return mlx5_qpn_reserved_alloc_slow(dev, qpn);
}

/**
 * Release a reserved QPN into quarantine (mlx5dv_reserved_qpn_dealloc()).
 *
 * Inline: the pool's inline mlx5_qpn_pool_free() on the device's pool, whose contract it has:
 * a double free is refused at the call, from any thread (but for two frees in flight at once).
 *
 * @return 0; -EINVAL if it is not an allocated QPN of this device, freed already included
 *         (nothing changes).
 */
static inline __attribute__((always_inline)) int
mlx5_qpn_reserved_dealloc(struct mlx5_qpn_dev *dev, uint32_t qpn)
{
	if (__builtin_expect(dev == NULL, 0))
		return -EINVAL;
	return mlx5_qpn_pool_free(((struct mlx5_qpn_dev_core *)dev)->pool, qpn);
}

#endif /* MLX5_QPN_NO_INLINE */

/** Allocate n QPNs, all or none. Errors as mlx5_qpn_reserved_alloc(). */
int mlx5_qpn_reserved_alloc_bulk(struct mlx5_qpn_dev *dev, uint32_t *qpns, unsigned int n);

/** Release n QPNs; the valid ones are released. @return 0, or -EINVAL if any was refused. */
int mlx5_qpn_reserved_dealloc_bulk(struct mlx5_qpn_dev *dev, const uint32_t *qpns, unsigned int n);

/**
 * Allocate one reserved QPN from the device's own one-QPN allocator, without the pool: on
 * hardware rdma-core's mlx5dv_reserved_qpn_alloc() itself, on the emulated device the same
 * algorithm (one mutex per device context; a forward-only cursor in the newest RESERVED_QPN
 * block of 2^log_reserved_qpn_granularity QPNs; a new block made by a CREATE_GENERAL_OBJECT
 * command when the newest one is used up). Every call takes the context's mutex; the calls that
 * need a block wait for the device command under it. There is no quarantine and no per-thread
 * cache: a QPN freed here can come back from the device, to this or another process, as soon as
 * its block is destroyed, whatever the peers' CM timewait (the comparison qpn-testpmd's
 * --allocator=rdma-core runs, doc/guides/app_reference.md §7). Such a QPN is not the pool's:
 * mlx5_qpn_reserved_dealloc() refuses it, and closing the device returns it.
 *
 * @param dev  a probed device (a secondary's handle is a context of its own, with its own
 *             blocks).
 * @param[out] qpn  the QPN.
 * @return 0; -EOPNOTSUPP the device has no such API (no RESERVED_QPN object type, no DEVX); -ENOMEM, or the device's refusal of a new block
 *         (-ENOMEM when its reserved-QPN space is full, else as mlx5dv maps firmware errors);
 *         -EINVAL NULL arguments.
 * Thread safety: any thread, concurrently (serialised on the device context's mutex).
 */
int mlx5_qpn_dev_fw_qpn_alloc(struct mlx5_qpn_dev *dev, uint32_t *qpn);

/**
 * Give back a QPN of mlx5_qpn_dev_fw_qpn_alloc() (rdma-core's mlx5dv_reserved_qpn_dealloc()):
 * at once, no quarantine. The block's last QPN to come back destroys the block (a
 * DESTROY_GENERAL_OBJECT command under the context's mutex).
 *
 * @return 0; -EINVAL a QPN this handle's allocator did not hand out (on a device without the
 *         API: any QPN), or freed twice (one log line; nothing changes), or a NULL device;
 *         -EOPNOTSUPP the backend has no such call.
 * Thread safety: any thread, concurrently.
 */
int mlx5_qpn_dev_fw_qpn_free(struct mlx5_qpn_dev *dev, uint32_t qpn);

/** The pool behind a device. */
struct mlx5_qpn_pool *mlx5_qpn_dev_pool(struct mlx5_qpn_dev *dev);

/** @return 0; -EINVAL on NULL arguments. */
int mlx5_qpn_dev_info_get(struct mlx5_qpn_dev *dev, struct mlx5_qpn_dev_info *info);

/** @return 0; -EINVAL on NULL arguments. */
int mlx5_qpn_dev_stats_get(struct mlx5_qpn_dev *dev, struct mlx5_qpn_dev_stats *stats);

/** Print the device, its ranges and counters. */
void mlx5_qpn_dev_dump(FILE *f, struct mlx5_qpn_dev *dev);

/**
 * Reserve one more range now (normally the control thread and the allocation path do this).
 * In a secondary, the primary reserves it (DPDK IPC).
 * @return 0; -ENOSPC the pool or the device limit is full; device errors; (secondary) -ENODEV
 *         the primary is gone, -ETIMEDOUT it did not answer.
 */
int mlx5_qpn_dev_grow(struct mlx5_qpn_dev *dev);

/** Names of the probed devices: fills up to n pointers (valid until that device is closed),
 * returns how many devices there are. */
unsigned int mlx5_qpn_dev_list(const char **names, unsigned int n);

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_H */
