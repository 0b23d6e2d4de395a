/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DC data path, driver side: what rdma-core's mlx5 provider does for a DCI, a DCT and a CQ,
 * over queues the backend hands out. Posting builds mlx5 send WQEs in the SQ ring, ringing
 * publishes the send counter in the doorbell record and writes the first 8 bytes of the last
 * control segment to the UAR register, polling reads CQEs by their owner bit and publishes the
 * consumer index. None of these three calls takes a lock or calls into the device.
 *
 * The device is reached through its backend's ops table alone (mlx5_qpn_dev_ops::dc, see
 * mlx5_qpn_dc_ops.h): create/destroy and the execution step. A backend whose table has no DC
 * part answers -EOPNOTSUPP. The route of each send is an address handle's AV
 * (dc/mlx5_qpn_ah.cpp), copied into the WQE. A DCT receives through an SRQ whose WQEs this
 * layer posts (dc/mlx5_qpn_dc_rx.cpp), on every backend.
 *
 * One way to drive a device: a device that executes WQEs in software has an execute op in its
 * table, and mlx5_qpn_cq_poll() runs one execution step before it reads the ring, as a ConnectX
 * would have progressed meanwhile; a table without one (hardware) costs one predicted branch.
 * So the loop an application writes for hardware (post, ring, poll) drives every backend, in
 * any process, with or without EAL service lcores; mlx5_qpn_dev_service_run() is the same
 * step without a CQ, a no-op on hardware.
 *
 * Memory shared with the device (rings, doorbell records, the UAR register) is written and read
 * with std::atomic_ref: on the emulated device it is another process's memory too.
 */
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include <atomic>

#include <rte_atomic.h>
#include <rte_common.h>
#include <rte_log.h>

#include "mlx5_qpn_log.h"

#include "mlx5_qpn_dc.h"
#include "mlx5_qpn_dc_ops.h"
#include "mlx5_qpn_ops.h"
#include "mlx5_qpn_prm_wqe.h"
#include "mlx5_qpn_ah.h"
#include "mlx5_qpn_dc_be.h"
#include "mlx5_qpn_dc_priv.h"

RTE_LOG_REGISTER(mlx5_qpn_dc_logtype, mlx5_qpn.dc, INFO);

#define DC_LOG(level, ...) MLX5_QPN_LOG(dc, level, __VA_ARGS__)

static_assert(MLX5_QPN_CQE_REQ == MLX5_QPN_PRM_CQE_REQ, "CQE opcode");
static_assert(MLX5_QPN_CQE_RESP_SEND == MLX5_QPN_PRM_CQE_RESP_SEND, "CQE opcode");
static_assert(MLX5_QPN_CQE_REQ_ERR == MLX5_QPN_PRM_CQE_REQ_ERR, "CQE opcode");
static_assert(MLX5_QPN_CQE_RESP_ERR == MLX5_QPN_PRM_CQE_RESP_ERR, "CQE opcode");
static_assert(MLX5_QPN_DC_MAX_INLINE == MLX5_QPN_WQE_MAX_INLINE, "inline limit");
static_assert(std::atomic_ref<uint8_t>::is_always_lock_free &&
		      std::atomic_ref<uint32_t>::is_always_lock_free &&
		      std::atomic_ref<uint64_t>::is_always_lock_free,
	      "queues may be shared memory: lock-free atomics only");

namespace {

/* Largest log2 of a send queue in WQEs; the ring has 8 BBs per WQE (the largest SEND has 6). */
constexpr uint32_t kLogSqMax = 12;
constexpr uint32_t kSqBbShift = 3;

using mlx5_qpn_dc::load_shared;

} // namespace


