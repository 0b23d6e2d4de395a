/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_GLUE_H
#define MLX5_QPN_GLUE_H

/**
 * @file
 * Internal: the rdma-core glue. The library is never linked against libibverbs or libmlx5
 * (a build or a host without them must still work with the emulated device):
 * they are dlopen()ed once (RTLD_LAZY | RTLD_LOCAL) and every symbol used anywhere in the
 * project is resolved into one table, like DPDK's drivers/common/mlx5/linux/mlx5_glue.h.
 *
 * Member names drop the library prefix (open_device, devx_obj_create): some
 * rdma-core names are function-like macros (ibv_get_device_list, ibv_query_port) that would
 * rewrite a call such as glue->ibv_query_port(...). Pointer types are taken from the real
 * prototypes in <infiniband/verbs.h> and <infiniband/mlx5dv.h>, so a
 * prototype change in rdma-core is a compile error here, not a silent ABI mismatch.
 *
 * Libraries: libibverbs.so.1 and libmlx5.so.1, both required (the hardware backend needs
 * them). Every symbol is required except mlx5dv_reserved_qpn_alloc/_dealloc (rdma-core 34 and
 * later) and ibv_is_fork_initialized (IBVERBS_1.13, a later rdma-core still): on an older
 * rdma-core those members are NULL and the backend works without them. librdmacm is not the driver's: qpn-testpmd loads it itself (app/qpn-testpmd/
 * rdmacm_glue.h). The environment variable MLX5_QPN_GLUE_LIBDIR, when set, is a directory to
 * load the libraries from instead of the dynamic loader's search path.
 *
 * Thread safety: the first call of any accessor loads the table exactly once
 * (std::call_once); afterwards the table and the error text are immutable.
 */

#include <cstddef>

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Resolved rdma-core entry points. */
struct mlx5_qpn_glue {
	/* libibverbs.so.1 */
	__typeof__(ibv_get_device_list) *get_device_list;
	__typeof__(ibv_free_device_list) *free_device_list;
	__typeof__(ibv_get_device_name) *get_device_name;
	/** The node GUID without opening the device (big-endian): the purge's lookup. */
	__typeof__(ibv_get_device_guid) *get_device_guid;
	__typeof__(ibv_open_device) *open_device;
	__typeof__(ibv_close_device) *close_device;
	__typeof__(ibv_query_device) *query_device;
	/** The exported entry (IBVERBS_1.1), not the header's inline ibv_query_port: it fills
	 * struct _compat_ibv_port_attr, which is ibv_port_attr up to and with flags (where
	 * IBV_QPF_GRH_REQUIRED is), not port_cap_flags2 and active_speed_ex behind it (rdma-core
	 * 22 on: __lib_query_port with the compat length; 20 and 21 filled the whole struct). */
	__typeof__(ibv_query_port) *query_port;
	/** The context's asynchronous events (IBV_EVENT_CQ_ERR of a DC CQ the device overran);
	 * the backend makes the context's async_fd non-blocking, so that it reads without
	 * waiting (-1 with EAGAIN: none). */
	__typeof__(ibv_get_async_event) *get_async_event;
	__typeof__(ibv_ack_async_event) *ack_async_event;
	/* The ordinary-QP source (mlx5_qpn_hw_qp.cpp): one UD QP on a one-entry CQ per QPN. */
	__typeof__(ibv_alloc_pd) *alloc_pd;
	__typeof__(ibv_dealloc_pd) *dealloc_pd;
	__typeof__(ibv_create_cq) *create_cq;
	__typeof__(ibv_destroy_cq) *destroy_cq;
	__typeof__(ibv_create_qp) *create_qp;
	__typeof__(ibv_destroy_qp) *destroy_qp;

