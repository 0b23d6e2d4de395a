/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_SIM_H
#define MLX5_QPN_SIM_H

/**
 * @file
 * The emulated mlx5 device: extras beyond the backend ops table (mlx5_qpn_sim_ops).
 *
 * A device is named ("sim0"); its whole state (QPN table, RESERVED_QPN objects, ordinary QPs,
 * UAR pages, counters, the owner table) lives in POSIX shared memory "/mlx5_qpn_<name>", so every
 * process that opens the same name sees one device, like processes sharing one HCA: one node GUID,
 * one QPN space. The device parameters (caps, table rules, faults) are those of the opener that
 * created or last reset the device; a device with no live opener is reset by the next open with
 * that opener's devargs. The segment is removed when its last live opener closes it, and when an
 * open that created it fails; mlx5_qpn_sim_destroy() removes one left by crashed processes.
 *
 * Shared memory is opened through lib/shm (qpn_shm.h): created exclusively with mode 0600, or
 * adopted only if it is this user's alone (-EACCES otherwise); every wait for the init lock or
 * the device mutex is bounded (-ETIMEDOUT and one line); everything read back is validated
 * (-EPROTO and one line naming the segment and the field, or -EIO for a mutex that is no mutex).
 *
 * The table and objects need no EAL (a fork()ed child may use them); only the doorbell service
 * registers with rte_service, and only when EAL is up in the calling process.
 *
 * Thread safety: every function may be called from any thread; commands serialise on the device
 * mutex (a process-shared robust mutex: a process that dies inside a command leaves a device that
 * the next command repairs). A backend handle must not be used across fork(): a child opens its own.
 */

#include <cstdint>

#include "mlx5_qpn_dc_ops.h"
#include "mlx5_qpn_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Statuses counted in mlx5_qpn_sim_stats::failed_by_status (the PRM codes are below 0x60). */
#define MLX5_QPN_SIM_NB_STATUS 0x60

/** Device-wide counters (all processes). */
struct mlx5_qpn_sim_stats {
	uint64_t commands;        /**< Firmware commands executed (create, destroy, query, UAR). */
	uint64_t cmd_failed;      /**< Commands that returned a non-zero status. */
	uint64_t faults_injected; /**< Of those, failures injected by fault_fw_rate/after. */
	/** Of the commands, the creates and modifies: those fault_fw_rate/after count. */
	uint64_t cmds_may_fail;
	uint64_t failed_by_status[MLX5_QPN_SIM_NB_STATUS]; /**< Failures by PRM status. */
	uint64_t objs_live;                                /**< RESERVED_QPN objects alive. */
	uint64_t qpns_reserved;  /**< QPNs held by RESERVED_QPN objects. */
	uint64_t qps_live;       /**< Ordinary QPs alive. */
	uint64_t uars_live;      /**< UAR pages mapped. */
	uint64_t qpns_used;      /**< Bits set in the QPN table (static parts included). */
	uint64_t owners_live;    /**< Open handles registered. */
	uint64_t reclaimed_objs; /**< Objects taken back from dead processes. */
	uint64_t reclaimed_qps;  /**< Ordinary QPs taken back from dead processes. */
	uint64_t repairs;        /**< Device repairs after a process died holding the mutex. */
	uint64_t doorbells;      /**< Doorbell writes consumed by the service. */
	/* DC data path (mlx5_qpn_sim_dc_ops). */
	uint64_t dc_wqes;      /**< Send WQEs executed (good or error). */
	uint64_t dc_delivered; /**< SENDs delivered to a DCT. */
	uint64_t dc_err_cqes;  /**< Error CQEs written (flush errors included). */
	uint64_t dc_stalls;    /**< Executions postponed because a CQ was full. */
	uint32_t dc_cqs;       /**< CQs alive. */
	uint32_t dc_dcis;      /**< DCIs alive. */
	uint32_t dc_dcts;      /**< DCTs alive. */
	uint32_t dc_rsvd;
	uint64_t dc_sends;          /**< Well-formed SENDs of DCIs not in ERR (dc_err_every's N). */
	uint64_t dc_dropped;        /**< SENDs nobody answered: they time out (0x15). */
	uint64_t dc_key_violations; /**< Of those, dropped by a DCT for a wrong DC key. */
	uint64_t dc_faults;         /**< Of those, lost by dc_err_every. */
	uint64_t dc_resets;         /**< DCIs moved back through RESET (dci_reset). */
	uint64_t dc_rnr; /**< SENDs that found no receive WQE posted on their DCT's SRQ and wait. */
};