namespace {

uint32_t
map_slot(uint32_t qpn, uint32_t cap)
{
	return (qpn * 0x9e3779b1u) & (cap - 1);
}

bool
map_insert(mlx5_qpn_cq *cq, mlx5_qpn_dci *dci)
{
	if ((cq->map_used + 1) * 2 > cq->map_cap) {
		uint32_t cap = cq->map_cap ? cq->map_cap * 2 : 16;
		auto **m = new (std::nothrow) mlx5_qpn_dci *[cap]();
		if (m == nullptr)
			return false;
		for (uint32_t i = 0; i < cq->map_cap; i++) {
			mlx5_qpn_dci *x = cq->map[i];
			if (x == nullptr)
				continue;
			uint32_t j = map_slot(x->info.qpn, cap);
			while (m[j] != nullptr)
				j = (j + 1) & (cap - 1);
			m[j] = x;
		}
		delete[] cq->map;
		cq->map = m;
		cq->map_cap = cap;
	}
	uint32_t j = map_slot(dci->info.qpn, cq->map_cap);
	while (cq->map[j] != nullptr)
		j = (j + 1) & (cq->map_cap - 1);
	cq->map[j] = dci;
	cq->map_used++;
	return true;
}

mlx5_qpn_dci *
map_find(mlx5_qpn_cq *cq, uint32_t qpn)
{
	if ((cq->last != nullptr) && cq->last->info.qpn == qpn)
		return cq->last;
	if (!cq->map_cap)
		return nullptr;
	for (uint32_t j = map_slot(qpn, cq->map_cap);; j = (j + 1) & (cq->map_cap - 1)) {
		mlx5_qpn_dci *x = cq->map[j];
		if (x == nullptr)
			return nullptr;
		if (x->info.qpn == qpn) {
			cq->last = x;
			return x;
		}
	}
}

void
map_remove(mlx5_qpn_cq *cq, mlx5_qpn_dci *dci)
{
	if (cq->last == dci)
		cq->last = nullptr;
	if (!cq->map_cap)
		return;
	uint32_t mask = cq->map_cap - 1;
	uint32_t i = map_slot(dci->info.qpn, cq->map_cap);
	while ((cq->map[i] != nullptr) && cq->map[i] != dci)
		i = (i + 1) & mask;
	if (cq->map[i] == nullptr)
		return;
	/* Backward-shift deletion keeps every probe chain unbroken. */
	cq->map[i] = nullptr;
	for (uint32_t j = (i + 1) & mask; cq->map[j] != nullptr; j = (j + 1) & mask) {
		uint32_t k = map_slot(cq->map[j]->info.qpn, cq->map_cap);
		bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
		if (stays)
			continue;
		cq->map[i] = cq->map[j];
		cq->map[j] = nullptr;
		i = j;
	}
	cq->map_used--;
}

/*
 * Is there a DC table with every op named? If not, one line naming the call, unless what is
 * NULL: the service body, which a loop may call on any device, stays quiet.
 */
template <typename... Fn>
bool
dc_has(const mlx5_qpn_dc_ops *dc, const char *what, Fn mlx5_qpn_dc_ops::*...op)
{
	bool ok = dc != nullptr && ((dc->*op != nullptr) && ...);
	if (!ok && what)
		DC_LOG(ERR, "%s: not supported: the backend has no DC op for it", what);
	return ok;
}

const mlx5_qpn_dc_ops *
dc_of(const mlx5_qpn_backend *be)
{
	return be->ops != nullptr ? be->ops->dc : nullptr;
}

/* The backend of a device with a data path, or NULL (and why, in *rc). */
mlx5_qpn_backend *
dc_backend(mlx5_qpn_dev *dev, const char *what, int *rc)
{
	mlx5_qpn_backend *be = dev != nullptr ? mlx5_qpn_dev_backend(dev) : nullptr;

	if (be == nullptr) {
		*rc = -EINVAL;
		return nullptr;
	}
	if (!dc_has(dc_of(be), what)) {
		*rc = -EOPNOTSUPP;
		return nullptr;
	}
	*rc = 0;
	return be;
}

/* One execution step of a device that executes WQEs in software. An error (a device that cannot
 * run now) leaves the CQ as it is: what is in it is still read. */
[[gnu::noinline, gnu::cold]] void
device_step(mlx5_qpn_cq *cq)
{
	cq->exec(cq->be);
}

} // namespace

