/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_HW_H
#define MLX5_QPN_HW_H

/**
 * @file
 * Internal: the rdma-core hardware backend, `mlx5_qpn_hw_ops` (declared below),
 * registered at load as backend "hw" for devices named "ib=<ibv device name>"
 * (mlx5_qpn_backend.h). Its one key of its own is `port=N` (struct mlx5_qpn_hw_devargs): the
 * 1-based physical port the handle serves (default 1). Its DC objects, AHs and port queries use
 * it, and mlx5_qpn_dev_info.port reports it; a port the device does not have is refused at
 * open in one line (-EINVAL).
 *
 * open:            glue -> ibv_get_device_list -> the device named da->name (e.g. "mlx5_0").
 *                  Not found: one line `mlx5_qpn: no RDMA device "<name>" (<n> devices found)`
 *                  and -ENODEV. rdma-core missing (library or required symbol): one line
 *                  `mlx5_qpn: no RDMA device "<name>": rdma-core unavailable (<what>)` and
 *                  -ENODEV too, since for the caller both mean "this device cannot be had".
 *                  A device that is not mlx5: -ENOTSUP. -EINVAL for a NULL/empty name.
 *                  Fork safety comes first, before anything is pinned: ibv_fork_init() when
 *                  ibv_is_fork_initialized() says DISABLED or does not exist (nothing when
 *                  UNNEEDED or ENABLED); a refusal is one WARNING line, not a failure.
 *                  The context is opened with DEVX (mlx5dv_open_device); when DEVX is refused
 *                  it falls back to ibv_open_device and caps.devx = 0. HCA caps are read with
 *                  QUERY_HCA_CAP through mlx5dv_devx_general_cmd, caps 2 only when
 *                  cmd_hca_cap.hca_cap_2 is set; RESERVED_QPN support is then proven by
 *                  creating and destroying one object of the size the generic layer will
 *                  request (mlx5_qpn_hw_request_log()). A refused size steps down: one size
 *                  on "bad parameter", straight to the granularity on any other answer; the
 *                  first refusal (size, status, syndrome) is one WARNING line when objects
 *                  stay the source. reserved_qpn=no skips the trial. reserved_qpn=yes
 *                  without usable objects: one line `mlx5_qpn: <name>: reserved_qpn=yes but
 *                  RESERVED_QPN objects are unusable: <reason>` and -EOPNOTSUPP. When the
 *                  source is ordinary UD QPs, they are capped at what RLIMIT_MEMLOCK leaves
 *                  (caps.qpn_limit; one WARNING line naming the cap, the limit and the bytes
 *                  per QP), and -ENOMEM in one line when not even one fits. On success: the
 *                  fork line (if fork_init was called), a line when rdma-core lacks
 *                  mlx5dv_reserved_qpn_alloc (which source serves instead), and the caps read,
 *                  the verdict and the QPN source in one INFO line. The opener's pid is
 *                  recorded.
 * query_caps:      the caps read at open. caps.reserved_qpn_obj is 1 only when bit 44 of
 *                  general_obj_types is set AND the trial allocation succeeded (the raw bits
 *                  stay in caps.general_obj_types). caps.log_max_num_reserved_qpn read as 0
 *                  (unknown) is reported as 24: no firmware bound on the total.
 * range_reserve:   one DEVX CREATE_GENERAL_OBJECT(RESERVED_QPN, log_obj_range = log_size);
 *                  log_size must be within [granularity, max(max_alloc, granularity)]
 *                  (-EINVAL otherwise); -ENOTSUP when objects are not usable (use the
 *                  single-QPN fallback); firmware errors as mlx5_qpn_fw_status_to_errno().
 *                  The object is never larger than the largest size the firmware accepted,
 *                  and steps down on a refusal as at open: obj->log_size is what was created.
 * range_release:   destroys the object; -EINVAL for a handle this device did not give.
 * qpn_reserve_one / qpn_release_one: mlx5dv_reserved_qpn_alloc / _dealloc, their positive
 *                  errno returned negated; -EOPNOTSUPP without asking rdma-core when the trial
 *                  failed (rdma-core creates the same objects) or when rdma-core is older than
 *                  34 and has no such calls.
 * qp_create / qp_destroy: the ordinary-QP source (mlx5_qpn_hw_qp.h): one UD QP per QPN on
 *                  one shared one-entry CQ, held until qp_destroy; -EINVAL for a QPN not held;
 *                  -ENOMEM (one line, nothing asked of rdma-core) past the RLIMIT_MEMLOCK cap.
 * uar_map / uar_unmap: mlx5dv_devx_alloc_uar, non-cached first, BlueFlame if refused.
 * close:           destroys every object, single QPN, ordinary QP and UAR still held, closes
 *                  the context. In a forked child (pid != the opener's) it frees the
 *                  child's memory only: the verbs objects are the parent's through the
 *                  shared uverbs file, and destroying them would take its QPNs away.
 *
 * The backend pointer handed out is a struct mlx5_qpn_hw_dev (mlx5_qpn_hw_priv.h).
 * Thread safety: each op may be called from any thread; firmware commands run outside the
 * backend's bookkeeping lock, which only the slow path takes. close must not race other ops.
 */

#include "mlx5_qpn_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The hardware backend's own devargs (parsed into mlx5_qpn_devargs.be_args). */
struct mlx5_qpn_hw_devargs {
	uint32_t port; /**< port=N: the physical port the handle serves, 1-based (0 means 1). */
};

/** The hardware backend's table; the generic layer finds it through the registry alone. */
extern const struct mlx5_qpn_dev_ops mlx5_qpn_hw_ops;

/**
 * The backend's purge hook (mlx5_qpn_backend_desc.purge). The hardware keeps no state of its
 * own for a crashed process to leave (the kernel destroys a dead process's DEVX objects), so
 * the hook only says which device the name is: *guid gets its node GUID, looked up as open
 * does (ibv_get_device_list, then ibv_get_device_guid: no context is opened), and the generic
 * layer removes that GUID's lease file.
 * @return -ENOENT with *guid set (nothing of the backend's own to remove); -EINVAL a NULL or
 *         malformed name; -ENODEV no RDMA device of that name, or rdma-core unavailable;
 *         -ENOTSUP not an mlx5 device (one line each; *guid 0).
 */
int mlx5_qpn_hw_purge(const char *name, uint64_t *guid);

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_HW_H */