/**
 * Node GUID of an open emulated device.
 * @return 0; -EINVAL for a NULL argument.
 */
int mlx5_qpn_sim_node_guid(struct mlx5_qpn_backend *be, uint64_t *guid);

/**
 * Read the device-wide counters (a consistent snapshot taken under the device mutex).
 * @return 0; -EINVAL for a NULL argument.
 */
int mlx5_qpn_sim_stats_get(struct mlx5_qpn_backend *be, struct mlx5_qpn_sim_stats *st);

/**
 * Run the doorbell service body once: scan every mapped UAR page of the device for a new 64-bit
 * value in its doorbell register (offset 0x800) and count it. Lock-free; any number of pollers in
 * any processes count each change once. The rte_service registered by uar_map calls this.
 * @return the number of doorbells consumed (>= 0); -EINVAL for a NULL handle.
 */
int mlx5_qpn_sim_poll(struct mlx5_qpn_backend *be);

/**
 * The rte_service id of this handle's doorbell service (registered at the first uar_map when EAL
 * is initialised; its run state is on, map it to a service lcore or run it with
 * rte_service_run_iter_on_app_lcore()).
 * @return 0; -ENOENT if no service is registered; -EINVAL for a NULL argument.
 */
int mlx5_qpn_sim_service_id(struct mlx5_qpn_backend *be, uint32_t *id);

/**
 * Create special QP0 (SMI, gsi = 0) or QP1 (GSI, gsi = 1) of a port (1-based), as rdmavt:
 * answers 0 or 1 once per port.
 * @return 0 and *qpn; -EINVAL for a second request on the same port or a bad port.
 */
int mlx5_qpn_sim_special_qp(struct mlx5_qpn_backend *be, int gsi, uint32_t port, uint32_t *qpn);

/**
 * Take back the objects, QPs and UAR pages of dead processes now (open and a reservation that
 * finds no room do it too).
 * @return the number of dead handles reclaimed; -EINVAL for a NULL handle.
 */
int mlx5_qpn_sim_reclaim(struct mlx5_qpn_backend *be);

/**
 * Remove the shared memory of emulated device @p name, the emulator's own state only (for tests
 * and tools), as crashed processes left it: the next open creates a fresh device. Refused while
 * the owner table shows a live process (a handle of this process included): a fresh device
 * would hand out again the objects it holds. The device's lease file is the generic layer's:
 * mlx5_qpn_dev_purge() removes both.
 * @return 0; -ENOENT if it does not exist; -EBUSY a live process has it open (one ERR line
 *         names its pid; nothing removed); -EINVAL for a bad name; another negative errno.
 */
int mlx5_qpn_sim_destroy(const char *name);

/**
 * The backend's purge hook (mlx5_qpn_backend_desc.purge): mlx5_qpn_sim_destroy(), and *guid
 * gets the device's node GUID (as created, else the one its name gives; 0 for a bad name),
 * also when no segment exists.
 * @return as mlx5_qpn_sim_destroy().
 */
int mlx5_qpn_sim_purge(const char *name, uint64_t *guid);

/**
 * Test hook: the bound on every wait for the device mutex and the segment's init lock, for every
 * device of this process (0 restores the default, qpn::shm::kLockTimeoutNs). Not thread safe
 * against concurrent opens.
 * @return the previous bound.
 */
uint64_t mlx5_qpn_sim_set_lock_timeout_ns(uint64_t ns);

/**
 * Test hook: take the device mutex and keep it (a hung or dying command), so that tests can
 * stop or kill the holder. @return 0 (held); as every command for a mutex that cannot be taken.
 */
int mlx5_qpn_sim_test_hold_mutex(struct mlx5_qpn_backend *be);