extern "C" {

int
mlx5_qpn_cq_create_be(struct mlx5_qpn_backend *be, uint32_t log_depth, struct mlx5_qpn_cq **cq)
{
	if ((be == nullptr) || (cq == nullptr))
		return -EINVAL;
	const mlx5_qpn_dc_ops *dc = dc_of(be);
	if (!dc_has(dc, "cq_create", &mlx5_qpn_dc_ops::cq_create, &mlx5_qpn_dc_ops::cq_destroy))
		return -EOPNOTSUPP;
	if (log_depth < 1 || log_depth > 16) {
		DC_LOG(ERR, "CQ log_depth %u outside [1, 16]", log_depth);
		return -EINVAL;
	}
	auto *c = new (std::nothrow) mlx5_qpn_cq();
	if (c == nullptr)
		return -ENOMEM;
	int rc = dc->cq_create(be, log_depth, &c->info);
	if (rc) {
		delete c;
		return rc;
	}
	c->be = be;
	c->dc = dc;
	c->exec = dc->execute;
	c->ring = static_cast<uint8_t *>(c->info.ring);
	c->dbrec = c->info.dbrec;
	c->log_depth = c->info.log_depth; /* what the device made (rdma-core may round up) */
	*cq = c;
	return 0;
}

int
mlx5_qpn_cq_create(struct mlx5_qpn_dev *dev, uint32_t log_depth, struct mlx5_qpn_cq **cq)
{
	int rc;
	mlx5_qpn_backend *be = dc_backend(dev, "cq_create", &rc);

	if (be == nullptr)
		return rc;
	return mlx5_qpn_cq_create_be(be, log_depth, cq);
}

void
mlx5_qpn_cq_destroy(struct mlx5_qpn_cq *cq)
{
	if (cq == nullptr)
		return;
	if (cq->nb_qps) {
		/* Freeing it would let the device write completions into reused memory. */
		DC_LOG(ERR, "CQ %u is still used by %u QPs: not destroyed", cq->info.cqn,
		       cq->nb_qps);
		return;
	}
	int rc = cq->dc->cq_destroy(cq->be, &cq->info);
	if (rc)
		DC_LOG(ERR, "CQ %u: device refused to destroy it: %s", cq->info.cqn, strerror(-rc));
	delete[] cq->map;
	delete cq;
}

int
mlx5_qpn_cq_poll(struct mlx5_qpn_cq *cq, struct mlx5_qpn_wc *wc, unsigned int n)
{
	if ((cq == nullptr) || ((wc == nullptr) && n))
		return -EINVAL;
	uint32_t mask = (uint32_t(1) << cq->log_depth) - 1;
	unsigned int k = 0;

	/* The device's progress (mlx5_qpn_dc_ops.h: a table property), out of line so that a
	 * table without it (hardware) pays one test. */
	if (cq->exec != nullptr) [[unlikely]]
		device_step(cq);
	for (; k < n; k++) {
		uint8_t *cqe = cq->ring + size_t(cq->ci & mask) * MLX5_QPN_CQE_SIZE;
		uint8_t op_own = load_shared(cqe[MLX5_QPN_CQE_OFF_OP_OWN],
					     std::memory_order_acquire);
		if (!mlx5_qpn_cqe_is_sw_owned(op_own, cq->ci, cq->log_depth))
			break;
		mlx5_qpn_cqe_fields f;
		mlx5_qpn_cqe_parse(cqe, op_own, &f);
		mlx5_qpn_wc &w = wc[k];
		w.wr_id = 0;
		w.qpn = f.qpn;
		w.src_qpn = 0;
		w.byte_len = f.byte_cnt;
		w.wqe_counter = f.wqe_counter;
		w.opcode = f.opcode;
		w.syndrome = f.syndrome;
		if (f.opcode == MLX5_QPN_CQE_REQ || f.opcode == MLX5_QPN_CQE_REQ_ERR) {
			mlx5_qpn_dci *d = map_find(cq, f.qpn);
			if (d != nullptr) {
				w.wr_id = d->wrid[f.wqe_counter & d->bb_mask];
				/* An error CQE means the device moved the DCI to ERR: its
				 * later WQEs flush until mlx5_qpn_dci_recover(). Stored
				 * before the completion count, so that whoever sees every WQE
				 * completed also sees the state. */
				if (f.opcode == MLX5_QPN_CQE_REQ_ERR)
					std::atomic_ref<uint32_t>(d->state)
						.store(MLX5_QPN_DCI_ERROR,
						       std::memory_order_release);
				/* Every WQE completes exactly once (all are signaled; errors
				 * always complete): its SQ room is free again. */
				std::atomic_ref<uint32_t>(d->completed)
					.store(d->completed + 1, std::memory_order_release);
			}
			if (f.opcode == MLX5_QPN_CQE_REQ_ERR)
				w.byte_len = 0;
		} else {
			w.src_qpn = f.src_qpn;
			if (cq->rx_dcts != nullptr) /* a DCT completes on this CQ */
				mlx5_qpn_dc::rx_complete(cq, cqe, op_own, &f, &w);
		}
		cq->ci++;
	}
	if (k)
		std::atomic_ref<uint32_t>(cq->dbrec[MLX5_QPN_CQ_SET_CI])
			.store(rte_cpu_to_be_32(cq->ci & 0xffffff), std::memory_order_release);
	return int(k);
}

int
mlx5_qpn_dct_create_cq(struct mlx5_qpn_cq *cq, uint64_t dc_key, struct mlx5_qpn_dct **dct)
{
	return mlx5_qpn_dct_create_cq_path(cq, dc_key, nullptr, dct);
}

int
mlx5_qpn_dct_create_cq_path(struct mlx5_qpn_cq *cq, uint64_t dc_key,
			    const struct mlx5_qpn_dc_path *path, struct mlx5_qpn_dct **dct)
{
	if ((cq == nullptr) || (dct == nullptr))
		return -EINVAL;
	if (!dc_has(cq->dc, "dct_create", &mlx5_qpn_dc_ops::dct_create,
		    &mlx5_qpn_dc_ops::dct_destroy))
		return -EOPNOTSUPP;
	auto *t = new (std::nothrow) mlx5_qpn_dct();
	if (t == nullptr)
		return -ENOMEM;
	int rc = cq->dc->dct_create(cq->be, &cq->info, dc_key, path, &t->info);
	if (rc) {
		delete t;
		return rc;
	}
	t->cq = cq;
	if ((rc = mlx5_qpn_dc::rx_init(t)) != 0) {
		cq->dc->dct_destroy(cq->be, &t->info);
		delete t;
		return rc;
	}
	cq->nb_qps++;
	*dct = t;
	return 0;
}

int
mlx5_qpn_dct_create(struct mlx5_qpn_dev *dev, struct mlx5_qpn_cq *cq, uint64_t dc_key,
		    struct mlx5_qpn_dct **dct)
{
	return mlx5_qpn_dct_create_path(dev, cq, dc_key, nullptr, dct);
}

int
mlx5_qpn_dct_create_path(struct mlx5_qpn_dev *dev, struct mlx5_qpn_cq *cq, uint64_t dc_key,
			 const struct mlx5_qpn_dc_path *path, struct mlx5_qpn_dct **dct)
{
	int rc;
	mlx5_qpn_backend *be = dc_backend(dev, "dct_create", &rc);

	if (be == nullptr)
		return rc;
	if ((cq == nullptr) || cq->be != be) {
		DC_LOG(ERR, "dct_create: the CQ is not one of this device");
		return -EINVAL;
	}
	return mlx5_qpn_dct_create_cq_path(cq, dc_key, path, dct);
}

uint32_t
mlx5_qpn_dct_qpn(const struct mlx5_qpn_dct *dct)
{
	return dct != nullptr ? dct->info.dctn : 0;
}

/* The 2.1 ABI's name: the same function under a second symbol (mlx5_qpn_dc.h). */
uint32_t mlx5_qpn_dct_number(const struct mlx5_qpn_dct *dct)
	__attribute__((alias("mlx5_qpn_dct_qpn")));

void
mlx5_qpn_dct_destroy(struct mlx5_qpn_dct *dct)
{
	if (dct == nullptr)
		return;
	mlx5_qpn_dc::rx_fini(dct);
	int rc = dct->cq->dc->dct_destroy(dct->cq->be, &dct->info);
	if (rc)
		DC_LOG(ERR, "DCT 0x%x: device refused to destroy it: %s", dct->info.dctn,
		       strerror(-rc));
	dct->cq->nb_qps--;
	delete dct;
}

int
mlx5_qpn_dct_read(const struct mlx5_qpn_dct *dct, uint16_t wqe_counter, void *buf, uint32_t len)
{
	if ((dct == nullptr) || ((buf == nullptr) && len))
		return -EINVAL;
	return mlx5_qpn_dc::rx_read(dct, wqe_counter, buf, len);
}

int
mlx5_qpn_dci_create_cq(struct mlx5_qpn_cq *cq, uint32_t log_sq_depth, struct mlx5_qpn_dci **dci)
{
	return mlx5_qpn_dci_create_cq_path(cq, log_sq_depth, nullptr, dci);
}

int
mlx5_qpn_dci_create_cq_path(struct mlx5_qpn_cq *cq, uint32_t log_sq_depth,
			    const struct mlx5_qpn_dc_path *path, struct mlx5_qpn_dci **dci)
{
	if ((cq == nullptr) || (dci == nullptr))
		return -EINVAL;
	if (!dc_has(cq->dc, "dci_create", &mlx5_qpn_dc_ops::dci_create,
		    &mlx5_qpn_dc_ops::dci_destroy))
		return -EOPNOTSUPP;
	if (log_sq_depth > kLogSqMax) {
		DC_LOG(ERR, "DCI log_sq_depth %u above %u", log_sq_depth, kLogSqMax);
		return -EINVAL;
	}
	uint32_t log_bbs = log_sq_depth + kSqBbShift;
	/* Every WQE of every DCI on the CQ completes into it (all are signaled): their sum must
	 * fit the CQ, or a burst overruns it. */
	const uint64_t room = uint64_t(1) << cq->log_depth;
	if (cq->dci_wqes + (uint64_t(1) << log_sq_depth) > room) {
		DC_LOG(ERR,
		       "CQ %u of %llu CQEs cannot take a DCI of %llu WQEs: its DCIs have %u "
		       "outstanding at most already (a CQ overrun stops the CQ); use a larger CQ",
		       cq->info.cqn, static_cast<unsigned long long>(room),
		       static_cast<unsigned long long>(uint64_t(1) << log_sq_depth), cq->dci_wqes);
		return -ENOSPC;
	}
	auto *d = new (std::nothrow) mlx5_qpn_dci();
	if (d == nullptr)
		return -ENOMEM;
	int rc = cq->dc->dci_create(cq->be, &cq->info, log_bbs, path, &d->info);
	if (rc) {
		delete d;
		return rc;
	}
	/* The ring is what the backend made (rdma-core rounds a DCI's SQ up): at least what was
	 * asked, and the BB counter wraps at its size. */
	if (d->info.log_sq_bbs < log_bbs || d->info.log_sq_bbs > 16 || d->info.max_inline == 0 ||
	    d->info.max_inline > MLX5_QPN_DC_MAX_INLINE)
		rc = -ENOMEM;
	else
		d->wrid = new (std::nothrow) uint64_t[size_t(1) << d->info.log_sq_bbs]();
	if (rc || (d->wrid == nullptr) || !map_insert(cq, d)) {
		if (rc)
			DC_LOG(ERR, "DCI 0x%x: SQ of 2^%u BBs (2^%u asked), %u inline bytes",
			       d->info.qpn, d->info.log_sq_bbs, log_bbs, d->info.max_inline);
		cq->dc->dci_destroy(cq->be, &d->info);
		delete[] d->wrid;
		delete d;
		return -ENOMEM;
	}
	d->cq = cq;
	if (path != nullptr) {
		d->has_path = true;
		d->path = *path;
	}
	d->sq = static_cast<uint8_t *>(d->info.sq);
	d->bb_mask = (uint32_t(1) << d->info.log_sq_bbs) - 1;
	d->max_wqes = uint32_t(1) << log_sq_depth;
	cq->dci_wqes += d->max_wqes;
	cq->nb_qps++;
	*dci = d;
	return 0;
}

int
mlx5_qpn_dci_create(struct mlx5_qpn_dev *dev, struct mlx5_qpn_cq *cq, uint32_t log_sq_depth,
		    struct mlx5_qpn_dci **dci)
{
	return mlx5_qpn_dci_create_path(dev, cq, log_sq_depth, nullptr, dci);
}

int
mlx5_qpn_dci_create_path(struct mlx5_qpn_dev *dev, struct mlx5_qpn_cq *cq, uint32_t log_sq_depth,
			 const struct mlx5_qpn_dc_path *path, struct mlx5_qpn_dci **dci)
{
	int rc;
	mlx5_qpn_backend *be = dc_backend(dev, "dci_create", &rc);

	if (be == nullptr)
		return rc;
	if ((cq == nullptr) || cq->be != be) {
		DC_LOG(ERR, "dci_create: the CQ is not one of this device");
		return -EINVAL;
	}
	return mlx5_qpn_dci_create_cq_path(cq, log_sq_depth, path, dci);
}

uint32_t
mlx5_qpn_dci_qpn(const struct mlx5_qpn_dci *dci)
{
	return dci != nullptr ? dci->info.qpn : 0;
}

uint32_t
mlx5_qpn_dci_max_inline(const struct mlx5_qpn_dci *dci)
{
	return dci != nullptr ? dci->info.max_inline : 0;
}

int
mlx5_qpn_dci_post_send(struct mlx5_qpn_dci *dci, const struct mlx5_qpn_ah *ah, uint32_t dctn,
		       uint64_t dc_key, const void *buf, uint32_t len, uint64_t wr_id)
{
	if ((dci == nullptr) || len > dci->info.max_inline || ((buf == nullptr) && len) ||
	    dctn > 0xffffff)
		return -EINVAL;
	/* Never a zero route (a fabric routes by it; the emulated device refuses it too, so that
	 * what runs there runs on a ConnectX); never another device's AV. */
	if ((ah == nullptr) || ah->be != dci->cq->be)
		return -EINVAL;
	/* A DCI in ERR would only flush the WQE: refuse it here, so that nothing is posted
	 * until mlx5_qpn_dci_recover(). */
	if (load_shared(dci->state, std::memory_order_acquire) != MLX5_QPN_DCI_READY)
		return -EIO;
	if (dci->posted - load_shared(dci->completed, std::memory_order_acquire) >= dci->max_wqes)
		return mlx5_qpn_dc::sq_full(dci);
	alignas(16) uint8_t wqe[MLX5_QPN_WQE_MAX_BBS * MLX5_QPN_SEND_WQE_BB];
	int ds = mlx5_qpn_wqe_build_dc_send_av(wqe, uint16_t(dci->pi_bb), dci->info.qpn,
					       ah->info.av, dctn, dc_key, buf, len,
					       MLX5_QPN_WQE_CTRL_CQ_UPDATE);
	if (ds < 0)
		return ds;
	uint32_t nbb = mlx5_qpn_wqe_bbs(uint32_t(ds));
	size_t bytes = size_t(ds) * MLX5_QPN_SEND_WQE_DS;
	/* BB by BB: a WQE that runs past the end of the ring continues at its start. */
	for (uint32_t i = 0; i < nbb; i++) {
		size_t off = size_t(i) * MLX5_QPN_SEND_WQE_BB;
		size_t chunk = RTE_MIN(size_t(MLX5_QPN_SEND_WQE_BB), bytes - off);
		memcpy(dci->sq + size_t((dci->pi_bb + i) & dci->bb_mask) * MLX5_QPN_SEND_WQE_BB,
		       wqe + off, chunk);
	}
	dci->wrid[dci->pi_bb & dci->bb_mask] = wr_id;
	memcpy(dci->last_ctrl, wqe, sizeof(dci->last_ctrl));
	dci->pi_bb += nbb;
	dci->posted++;
	return 0;
}

void
mlx5_qpn_dci_ring(struct mlx5_qpn_dci *dci)
{
	if ((dci == nullptr) || dci->pi_bb == dci->rung_bb)
		return;
	/*
	 * DPDK's mlx5_doorbell_ring() (drivers/common/mlx5/mlx5_common.h), step by step: the WQEs
	 * reach memory before the record (rte_io_wmb: the device reads the ring by DMA once it
	 * sees the record), the record before the register (rte_wmb: the register write is MMIO,
	 * which a weaker barrier does not order against normal stores on every architecture),
	 * and a write-combining (BlueFlame) register is flushed out of the WC buffer (rte_wmb)
	 * so the doorbell is not held back behind later stores. The atomics keep the emulated
	 * device, which reads the same words from another thread, race-free.
	 */
	rte_io_wmb();
	std::atomic_ref<uint32_t>(dci->info.dbrec[MLX5_QPN_SND_DBR])
		.store(rte_cpu_to_be_32(dci->pi_bb & 0xffff), std::memory_order_release);
	rte_wmb();
	uint64_t v;
	memcpy(&v, dci->last_ctrl, sizeof(v));
	std::atomic_ref<uint64_t>(*static_cast<uint64_t *>(dci->info.uar_reg))
		.store(v, std::memory_order_release);
	if (dci->info.flags & MLX5_QPN_DC_DCI_UAR_WC)
		rte_wmb();
	dci->rung_bb = dci->pi_bb;
}

void
mlx5_qpn_dci_destroy(struct mlx5_qpn_dci *dci)
{
	if (dci == nullptr)
		return;
	int rc = dci->cq->dc->dci_destroy(dci->cq->be, &dci->info);
	if (rc)
		DC_LOG(ERR, "DCI 0x%x: device refused to destroy it: %s", dci->info.qpn,
		       strerror(-rc));
	map_remove(dci->cq, dci);
	dci->cq->dci_wqes -= dci->max_wqes;
	dci->cq->nb_qps--;
	delete[] dci->wrid;
	delete dci;
}

int
mlx5_qpn_dc_service_run_be(struct mlx5_qpn_backend *be)
{
	if (be == nullptr)
		return -EINVAL;
	const mlx5_qpn_dc_ops *dc = dc_of(be);
	/* Quiet (what = NULL): a loop may call this on any device. */
	if (!dc_has(dc, nullptr))
		return -EOPNOTSUPP;
	if (dc->execute == nullptr)
		return 0; /* the device executes WQEs itself (hardware) */
	int rc = dc->execute(be);
	if (rc < 0)
		return rc;
	/* Count the doorbell writes too, as the doorbell service does. */
	if (dc->poll != nullptr)
		dc->poll(be);
	return rc;
}

int
mlx5_qpn_dev_service_run(struct mlx5_qpn_dev *dev)
{
	int rc;
	mlx5_qpn_backend *be = dc_backend(dev, nullptr, &rc);

	if (be == nullptr)
		return rc;
	return mlx5_qpn_dc_service_run_be(be);
}

} /* extern "C" */
