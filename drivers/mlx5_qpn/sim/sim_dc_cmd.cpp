/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's DC commands, its DC ops table (mlx5_qpn_sim_dc_ops): create and destroy
 * of CQs, DCIs and DCTs, and the execution step. Each is a firmware command (device mutex,
 * counted, subject to fault injection); DCI and DCT numbers are ordinary QPs of the QPN table
 * (records of kind REC_DCI/REC_DCT). The DC tables and the queue arena are sim_dc.cpp's, WQE
 * execution sim_dc_exec.cpp's.
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

/*
 * One DC command: begin (checks, mutex, firmware accounting), the body under the device mutex,
 * end (status -> errno, one line, mutex released). A create or modify (Fw::MAY_FAIL) runs its
 * body only if the firmware took the command, and the body may set *st to a firmware status;
 * a destroy (Fw::NEVER_FAILS) always runs, as a dying process's objects must go.
 * body(SimDev *, uint8_t *st) returns 0 or a negative errno.
 */
enum class Fw { MAY_FAIL, NEVER_FAILS };

template <typename Body>
int
dc_cmd(mlx5_qpn_backend *be, CmdKind kind, Fw fw, const char *what, Body body)
{
	uint8_t st = 0;
	int rc = dc_cmd_begin(be, kind, &st);
	if (rc)
		return rc;
	SimDev *d = to_dev(be);
	if (fw == Fw::NEVER_FAILS)
		st = 0;
	if (!st)
		rc = body(d, &st);
	return dc_cmd_end(d, st, rc, what);
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
	if (cq == nullptr)
		return -EINVAL;
	if ((be != nullptr) && (log_depth < 1 || log_depth > kDcLogCqMax)) {
		SIM_LOG(ERR, "device %s: CQ log_depth %u outside [1, %u]", to_dev(be)->name,
			log_depth, kDcLogCqMax);
		return -EINVAL;
	}
	return dc_cmd(be, CMD_CREATE, Fw::MAY_FAIL, "CREATE_CQ", [&](SimDev *d, uint8_t *) {
		SimShm *s = d->shm;
		uint32_t idx = 0, gen = ++s->gen_next;
		int rc = dc_cq_create(&s->dc, s->dc_arena, d->slot, gen, log_depth, &idx);
		if (rc == 0) {
			memset(cq, 0, sizeof(*cq));
			cq->ring = dc_page_ptr(s->dc_arena, s->dc.cq[idx].page);
			cq->dbrec = s->dc.cq[idx].dbrec;
			cq->log_depth = log_depth;
			cq->cqn = idx;
			cq->handle = (uint64_t(gen) << 32) | idx;
		}
		return rc;
	});
}

int
sim_cq_destroy(mlx5_qpn_backend *be, const mlx5_qpn_dc_cq_info *cq)
{
	if ((cq == nullptr) || !handle_ok(cq->handle, kDcMaxCq))
		return -EINVAL;
	return dc_cmd(be, CMD_DESTROY, Fw::NEVER_FAILS, "DESTROY_CQ", [&](SimDev *d, uint8_t *) {
		return dc_cq_destroy(&d->shm->dc, d->slot, uint32_t(cq->handle),
				     uint32_t(cq->handle >> 32));
	});
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
	if (!handle_ok(handle, max))
		return -EINVAL;
	return dc_cmd(be, CMD_DESTROY, Fw::NEVER_FAILS, what, [&](SimDev *d, uint8_t *) {
		SimDc *dc = &d->shm->dc;
		uint32_t idx = uint32_t(handle), gen = uint32_t(handle >> 32);
		uint32_t qpn = rec == REC_DCI ? dc->dci[idx].qpn : dc->dct[idx].number;
		int rc = rec == REC_DCI ? dc_dci_destroy(dc, d->slot, idx, gen) :
					  dc_dct_destroy(dc, d->slot, idx, gen);
		if (rc == 0)
			dc_qpn_free(d, qpn, rec);
		return rc;
	});
}

/*
 * CREATE of a DCI or DCT (rec says which) on a CQ of this handle: its number from the QPN table
 * (a firmware status if none is left), then the queue, make(d, qpn, gen) -> 0 or a negative
 * errno; the number goes back to the table if the queue cannot be made.
 */