/*
 * ---- DC data path of the emulated device ----
 *
 * mlx5_qpn_sim_dc_ops is the DC table of mlx5_qpn_sim_ops (.dc): the DC layer (dc/) reaches the
 * emulated device's CQs, DCIs and DCTs through it alone, as it would a ConnectX's.
 *
 * The queues of CQs, DCIs and DCTs live in the device's shared memory (a 64 MiB arena), so a DCI
 * of one process can send to a DCT of another. Creation and destruction are firmware commands
 * (device mutex, counted, subject to fault injection); the info structs they fill point into the
 * queue memory, which the application then uses without any call into the device, as with
 * mlx5dv: it writes WQEs into the SQ, publishes the send counter in the doorbell record and
 * writes the UAR register, and polls the CQ ring, publishing its consumer index in the CQ's
 * doorbell record. The table's execute is the device executing WQEs; its poll is
 * mlx5_qpn_sim_poll().
 *
 * Device behaviour: WQEs of each DCI execute in order. A SEND whose DCT exists and whose DC key
 * matches takes the next receive WQE posted on the DCT's SRQ (the PRM's linked list), is written
 * into the buffer that WQE names and completes with a RESP_SEND CQE on the DCT's CQ (its
 * wqe_counter the WQE's index) and (if signaled) a REQ CQE on the DCI's CQ. With no WQE posted
 * the SEND waits (receiver not ready, counted in dc_rnr) and is retried on a later pass; a WQE
 * whose data segment does not name the DCT's registered buffers (key, range) or is too short
 * completes with RESP_ERR (0x04 local protection, 0x01 local length). A SEND nobody answers - an unknown DCT, a
 * wrong DC key (the DCT drops it and counts a key violation, as a ConnectX's does), or a
 * packet lost by dc_err_every - times out: the DCI's queue waits behind it, and on a later
 * execution pass (execute call; the modelled retry time-out) it completes with 0x15 (transport
 * retries exceeded). A malformed WQE completes at once (0x02 local QP operation, 0x01 local
 * length). Every error CQE puts the DCI in ERR: every later WQE completes with 0x05 (flush)
 * until dci_reset (RESET -> RTS, its queue restarted at BB 0) or its destruction. A full CQ
 * (either side) postpones execution of that DCI (receiver not ready) instead of overrunning
 * the CQ. dci_create, dci_reset and dct_create check a path as the kernel does for the
 * InfiniBand ports emulated (one GID each, index 0): -EINVAL otherwise.
 * DCI and DCT numbers come from the device's QPN table, as ordinary QPs. The first DCI of a
 * handle maps the UAR page all its DCIs ring. A DCT's SRQ has 256 WQEs of 32 bytes, each with a
 * receive buffer of 256 bytes, all in the arena; dct_create hands them out in
 * mlx5_qpn_dc_dct_info::srq with none posted, as the hardware backend does.
 * The device executes when someone calls the table's execute: the DC layer does in
 * mlx5_qpn_cq_poll() and mlx5_qpn_dev_service_run(); the doorbell service does not.
 *
 * Returns beyond mlx5_qpn_dc_ops.h: cq_create -EINVAL for log_depth outside [1, 16];
 * dci_create -EINVAL for log_sq_bbs above 15; -ENOMEM when no QPN is left for a DCI or DCT.
 */

/** The emulated device's table; the generic layer finds it through the registry alone. */
extern const struct mlx5_qpn_dev_ops mlx5_qpn_sim_ops;

/** The emulated device's DC operations (wired as mlx5_qpn_sim_ops.dc). */
extern const struct mlx5_qpn_dc_ops mlx5_qpn_sim_dc_ops;

/**
 * Switch the DC data path of this handle off (0) or on (1, the default): off, every
 * mlx5_qpn_sim_dc_ops call but poll returns -EOPNOTSUPP, modelling a backend without a
 * data path (tests of the generic layer's -EOPNOTSUPP paths).
 * @return 0; -EINVAL.
 */
int mlx5_qpn_sim_dc_enable(struct mlx5_qpn_backend *be, int on);

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_SIM_H */