	/* The DC data path (mlx5_qpn_hw_dc.cpp): DCI/DCT on an SRQ, their state changes, AHs, MRs. */
	__typeof__(ibv_modify_qp) *modify_qp;
	__typeof__(ibv_create_srq) *create_srq;
	__typeof__(ibv_destroy_srq) *destroy_srq;
	__typeof__(ibv_create_ah) *create_ah;
	__typeof__(ibv_destroy_ah) *destroy_ah;
	/** A DCT's receive buffers (the exported entry; the header's ibv_reg_mr is a macro). */
	__typeof__(ibv_reg_mr) *reg_mr;
	__typeof__(ibv_dereg_mr) *dereg_mr;
	/** The GID table entry with its type (RoCE v1/v2): the exported entry behind the header's
	 * inline ibv_query_gid_ex (pass sizeof(struct ibv_gid_entry) as entry_size). */
	__typeof__(_ibv_query_gid_ex) *query_gid_ex;
	/* Fork safety of pinned memory (mlx5_qpn_hw_probe.cpp). */
	__typeof__(ibv_fork_init) *fork_init;
	/** Optional: NULL on an rdma-core without it (fork_init is then called unasked). */
	__typeof__(ibv_is_fork_initialized) *is_fork_initialized;
	__typeof__(mlx5dv_create_qp) *dv_create_qp; /* libmlx5.so.1 */
	__typeof__(mlx5dv_init_obj) *dv_init_obj;   /* libmlx5.so.1 */

	/* libmlx5.so.1 */
	__typeof__(mlx5dv_is_supported) *dv_is_supported;
	__typeof__(mlx5dv_open_device) *dv_open_device;
	__typeof__(mlx5dv_devx_general_cmd) *devx_general_cmd;
	__typeof__(mlx5dv_devx_obj_create) *devx_obj_create;
	__typeof__(mlx5dv_devx_obj_destroy) *devx_obj_destroy;
	/** Optional (rdma-core 34+): both NULL when libmlx5 lacks either. */
	__typeof__(mlx5dv_reserved_qpn_alloc) *reserved_qpn_alloc;
	__typeof__(mlx5dv_reserved_qpn_dealloc) *reserved_qpn_dealloc;
	__typeof__(mlx5dv_devx_alloc_uar) *devx_alloc_uar;
	__typeof__(mlx5dv_devx_free_uar) *devx_free_uar;

	/** dlopen handles: [0] libibverbs, [1] libmlx5. */
	void *handle[2];
};

/**
 * The process-wide table for the verbs + mlx5 part (loaded on first use).
 *
 * @return the table, or NULL if libibverbs.so.1 / libmlx5.so.1 or one of their required
 *         symbols is missing. The first failing call logs one error line naming the library or symbol;
 *         later calls return NULL silently. mlx5_qpn_glue_error() gives the text.
 */
const struct mlx5_qpn_glue *mlx5_qpn_glue_get(void);

/**
 * Like mlx5_qpn_glue_get() but never logs (for callers that log their own line).
 */
const struct mlx5_qpn_glue *mlx5_qpn_glue_get_quiet(void);

/** Why mlx5_qpn_glue_get() fails, or "" when it succeeds. Loads the table if needed. */
const char *mlx5_qpn_glue_error(void);

/**
 * Load a private table from libdir (NULL: the loader's search path), not touching the
 * process-wide one; for tests and tools. Release it with mlx5_qpn_glue_unload().
 *
 * @param libdir Directory holding the .so.1 files, or NULL.
 * @param glue   Filled on success; on failure all pointers are NULL.
 * @param err    Buffer for the error text ("" on success); may be NULL.
 * @param errlen Its size.
 * @return 0 (verbs + mlx5 resolved; optional members may be NULL), -ENOENT when a library
 *         cannot be opened, -ENOSYS when a required symbol is missing, -EINVAL for a NULL glue.
 */
int mlx5_qpn_glue_load(const char *libdir, struct mlx5_qpn_glue *glue, char *err, size_t errlen);

/** dlclose() the handles of a table from mlx5_qpn_glue_load() and clear it. */
void mlx5_qpn_glue_unload(struct mlx5_qpn_glue *glue);

/**
 * Test hook: make mlx5_qpn_glue_get() and _get_quiet() return glue instead of
 * rdma-core's table (NULL restores it), so that the hardware backend's calls "happen" against
 * a fake table on a machine without a ConnectX. mlx5_qpn_glue_error() is unaffected.
 * The table must outlive every backend opened through it. Not for production use; must not
 * race a concurrent open.
 */
void mlx5_qpn_glue_set_override(const struct mlx5_qpn_glue *glue);

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_GLUE_H */