template <typename Make>
int
dc_qp_create_cmd(mlx5_qpn_backend *be, uint64_t cq_handle, uint8_t rec, const char *what, Make make)
{
	return dc_cmd(be, CMD_CREATE, Fw::MAY_FAIL, what, [&](SimDev *d, uint8_t *st) {
		if (!cq_is_mine(&d->shm->dc, d, cq_handle))
			return -EINVAL;
		uint32_t qpn = 0;
		*st = qp_alloc_locked(d, rec, 0, &qpn);
		if (*st)
			return 0;
		int rc = make(d, qpn, ++d->shm->gen_next);
		if (rc)
			dc_qpn_free(d, qpn, rec);
		return rc;
	});
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

/* The DCI's queue on CQ cqi and what the DC layer drives it by. Mutex held. */
int
dci_make(SimDev *d, uint32_t cqi, uint32_t qpn, uint32_t gen, uint32_t log_sq_bbs,
	 mlx5_qpn_dc_dci_info *dci)
{
	SimShm *s = d->shm;
	SimDc *dc = &s->dc;
	uint32_t idx = 0;
	int rc = dc_dci_create(dc, s->dc_arena, d->slot, gen, qpn, cqi, log_sq_bbs,
			       d->dc_uar.page_id, &idx);
	if (rc)
		return rc;
	rec_find(s, index_of(s, qpn) + 1)->aux = idx;
	memset(dci, 0, sizeof(*dci));
	dci->qpn = qpn;
	dci->log_sq_bbs = log_sq_bbs;
	dci->sq = dc_page_ptr(s->dc_arena, dc->dci[idx].page);
	dci->dbrec = dc->dci[idx].dbrec;
	dci->uar_reg = d->dc_uar.reg_addr;
	dci->max_inline = MLX5_QPN_DC_MAX_INLINE;
	dci->handle = (uint64_t(gen) << 32) | idx;
	return 0;
}

int
sim_dci_create(mlx5_qpn_backend *be, const mlx5_qpn_dc_cq_info *cq, uint32_t log_sq_bbs,
	       const mlx5_qpn_dc_path *path, mlx5_qpn_dc_dci_info *dci)
{
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
	return dc_qp_create_cmd(be, cq->handle, REC_DCI, "CREATE_QP (DCI)",
				[&](SimDev *, uint32_t qpn, uint32_t gen) {
					return dci_make(d, uint32_t(cq->handle), qpn, gen,
							log_sq_bbs, dci);
				});
}

/* RESET -> INIT -> RTR (path) -> RTS of a DCI of this handle, as one command: out of ERR, its
 * queue restarted at BB 0 (sim_dc.h, dc_dci_reset). A modify may fail as a create may (the
 * firmware's fault injection applies): a ConnectX refuses MODIFY_QP too, and the DCI then stays
 * in ERR with its queue as it was. */
int
sim_dci_reset(mlx5_qpn_backend *be, const mlx5_qpn_dc_dci_info *dci, const mlx5_qpn_dc_path *path)
{
	if ((be == nullptr) || (dci == nullptr) || !handle_ok(dci->handle, kDcMaxDci))
		return -EINVAL;
	SimDev *d = to_dev(be);
	if (!d->dc_off && path_check(d, path, "DCI reset") != 0)
		return -EINVAL;
	return dc_cmd(be, CMD_MODIFY, Fw::MAY_FAIL, "MODIFY_QP (DCI RESET->RTS)",
		      [&](SimDev *, uint8_t *) {
			      return dc_dci_reset(&d->shm->dc, d->slot, uint32_t(dci->handle),
						  uint32_t(dci->handle >> 32));
		      });
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
	if ((cq == nullptr) || (dct == nullptr) || !handle_ok(cq->handle, kDcMaxCq))
		return -EINVAL;
	if ((be != nullptr) && !to_dev(be)->dc_off && path_check(to_dev(be), path, "DCT") != 0)
		return -EINVAL;
	return dc_qp_create_cmd(be, cq->handle, REC_DCT, "CREATE_DCT",
				[&](SimDev *d, uint32_t number, uint32_t gen) {
					SimShm *s = d->shm;
					uint32_t idx = 0;
					/* The region key of the DCT's receive buffers: its generation, as an MR's
			 * key is unique while it lives. */
					int rc = dc_dct_create(&s->dc, s->dc_arena, d->slot, gen,
							       number, uint32_t(cq->handle), dc_key,
							       gen, &idx);
					if (rc == 0)
						dct_info_fill(s, idx, gen, dct);
					return rc;
				});
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
