/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_HW_PRIV_H
#define MLX5_QPN_HW_PRIV_H

/**
 * @file
 * Internal to the hardware backend (C++ only): the device behind a struct mlx5_qpn_backend
 * pointer, shared by the ops (mlx5_qpn_hw.cpp) and the probe's firmware commands
 * (mlx5_qpn_hw_probe.cpp: fork safety, caps, caps 2, the trial object and the size
 * step-down).
 *
 * Thread safety: see mlx5_qpn_hw.h. The probe functions run inside open, before the device
 * is handed out; create_rsvd_obj_stepping() and destroy_rsvd_obj() may run on any thread.
 */

#include <sys/types.h>

#include <atomic>
#include <mutex>

#include "mlx5_qpn_hw_qp.h"
#include "mlx5_qpn_hw_sizing.h"
#include "mlx5_qpn_hw.h"

namespace mlx5_qpn_hw {

/* What a bookkeeping node holds: everything the device must give back at close. */
enum class node_kind { range, single_qpn, uar };

struct hw_node {
	hw_node *prev;
	hw_node *next;
	node_kind kind;
	uint32_t qpn; /* first QPN of a range, or the single QPN */
	uint8_t log_size;
	struct mlx5dv_devx_obj *obj; /* range */
	struct mlx5dv_devx_uar *uar; /* uar */
};

/* A RESERVED_QPN creation the firmware refused: its status (0: none, the call's errno only),
 * syndrome and the negative errno it maps to. */
struct rsvd_refusal {
	uint8_t status;
	uint32_t syndrome;
	int rc;
};

/* What the open did about fork safety of pinned memory (fork_setup()), logged at its end. */
enum class fork_note : uint8_t {
	nothing,         /* the kernel copies pinned pages on fork, or fork support is on */
	called_disabled, /* ibv_is_fork_initialized() said DISABLED: ibv_fork_init() called */
	called_unknown,  /* no ibv_is_fork_initialized() in this rdma-core: ibv_fork_init() */
	failed,          /* ibv_fork_init() refused (too late: memory registered already) */
};

struct mlx5_qpn_hw_dev {
	struct mlx5_qpn_backend base {
		&mlx5_qpn_hw_ops
	}; /* first: the handle leads to its table */
	const struct mlx5_qpn_glue *glue;
	struct ibv_context *ctx;
	char name[MLX5_QPN_DEV_NAMESIZE];
	struct mlx5_qpn_caps caps;
	bool objs_ok;    /* RESERVED_QPN objects proven by the trial allocation */
	std::mutex lock; /* guards the list only; never held across a firmware command */
	hw_node head;    /* circular list sentinel */
	/* Fork safety: only the process that opened the device destroys what it holds. */
	pid_t owner_pid;
	struct mlx5_qpn_hw_probe probe; /* what the probe learned (mlx5_qpn_hw_sizing.h) */
	uint8_t raw_log_max_num;        /* as read; caps carry mlx5_qpn_hw_log_max_num() */
	uint16_t max_wqe_sz_sq_dc;      /* cmd_hca_cap's, bytes (0: unread) */
	std::atomic<uint8_t> log_ok{0}; /* largest object size the firmware accepted */
	std::atomic<bool> step_logged{false};
	/* first_refusal* are written once, by the thread that wins this flag */
	std::atomic<bool> refusal_kept{false};
	rsvd_refusal first_refusal{}; /* what the step-down line names */
	uint8_t first_refused_log = 0;
	fork_note fork = fork_note::nothing;
	int fork_rc = 0;             /* ibv_fork_init()'s answer, negated */
	bool probing;                /* inside open: firmware refusals are verdicts */
	struct mlx5_qpn_hw_qps *qps; /* the ordinary-QP source */
	/* The DC data path (mlx5_qpn_hw_dc.cpp): one PD for its CQ-less objects (QPs, SRQs,
	 * AHs), allocated on first use under dc_lock (slow path only). */
	std::mutex dc_lock;
	struct ibv_pd *dc_pd;
	uint8_t port; /* the physical port the handle serves (port=, default 1) */
	/* The host's DC conditions (mlx5_qpn_hw_dc_host.cpp), read at probe over DEVX: -1
	 * unknown (no DEVX, or the command refused). */
	int8_t dc_cap = -1;    /* cmd_hca_cap.dct */
	int8_t lag_dct = -1;   /* cmd_hca_cap.lag_dct */
	int8_t lag_state = -1; /* QUERY_LAG's lag_state: > 0 while the ports are bonded */
	/* Learned from the kernel under dc_lock: it refused an AV at DCI INIT->RTR (the older
	 * modify_dci_qp_is_ok, before 5.2), so DCIs reach RTR without one. */
	bool dci_rtr_no_av = false;
	/* CQs the device raised IBV_EVENT_CQ_ERR for (dc_lock; at most a few, kept till close). */
	struct ibv_cq *cq_err[8] = {};
	unsigned int nb_cq_err = 0;
};

/* rdma-core returns positive errno values, some wrappers negative ones: make it negative. */
inline int
neg_errno(int rc)
{
	return rc > 0 ? -rc : rc;
}

/**
 * The device named name, as open and the purge hook look it up: *glue the process's table,
 * *found the device and *list the list to free once done with it.
 * @return 0; -ENODEV rdma-core unavailable or no such device, -ENOTSUP not an mlx5 device
 *         (one line each; *found and *list NULL).
 */
int find_device(const char *name, const struct mlx5_qpn_glue **glue, struct ibv_device ***list,
		struct ibv_device **found);

/** Caps from verbs (GUID, ports, QP count) and, with DEVX, from HCA caps and caps 2;
 * dev->probe.verdict says how far it got. */
void read_caps(mlx5_qpn_hw_dev *dev);

/** The trial object at the size that will be requested (objs_ok, log_ok, probe on return). */
void trial_allocation(mlx5_qpn_hw_dev *dev, const struct mlx5_qpn_devargs *da);

/**
 * One RESERVED_QPN object of 2^*log QPNs, or a smaller one after a refusal (one size down on
 * "bad parameter", the granularity on any other answer; the first refusal logged once per
 * device); *log is the size created.
 * @return 0, or the negative errno of the last answer.
 */
int create_rsvd_obj_stepping(mlx5_qpn_hw_dev *dev, uint8_t *log, struct mlx5dv_devx_obj **obj,
			     uint32_t *first_qpn);

/** Destroy one object; the negative errno is logged and returned. */
int destroy_rsvd_obj(mlx5_qpn_hw_dev *dev, struct mlx5dv_devx_obj *obj, uint32_t first_qpn);

/** Free what the DC data path holds for the device (its PD); the opener only, at close. */
void hw_dc_close(mlx5_qpn_hw_dev *dev);

/* mlx5_qpn_hw_dc_host.cpp: what a host allows of DC, and what its device reported. */

/** The DC caps of a QUERY_HCA_CAP(general) outbox and the LAG state (QUERY_LAG) into dev. */
void read_dc_host(mlx5_qpn_hw_dev *dev, const void *caps_out, size_t outlen);

/** Before the first DC object of a kind (what: "DCI" or "DCT"): 0, or -EOPNOTSUPP with one line
 * naming the capability (cmd_hca_cap.dct) or the bond (RoCE LAG without lag_dct). */
int dc_host_check(mlx5_qpn_hw_dev *dev, bool dct, const char *what);

/** mlx5dv_create_qp refused a DC object with rc: one line naming what the kernel's
 * EOPNOTSUPP means when the caps could not say it before. */
void dc_host_refused(const mlx5_qpn_hw_dev *dev, bool dct, int rc);

/** The DC conditions as one INFO line (dct cap, LAG, lag_dct, the port's link layer and
 * grh_required), at the end of a successful probe. */
void log_dc_host(mlx5_qpn_hw_dev *dev);

/** The cq_check op: the context's asynchronous events read (non-blocking), CQ errors kept. */
int dc_cq_check(mlx5_qpn_hw_dev *dev, struct ibv_cq *cq);

/** Make the context's async_fd non-blocking (dc_cq_check() reads it without waiting). */
void dc_async_nonblock(mlx5_qpn_hw_dev *dev);

/** The caps read, the objects' verdict and the QPN source, in one line at probe. */
void log_probe(const mlx5_qpn_hw_dev *dev, enum mlx5_qpn_hw_source src);

/**
 * Fork safety, before the first PD, MR or queue buffer of the process's verbs: nothing when
 * ibv_is_fork_initialized() says UNNEEDED (the kernel copies pinned pages on fork) or ENABLED
 * (RDMAV_FORK_SAFE / IBV_FORK_SAFE in the environment, which rdma-core honours when it loads,
 * or the application's own call); ibv_fork_init() when DISABLED, or when this rdma-core cannot
 * say. dev->fork records what happened; log_setup() logs it.
 */
void fork_setup(mlx5_qpn_hw_dev *dev);

/** At the end of a successful open: the fork line and the line of a missing single-QPN API,
 * each only when there is something to say. */
void log_setup(const mlx5_qpn_hw_dev *dev, enum mlx5_qpn_hw_source src);

} /* namespace mlx5_qpn_hw */

#endif /* MLX5_QPN_HW_PRIV_H */
