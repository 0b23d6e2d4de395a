/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's DC commands, its DC ops table (mlx5_qpn_sim_dc_ops): create and destroy
 * of CQs, DCIs and DCTs, and the execution step. Each is a firmware command (device mutex,
 * counted, subject to fault injection); DCI and DCT numbers are ordinary QPs of the QPN table
 * (records of kind REC_DCI/REC_DCT). The DC tables, the queue arena and WQE execution are
 * sim_dc.cpp's.
 */
#include "sim_internal.h"

#include "mlx5_qpn_dc.h"
#include "mlx5_qpn_prm_wqe.h"

#include <cerrno>
#include <cstring>
#include <pthread.h>

#include <atomic>

using namespace mlx5_qpn_sim;

/* ---- DC data path (see sim_dc.h) ---- */

namespace mlx5_qpn_sim {

namespace {

int
dct_lookup(void *ctx, uint32_t dctn)
{
	SimShm *s = static_cast<SimShm *>(ctx);
	uint32_t idx = index_of(s, dctn);

	if (qpn_of(s, idx) != dctn)
		return -1;
	const SimRec *r = rec_find(s, idx + 1);
	if ((r == nullptr) || r->kind != REC_DCT || r->aux >= kDcMaxDct)
		return -1;
	return int(r->aux);
}

/* Start a DC command: checks, mutex, firmware accounting. Returns 0 with the mutex held. */
int
dc_cmd_begin(mlx5_qpn_backend *be, CmdKind kind, uint8_t *st)
{
	if (be == nullptr)
		return -EINVAL;
	SimDev *d = to_dev(be);
	if (d->dc_off)
		return -EOPNOTSUPP;
	int rc = dev_lock(d->shm, d->name);
	if (rc)
		return rc;
	*st = fw_begin(d->shm, kind);
	return 0;
}

/* End a DC command: status -> errno (failures counted and logged), mutex released. */
int
dc_cmd_end(SimDev *d, uint8_t st, int rc, const char *what)
{
	SimShm *s = d->shm;

	if (st)
		rc = fw_fail(s, st);
	dev_unlock(s);
	if (rc)
		SIM_LOG(ERR, "device %s: %s failed: %s", d->name, what, strerror(-rc));
	return rc;
}

bool
handle_ok(uint64_t handle, uint32_t cap)
{
	return uint32_t(handle) < cap;
}

/* Free a DC QPN record of this handle. Mutex held. */
void
dc_qpn_free(SimDev *d, uint32_t qpn, uint8_t kind)
{
	SimShm *s = d->shm;
	SimRec *r = rec_find(s, index_of(s, qpn) + 1);

	if ((r != nullptr) && r->kind == kind && r->owner == d->slot &&
	    qpn_of(s, index_of(s, qpn)) == qpn)
		rec_release(s, r);
}

int
sim_cq_create(mlx5_qpn_backend *be, uint32_t log_depth, mlx5_qpn_dc_cq_info *cq)
{
	uint8_t st = 0;
	if (cq == nullptr)
		return -EINVAL;
	if ((be != nullptr) && (log_depth < 1 || log_depth > kDcLogCqMax)) {
		SIM_LOG(ERR, "device %s: CQ log_depth %u outside [1, %u]", to_dev(be)->name,
			log_depth, kDcLogCqMax);
		return -EINVAL;
	}
	int rc = dc_cmd_begin(be, CMD_CREATE, &st);
	if (rc)
		return rc;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	if (!st) {
		uint32_t idx = 0, gen = ++s->gen_next;
		rc = dc_cq_create(&s->dc, s->dc_arena, d->slot, gen, log_depth, &idx);
		if (rc == 0) {
			memset(cq, 0, sizeof(*cq));
			cq->ring = dc_page_ptr(s->dc_arena, s->dc.cq[idx].page);
			cq->dbrec = s->dc.cq[idx].dbrec;
			cq->log_depth = log_depth;
			cq->cqn = idx;
			cq->handle = (uint64_t(gen) << 32) | idx;
		}
	}
	return dc_cmd_end(d, st, rc, "CREATE_CQ");
}

int
sim_cq_destroy(mlx5_qpn_backend *be, const mlx5_qpn_dc_cq_info *cq)
{
	uint8_t st = 0;
	if ((cq == nullptr) || !handle_ok(cq->handle, kDcMaxCq))
		return -EINVAL;
	int rc = dc_cmd_begin(be, CMD_DESTROY, &st);
	if (rc)
		return rc;
	SimDev *d = to_dev(be);
	rc = dc_cq_destroy(&d->shm->dc, d->slot, uint32_t(cq->handle), uint32_t(cq->handle >> 32));
	return dc_cmd_end(d, 0, rc, "DESTROY_CQ");
}

/* Is the CQ behind `handle` live and opened by this handle (its generation still current)? */
bool
cq_is_mine(const SimDc *dc, const SimDev *d, uint64_t handle)
{
	uint32_t i = uint32_t(handle);
	return (dc->cq[i].live != 0u) && dc->cq[i].owner == d->slot &&
	       dc->cq[i].gen == uint32_t(handle >> 32);
}

/* DESTROY of a DCI or DCT (rec says which): the queue first, then its number in the QPN table. */
int
dc_qp_destroy_cmd(mlx5_qpn_backend *be, uint64_t handle, uint32_t max, uint8_t rec,
		  const char *what)
{
	uint8_t st = 0;
	if (!handle_ok(handle, max))
		return -EINVAL;
	int rc = dc_cmd_begin(be, CMD_DESTROY, &st);
	if (rc)
		return rc;
	SimDev *d = to_dev(be);
	SimDc *dc = &d->shm->dc;
	uint32_t idx = uint32_t(handle), gen = uint32_t(handle >> 32);
	uint32_t qpn = rec == REC_DCI ? dc->dci[idx].qpn : dc->dct[idx].number;
	rc = rec == REC_DCI ? dc_dci_destroy(dc, d->slot, idx, gen) :
			      dc_dct_destroy(dc, d->slot, idx, gen);
	if (rc == 0)
		dc_qpn_free(d, qpn, rec);
	return dc_cmd_end(d, 0, rc, what);
}

/*
 * A local path as the kernel checks it at RTR (ib_modify_qp's AV checks and mlx5's
 * mlx5_set_path()), for the device this emulates: InfiniBand ports 1..ports, each with one GID
 * (index 0, the subnet prefix and port GUID), so a GRH may name index 0 only. NULL: the port's
 * default (no GRH). 0, or -EINVAL with one line.
 */
int
path_check(const SimDev *d, const mlx5_qpn_dc_path *p, const char *what)
{
	if (p == nullptr)
		return 0;
	const char *bad = nullptr;
	unsigned v = 0;
	if (p->port > d->shm->cfg.nb_ports)
		bad = "port", v = p->port;
	else if (p->sl > 15)
		bad = "sl", v = p->sl;
	else if (p->path_mtu > 5)
		bad = "path_mtu", v = p->path_mtu;
	else if (p->static_rate > 23)
		bad = "static_rate", v = p->static_rate;
	else if (p->is_global > 1)
		bad = "is_global", v = p->is_global;
	else if (p->is_global && p->sgid_index != 0)
		bad = "sgid_index (the port's GID table has index 0 only)", v = p->sgid_index;
	else if (p->is_global && p->flow_label > 0xfffff)
		bad = "flow_label", v = p->flow_label;
	if (bad == nullptr)
		return 0;
	SIM_LOG(ERR, "device %s: %s: path refused: %s %u", d->name, what, bad, v);
	return -EINVAL;
}

int
sim_dci_create(mlx5_qpn_backend *be, const mlx5_qpn_dc_cq_info *cq, uint32_t log_sq_bbs,
	       const mlx5_qpn_dc_path *path, mlx5_qpn_dc_dci_info *dci)
{
	uint8_t st = 0;
	if ((be == nullptr) || (cq == nullptr) || (dci == nullptr) ||
	    !handle_ok(cq->handle, kDcMaxCq) || log_sq_bbs > kDcLogSqMax + kDcSqBbShift)
		return -EINVAL;
	SimDev *d = to_dev(be);
	if (d->dc_off)
		return -EOPNOTSUPP;
	if (path_check(d, path, "DCI") != 0)
		return -EINVAL;
	/* The UAR page every DCI of this handle rings (mapped once, outside the device mutex:
	 * uar_map is a command of its own). */
	pthread_mutex_lock(&d->lock);
	int rc = 0;
	if (!d->dc_uar_mapped) {
		rc = sim_uar_map(be, &d->dc_uar);
		d->dc_uar_mapped = rc == 0;
	}
	pthread_mutex_unlock(&d->lock);
	if (rc)
		return rc;
	rc = dc_cmd_begin(be, CMD_CREATE, &st);
	if (rc)
		return rc;
	SimShm *s = d->shm;
	SimDc *dc = &s->dc;
	uint32_t cqi = uint32_t(cq->handle);
	if (!st && !cq_is_mine(dc, d, cq->handle))
		rc = -EINVAL;
	uint32_t qpn = 0;
	if (!st && !rc)
		st = qp_alloc_locked(d, REC_DCI, 0, &qpn);
	if (!st && !rc) {
		uint32_t idx = 0, gen = ++s->gen_next;
		rc = dc_dci_create(dc, s->dc_arena, d->slot, gen, qpn, cqi, log_sq_bbs,
				   d->dc_uar.page_id, &idx);
		if (rc) {
			dc_qpn_free(d, qpn, REC_DCI);
		} else {
			rec_find(s, index_of(s, qpn) + 1)->aux = idx;
			memset(dci, 0, sizeof(*dci));
			dci->qpn = qpn;
			dci->log_sq_bbs = log_sq_bbs;
			dci->sq = dc_page_ptr(s->dc_arena, dc->dci[idx].page);
			dci->dbrec = dc->dci[idx].dbrec;
			dci->uar_reg = d->dc_uar.reg_addr;
			dci->max_inline = MLX5_QPN_DC_MAX_INLINE;
			dci->handle = (uint64_t(gen) << 32) | idx;
		}
	}
	return dc_cmd_end(d, st, rc, "CREATE_QP (DCI)");
}

/* RESET -> INIT -> RTR (path) -> RTS of a DCI of this handle, as one command: out of ERR, its
 * queue restarted at BB 0 (sim_dc.h, dc_dci_reset). */
int
sim_dci_reset(mlx5_qpn_backend *be, const mlx5_qpn_dc_dci_info *dci, const mlx5_qpn_dc_path *path)
{
	uint8_t st = 0;
	if ((be == nullptr) || (dci == nullptr) || !handle_ok(dci->handle, kDcMaxDci))
		return -EINVAL;
	SimDev *d = to_dev(be);
	if (!d->dc_off && path_check(d, path, "DCI reset") != 0)
		return -EINVAL;
	int rc = dc_cmd_begin(be, CMD_MODIFY, &st);
	if (rc)
		return rc;
	rc = dc_dci_reset(&d->shm->dc, d->slot, uint32_t(dci->handle), uint32_t(dci->handle >> 32));
	return dc_cmd_end(d, 0, rc, "MODIFY_QP (DCI RESET->RTS)");
}

int
sim_dci_destroy(mlx5_qpn_backend *be, const mlx5_qpn_dc_dci_info *dci)
{
	if (dci == nullptr)
		return -EINVAL;
	return dc_qp_destroy_cmd(be, dci->handle, kDcMaxDci, REC_DCI, "DESTROY_QP (DCI)");
}

/* What the DC layer receives a DCT's messages by: its SRQ as mlx5dv hands one out (the WQE
 * list, none posted; its doorbell record) and the registered receive buffers. */
void
dct_info_fill(SimShm *s, uint32_t idx, uint32_t gen, mlx5_qpn_dc_dct_info *dct)
{
	SimDcDct &t = s->dc.dct[idx];
	uint8_t *q = dc_page_ptr(s->dc_arena, t.page);
	rec_find(s, index_of(s, t.number) + 1)->aux = idx;
	memset(dct, 0, sizeof(*dct));
	dct->dctn = t.number;
	dct->rx_slots = kDcRxHold;
	dct->rx_stride = kDcRxStride;
	dct->srq.wqes = q;
	dct->srq.dbrec = t.srq_dbrec;
	dct->srq.log_wqes = kDcSrqLogWqes;
	dct->srq.stride = kDcSrqStride;
	dct->srq.buf = q + kDcRxBufOff;
	dct->srq.lkey = t.lkey;
	dct->handle = (uint64_t(gen) << 32) | idx;
}

int
sim_dct_create(mlx5_qpn_backend *be, const mlx5_qpn_dc_cq_info *cq, uint64_t dc_key,
	       const mlx5_qpn_dc_path *path, mlx5_qpn_dc_dct_info *dct)
{
	uint8_t st = 0;
	if ((cq == nullptr) || (dct == nullptr) || !handle_ok(cq->handle, kDcMaxCq))
		return -EINVAL;
	if ((be != nullptr) && !to_dev(be)->dc_off && path_check(to_dev(be), path, "DCT") != 0)
		return -EINVAL;
	int rc = dc_cmd_begin(be, CMD_CREATE, &st);
	if (rc)
		return rc;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	SimDc *dc = &s->dc;
	uint32_t cqi = uint32_t(cq->handle);
	if (!st && !cq_is_mine(dc, d, cq->handle))
		rc = -EINVAL;
	uint32_t number = 0;
	if (!st && !rc)
		st = qp_alloc_locked(d, REC_DCT, 0, &number);
	if (!st && !rc) {
		uint32_t idx = 0, gen = ++s->gen_next;
		/* The region key of the DCT's receive buffers: its generation, as an MR's key
		 * is unique while it lives. */
		rc = dc_dct_create(dc, s->dc_arena, d->slot, gen, number, cqi, dc_key, gen, &idx);
		if (rc)
			dc_qpn_free(d, number, REC_DCT);
		else
			dct_info_fill(s, idx, gen, dct);
	}
	return dc_cmd_end(d, st, rc, "CREATE_DCT");
}

int
sim_dct_destroy(mlx5_qpn_backend *be, const mlx5_qpn_dc_dct_info *dct)
{
	if (dct == nullptr)
		return -EINVAL;
	return dc_qp_destroy_cmd(be, dct->handle, kDcMaxDct, REC_DCT, "DESTROY_DCT");
}

int
sim_dc_execute(mlx5_qpn_backend *be)
{
	if (be == nullptr)
		return -EINVAL;
	SimDev *d = to_dev(be);
	if (d->dc_off)
		return -EOPNOTSUPP;
	SimShm *s = d->shm;
	if (std::atomic_ref<uint32_t>(s->dc.nb_active).load(std::memory_order_acquire) == 0)
		return 0;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	rc = dc_execute(&s->dc, s->dc_arena, dct_lookup, s, s->cfg.dc_err_every);
	dev_unlock(s);
	return rc;
}

/*
 * The emulated device's address handle: the AV built in software as rdma-core builds an IB one
 * (mlx5_qpn_av_build). The device delivers by DCT number inside its shared memory, so the route
 * is carried, not used; no firmware command, nothing to free.
 */
int
sim_ah_create(mlx5_qpn_backend *be, const mlx5_qpn_dc_addr *addr, mlx5_qpn_dc_ah_info *ah)
{
	if ((be == nullptr) || (addr == nullptr) || (ah == nullptr))
		return -EINVAL;
	if (to_dev(be)->dc_off)
		return -EOPNOTSUPP;
	memset(ah, 0, sizeof(*ah));
	mlx5_qpn_av_build(ah->av, addr->dlid, addr->sl, addr->is_global, addr->sgid_index,
			  addr->dgid, addr->hop_limit, addr->traffic_class, addr->flow_label);
	return 0;
}

int
sim_ah_destroy(mlx5_qpn_backend *be, const mlx5_qpn_dc_ah_info *ah)
{
	return (be != nullptr) && (ah != nullptr) ? 0 : -EINVAL;
}

} // namespace

} // namespace mlx5_qpn_sim

extern "C" {

const struct mlx5_qpn_dc_ops mlx5_qpn_sim_dc_ops = {
	.cq_create = sim_cq_create,
	.cq_destroy = sim_cq_destroy,
	.dci_create = sim_dci_create,
	.dci_reset = sim_dci_reset,
	.dci_destroy = sim_dci_destroy,
	.dct_create = sim_dct_create,
	.dct_destroy = sim_dct_destroy,
	.execute = sim_dc_execute,
	.poll = mlx5_qpn_sim_poll,
	.ah_create = sim_ah_create,
	.ah_destroy = sim_ah_destroy,
};

int
mlx5_qpn_sim_dc_enable(struct mlx5_qpn_backend *be, int on)
{
	if ((be == nullptr) || (on != 0 && on != 1))
		return -EINVAL;
	to_dev(be)->dc_off = (on == 0);
	return 0;
}

} /* extern "C" */
