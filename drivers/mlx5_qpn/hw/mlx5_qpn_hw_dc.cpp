/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hardware backend's DC objects (see mlx5_qpn_hw_dc.h): rdma-core creates them, mlx5dv
 * hands out where their queues live, and the DC layer (dc/) posts, rings and polls in them.
 */
#include "mlx5_qpn_hw_dc.h"
#include "mlx5_qpn_hw_dc_path.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include <mutex>
#include <new>

#include "mlx5_qpn_glue.h"
#include "mlx5_qpn_hw_log.h"
#include "mlx5_qpn_hw_memlock.h"
#include "mlx5_qpn_hw_priv.h"
#include "mlx5_qpn_hw_sizing.h"

static_assert(sizeof(struct mlx5_wqe_av) == MLX5_QPN_DC_AH_AV_SIZE, "AV of rdma-core's size");
static_assert(MLX5_QPN_HW_DC_MAX_INLINE == MLX5_QPN_DC_MAX_INLINE, "inline limit");
static_assert(MLX5_QPN_HW_DC_RX_STRIDE >= MLX5_QPN_DC_MAX_INLINE, "a buffer holds any SEND");

namespace {

using namespace mlx5_qpn_hw;

/* The BB shift of a DC WQE slot: the DC layer gives each WQE 8 BBs (the largest SEND has 6). */
constexpr uint32_t kSqBbShift = 3;

mlx5_qpn_hw_dev *
to_dev(struct mlx5_qpn_backend *be)
{
	return reinterpret_cast<mlx5_qpn_hw_dev *>(be);
}

/* A verbs call that returned NULL: its errno, negated; -EIO when it set none. */
int
fail_errno()
{
	return errno > 0 ? -errno : -EIO;
}

/* Not the opener (a forked child): the objects are the parent's, destroy nothing. */
bool
not_owner(const mlx5_qpn_hw_dev *dev)
{
	return getpid() != dev->owner_pid;
}

template <typename T>
T *
from_handle(uint64_t h)
{
	return reinterpret_cast<T *>(static_cast<uintptr_t>(h));
}

/*
 * DESTROY of the one verbs object a handle names (a CQ, a DCI's QP, an AH) through the glue's
 * `verb`: -EINVAL without a handle; nothing in a forked child (the objects are the parent's);
 * else the verb's result as a negative errno.
 */
template <typename T, typename Info>
int
destroy_object(mlx5_qpn_backend *be, const Info *info, int (*mlx5_qpn_glue::*verb)(T *))
{
	if (be == nullptr || info == nullptr || info->handle == 0)
		return -EINVAL;
	const mlx5_qpn_hw_dev *dev = to_dev(be);
	if (not_owner(dev))
		return 0;
	return neg_errno((dev->glue->*verb)(from_handle<T>(info->handle)));
}

template <typename T>
uint64_t
to_handle(T *p)
{
	return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
}

int
log2_exact(uint32_t n)
{
	if (n == 0 || (n & (n - 1)) != 0)
		return -1;
	return __builtin_ctz(n);
}

/*
 * What the kernel pins for a queue of len bytes (ib_umem_get: whole pages) and its doorbell
 * record (a page of rdma-core's doorbell pool, counted whole: the pool may open a new one).
 * Checked before each DC object so that RLIMIT_MEMLOCK is named in one line, not met as an
 * ENOMEM from the Nth call.
 */
uint64_t
queue_pin(uint64_t len)
{
	return ((len + 4095) & ~uint64_t(4095)) + 4096;
}

/* Most inline bytes of this device's DCIs: what cmd_hca_cap.max_wqe_sz_sq_dc leaves. */
uint32_t
dci_max_inline(const mlx5_qpn_hw_dev *dev)
{
	return mlx5_qpn_hw_dc_max_inline(dev->max_wqe_sz_sq_dc, MLX5_QPN_HW_DC_MAX_INLINE);
}

/* The DC objects' PD, allocated on first use. */
struct ibv_pd *
dc_pd(mlx5_qpn_hw_dev *dev, int *rc)
{
	std::lock_guard<std::mutex> g(dev->dc_lock);
	errno = 0;
	if (dev->dc_pd == nullptr && (dev->dc_pd = dev->glue->alloc_pd(dev->ctx)) == nullptr) {
		*rc = fail_errno();
		HW_LOG(ERR, "%s: DC: ibv_alloc_pd failed (%s)", dev->name, strerror(-*rc));
	}
	return dev->dc_pd;
}

int
hw_cq_create(struct mlx5_qpn_backend *be, uint32_t log_depth, struct mlx5_qpn_dc_cq_info *cq)
{
	if (be == nullptr || cq == nullptr || log_depth < 1 || log_depth > 16)
		return -EINVAL;
	mlx5_qpn_hw_dev *dev = to_dev(be);
	int rc = mlx5_qpn_hw_memlock_check(dev->name, queue_pin(uint64_t(64) << log_depth),
					   "a DC completion queue");
	if (rc != 0)
		return rc;
	errno = 0;
	struct ibv_cq *c = dev->glue->create_cq(dev->ctx, (1 << log_depth) - 1, nullptr, nullptr,
						0);
	if (c == nullptr) {
		rc = fail_errno();
		HW_LOG(ERR, "%s: DC: ibv_create_cq failed (%s)", dev->name, strerror(-rc));
		return rc;
	}
	struct mlx5dv_cq dv;
	struct mlx5dv_obj obj;
	memset(&dv, 0, sizeof(dv));
	memset(&obj, 0, sizeof(obj));
	obj.cq.in = c;
	obj.cq.out = &dv;
	rc = neg_errno(dev->glue->dv_init_obj(&obj, MLX5DV_OBJ_CQ));
	int lg = log2_exact(dv.cqe_cnt);
	if (rc == 0 && (dv.cqe_size != 64 || lg < int(log_depth))) {
		/* The DC layer polls 64-byte CQEs (MLX5_CQE_SIZE=128 in the environment). */
		HW_LOG(ERR, "%s: DC: CQ of %u CQEs of %u bytes: 2^%u of 64 bytes needed", dev->name,
		       dv.cqe_cnt, dv.cqe_size, log_depth);
		rc = -ENOTSUP;
	}
	if (rc != 0) {
		dev->glue->destroy_cq(c);
		return rc;
	}
	memset(cq, 0, sizeof(*cq));
	cq->ring = dv.buf;
	cq->dbrec = reinterpret_cast<uint32_t *>(dv.dbrec);
	cq->log_depth = uint32_t(lg);
	cq->cqn = dv.cqn;
	cq->handle = to_handle(c);
	return 0;
}

int
hw_cq_destroy(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_cq_info *cq)
{
	return destroy_object(be, cq, &mlx5_qpn_glue::destroy_cq);
}

/* mlx5dv_create_qp + the state changes (rtr at RTR); the QP, or NULL and *rc. */
struct ibv_qp *
dc_qp_create(mlx5_qpn_hw_dev *dev, const struct mlx5_qpn_dc_cq_info *cq, struct ibv_srq *srq,
	     uint32_t log_sq_bbs, uint64_t dc_key, const dc_rtr &rtr, int *rc)
{
	struct ibv_pd *pd = dc_pd(dev, rc);
	if (pd == nullptr)
		return nullptr;
	struct ibv_qp_init_attr_ex attr;
	struct mlx5dv_qp_init_attr dv;
	mlx5_qpn_hw_dc_qp_attr(pd, from_handle<ibv_cq>(cq->handle), srq, log_sq_bbs, dc_key, &attr,
			       &dv);
	if (srq == nullptr)
		mlx5_qpn_hw_dc_dci_cap(log_sq_bbs, dci_max_inline(dev), &attr.cap);
	errno = 0;
	struct ibv_qp *qp = dev->glue->dv_create_qp(dev->ctx, &attr, &dv);
	const char *what = srq != nullptr ? "DCT" : "DCI";
	if (qp == nullptr) {
		*rc = fail_errno();
		HW_LOG(ERR, "%s: %s: mlx5dv_create_qp failed (%s)", dev->name, what,
		       strerror(-*rc));
		dc_host_refused(dev, srq != nullptr, *rc);
		return nullptr;
	}
	*rc = dc_to_ready(dev, qp, srq != nullptr, rtr);
	if (*rc != 0) {
		dev->glue->destroy_qp(qp);
		return nullptr;
	}
	return qp;
}

int
hw_dci_create(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_cq_info *cq,
	      uint32_t log_sq_bbs, const struct mlx5_qpn_dc_path *path,
	      struct mlx5_qpn_dc_dci_info *dci)
{
	if (be == nullptr || cq == nullptr || dci == nullptr || cq->handle == 0 ||
	    log_sq_bbs < kSqBbShift || log_sq_bbs > 16)
		return -EINVAL;
	mlx5_qpn_hw_dev *dev = to_dev(be);
	int rc = dc_host_check(dev, false, "DCI");
	if (rc != 0)
		return rc;
	const uint32_t max_inline = dci_max_inline(dev);
	if (max_inline == 0) {
		HW_LOG(ERR,
		       "%s: DCI: the firmware's largest DC send WQE (max_wqe_sz_sq_dc %u bytes) "
		       "holds no inline data",
		       dev->name, dev->max_wqe_sz_sq_dc);
		return -ENOTSUP;
	}
	dc_rtr rtr;
	rc = dc_resolve_path(dev, path, "DCI", &rtr);
	/* What libmlx5 pins for the ring: its own WQE size, not the ring asked for. */
	struct ibv_qp_cap cap;
	memset(&cap, 0, sizeof(cap));
	cap.max_send_sge = 1;
	mlx5_qpn_hw_dc_dci_cap(log_sq_bbs, max_inline, &cap);
	if (rc == 0)
		rc = mlx5_qpn_hw_memlock_check(dev->name,
					       queue_pin(mlx5_qpn_hw_dc_dci_ring_bytes(&cap)),
					       "a DCI's send queue");
	if (rc != 0)
		return rc;
	struct ibv_qp *qp = dc_qp_create(dev, cq, nullptr, log_sq_bbs, 0, rtr, &rc);
	if (qp == nullptr)
		return rc;
	struct mlx5dv_qp dv;
	struct mlx5dv_obj obj;
	memset(&dv, 0, sizeof(dv));
	memset(&obj, 0, sizeof(obj));
	obj.qp.in = qp;
	obj.qp.out = &dv;
	rc = neg_errno(dev->glue->dv_init_obj(&obj, MLX5DV_OBJ_QP));
	int lg = log2_exact(dv.sq.wqe_cnt);
	if (rc == 0 && (dv.sq.stride != 64 || lg < 0 || dv.bf.reg == nullptr)) {
		HW_LOG(ERR, "%s: DCI: SQ of %u WQEs of stride %u: a power of two of 64 needed",
		       dev->name, dv.sq.wqe_cnt, dv.sq.stride);
		rc = -ENOTSUP;
	}
	if (rc != 0) {
		dev->glue->destroy_qp(qp);
		return rc;
	}
	memset(dci, 0, sizeof(*dci));
	dci->qpn = qp->qp_num;
	dci->log_sq_bbs = uint32_t(lg);
	dci->sq = dv.sq.buf;
	dci->dbrec = reinterpret_cast<uint32_t *>(dv.dbrec);
	dci->uar_reg = dv.bf.reg;
	/* bf.size != 0: a BlueFlame register, mapped write-combining (flush after the write). */
	dci->flags = dv.bf.size != 0 ? MLX5_QPN_DC_DCI_UAR_WC : 0;
	dci->max_inline = max_inline;
	dci->handle = to_handle(qp);
	return 0;
}

/*
 * Recovery of a DCI (in ERR after an error completion): RESET (mask IBV_QP_STATE alone, which
 * modify_dci_qp_is_ok permits from any state; rdma-core's provider then zeroes the doorbell
 * record and restarts its queue indices), then the INIT, RTR and RTS of creation with the
 * same path. The path is resolved first, so a refused one leaves the DCI as it was.
 */
int
hw_dci_reset(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_dci_info *dci,
	     const struct mlx5_qpn_dc_path *path)
{
	if (be == nullptr || dci == nullptr || dci->handle == 0)
		return -EINVAL;
	mlx5_qpn_hw_dev *dev = to_dev(be);
	dc_rtr rtr;
	int rc = dc_resolve_path(dev, path, "DCI reset", &rtr);
	if (rc != 0)
		return rc;
	struct ibv_qp *qp = from_handle<ibv_qp>(dci->handle);
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	rc = neg_errno(dev->glue->modify_qp(qp, &a, IBV_QP_STATE));
	if (rc == -EINVAL) {
		/* modify_dci_qp_is_ok before kernel 5.2 has no DCI->RESET: nothing brings this
		 * DCI out of ERR but destroying it. */
		HW_LOG(ERR,
		       "%s: DCI 0x%x: RESET refused (EINVAL): this kernel's modify_dci_qp_is_ok "
		       "(older than 5.2) takes no DCI->RESET, so a DCI in ERR cannot be recovered: "
		       "destroy it and make a new one, or run kernel 5.2 or later",
		       dev->name, dci->qpn);
		return -EOPNOTSUPP;
	}
	if (rc != 0) {
		HW_LOG(ERR, "%s: DCI RESET: ibv_modify_qp failed (%s)", dev->name, strerror(-rc));
		return rc;
	}
	return dc_to_ready(dev, qp, false, rtr);
}

int
hw_dci_destroy(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_dci_info *dci)
{
	return destroy_object(be, dci, &mlx5_qpn_glue::destroy_qp);
}

/* What a hardware DCT holds: the QP, the SRQ it receives into and the SRQ's buffers. */
struct hw_dct {
	struct ibv_qp *qp;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	uint8_t *buf;
};

/* Release what hw_dct_create() made of t, in reverse (a forked child: memory only). */
void
dct_free(mlx5_qpn_hw_dev *dev, hw_dct *t)
{
	if (!not_owner(dev)) {
		if (t->qp != nullptr)
			dev->glue->destroy_qp(t->qp);
		if (t->mr != nullptr)
			dev->glue->dereg_mr(t->mr);
		if (t->srq != nullptr)
			dev->glue->destroy_srq(t->srq);
	}
	free(t->buf); // NOLINT(cppcoreguidelines-no-malloc): aligned_alloc'd for the device
	delete t;
}

/*
 * The SRQ's receive side for the DC layer (mlx5_qpn_dc_ops.h): the WQE list from
 * MLX5DV_OBJ_SRQ (rdma-core made it head 0 .. tail max-1, nothing posted), and one registered
 * buffer of MLX5_QPN_HW_DC_RX_STRIDE bytes per WQE. The DC layer writes and posts the WQEs.
 */
int
dct_rx_setup(mlx5_qpn_hw_dev *dev, struct ibv_pd *pd, hw_dct *t, struct mlx5_qpn_dc_srq_info *si)
{
	struct mlx5dv_srq dv;
	struct mlx5dv_obj obj;
	memset(&dv, 0, sizeof(dv));
	memset(&obj, 0, sizeof(obj));
	obj.srq.in = t->srq;
	obj.srq.out = &dv;
	int rc = neg_errno(dev->glue->dv_init_obj(&obj, MLX5DV_OBJ_SRQ));
	int lg = dv.tail >= dv.head ? log2_exact(dv.tail - dv.head + 1) : -1;
	if (rc == 0 && (lg < 0 || dv.head != 0 || dv.buf == nullptr || dv.dbrec == nullptr)) {
		HW_LOG(ERR, "%s: DCT: SRQ list %u..%u: a fresh power-of-two list needed", dev->name,
		       dv.head, dv.tail);
		rc = -ENOTSUP;
	}
	if (rc != 0)
		return rc;
	size_t len = (size_t(1) << lg) * MLX5_QPN_HW_DC_RX_STRIDE;
	t->buf = static_cast<uint8_t *>(aligned_alloc(4096, len));
	if (t->buf == nullptr)
		return -ENOMEM;
	memset(t->buf, 0, len);
	errno = 0;
	t->mr = dev->glue->reg_mr(pd, t->buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (t->mr == nullptr) {
		rc = fail_errno();
		HW_LOG(ERR, "%s: DCT: ibv_reg_mr(%zu bytes) failed (%s)", dev->name, len,
		       strerror(-rc));
		return rc;
	}
	memset(si, 0, sizeof(*si));
	si->wqes = dv.buf;
	si->dbrec = reinterpret_cast<uint32_t *>(dv.dbrec);
	si->log_wqes = uint32_t(lg);
	si->stride = dv.stride;
	si->buf = t->buf;
	si->lkey = t->mr->lkey;
	return 0;
}

int
hw_dct_create(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_cq_info *cq, uint64_t dc_key,
	      const struct mlx5_qpn_dc_path *path, struct mlx5_qpn_dc_dct_info *dct)
{
	if (be == nullptr || cq == nullptr || dct == nullptr || cq->handle == 0)
		return -EINVAL;
	mlx5_qpn_hw_dev *dev = to_dev(be);
	dc_rtr rtr;
	int rc = dc_host_check(dev, true, "DCT");
	if (rc == 0)
		rc = dc_resolve_path(dev, path, "DCT", &rtr);
	/* The SRQ's WQE list (32 bytes a WQE) and one receive buffer per WQE. */
	const uint64_t srq_wqes = MLX5_QPN_HW_DC_SRQ_WR + 1;
	if (rc == 0)
		rc = mlx5_qpn_hw_memlock_check(dev->name,
					       queue_pin(srq_wqes * 32) +
						       queue_pin(srq_wqes *
								 MLX5_QPN_HW_DC_RX_STRIDE),
					       "a DCT's SRQ and receive buffers");
	if (rc != 0)
		return rc;
	struct ibv_pd *pd = dc_pd(dev, &rc);
	if (pd == nullptr)
		return rc;
	hw_dct *t = new (std::nothrow) hw_dct();
	if (t == nullptr)
		return -ENOMEM;
	/* The kernel (check_qp_attr) requires a DCT to receive into an SRQ. */
	struct ibv_srq_init_attr sa;
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = MLX5_QPN_HW_DC_SRQ_WR;
	sa.attr.max_sge = 1;
	errno = 0;
	t->srq = dev->glue->create_srq(pd, &sa);
	if (t->srq == nullptr) {
		rc = fail_errno();
		HW_LOG(ERR, "%s: DCT: ibv_create_srq failed (%s)", dev->name, strerror(-rc));
		dct_free(dev, t);
		return rc;
	}
	memset(dct, 0, sizeof(*dct));
	rc = dct_rx_setup(dev, pd, t, &dct->srq);
	if (rc == 0)
		t->qp = dc_qp_create(dev, cq, t->srq, 0, dc_key, rtr, &rc);
	if (t->qp == nullptr) {
		dct_free(dev, t);
		return rc;
	}
	dct->dctn = t->qp->qp_num; /* set at RTR, where the kernel creates the DCT */
	dct->rx_slots = MLX5_QPN_HW_DC_RX_HOLD;
	dct->rx_stride = MLX5_QPN_HW_DC_RX_STRIDE;
	dct->handle = to_handle(t);
	return 0;
}

int
hw_dct_destroy(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_dct_info *dct)
{
	if (be == nullptr || dct == nullptr || dct->handle == 0)
		return -EINVAL;
	mlx5_qpn_hw_dev *dev = to_dev(be);
	hw_dct *t = from_handle<hw_dct>(dct->handle);
	if (!not_owner(dev)) {
		int rc = neg_errno(dev->glue->destroy_qp(t->qp));
		if (rc != 0)
			return rc; /* still there: keep the SRQ and the buffers it receives into */
		t->qp = nullptr;
	}
	dct_free(dev, t);
	return 0;
}

/* An address without a GRH on a port that requires one (IBV_QPF_GRH_REQUIRED): libmlx5's
 * mlx5_create_ah refuses it (EINVAL), and the driver cannot add one, the peer's GID being
 * unknown from a LID. 0, or -EINVAL with one line; the port's query failing is left to
 * ibv_create_ah to answer. */
int
ah_grh_check(mlx5_qpn_hw_dev *dev, const struct mlx5_qpn_dc_addr *addr, uint8_t port)
{
	struct ibv_port_attr pa;
	if (addr->is_global || dc_port_query(dev, port, "AH", &pa) != 0 ||
	    (pa.flags & IBV_QPF_GRH_REQUIRED) == 0)
		return 0;
	HW_LOG(ERR,
	       "%s: AH: port %u requires a GRH (IBV_QPF_GRH_REQUIRED): the address needs "
	       "is_global and the peer's GID (dlid 0x%x alone is refused)",
	       dev->name, port, addr->dlid);
	return -EINVAL;
}

int
hw_ah_create(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_addr *addr,
	     struct mlx5_qpn_dc_ah_info *ah)
{
	if (be == nullptr || addr == nullptr || ah == nullptr)
		return -EINVAL;
	mlx5_qpn_hw_dev *dev = to_dev(be);
	int rc = 0;
	struct ibv_pd *pd = dc_pd(dev, &rc);
	if (pd == nullptr)
		return rc;
	struct ibv_ah_attr attr;
	mlx5_qpn_hw_dc_ah_attr(addr, &attr);
	if (addr->port == 0)
		attr.port_num = dev->port; /* the handle's port */
	rc = ah_grh_check(dev, addr, attr.port_num);
	if (rc != 0)
		return rc;
	errno = 0;
	struct ibv_ah *a = dev->glue->create_ah(pd, &attr);
	if (a == nullptr) {
		rc = fail_errno();
		HW_LOG(ERR, "%s: ibv_create_ah(dlid 0x%x) failed (%s)", dev->name, addr->dlid,
		       strerror(-rc));
		return rc;
	}
	struct mlx5dv_ah dv;
	struct mlx5dv_obj obj;
	memset(&dv, 0, sizeof(dv));
	memset(&obj, 0, sizeof(obj));
	obj.ah.in = a;
	obj.ah.out = &dv;
	rc = neg_errno(dev->glue->dv_init_obj(&obj, MLX5DV_OBJ_AH));
	if (rc == 0 && dv.av == nullptr)
		rc = -ENOTSUP;
	if (rc != 0) {
		HW_LOG(ERR, "%s: mlx5dv_init_obj(AH) failed (%s)", dev->name, strerror(-rc));
		dev->glue->destroy_ah(a);
		return rc;
	}
	memset(ah, 0, sizeof(*ah));
	/* The route as the provider built it (resolved MAC on RoCE included). */
	memcpy(ah->av, dv.av, sizeof(ah->av));
	ah->handle = to_handle(a);
	return 0;
}

int
hw_ah_destroy(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_ah_info *ah)
{
	return destroy_object(be, ah, &mlx5_qpn_glue::destroy_ah);
}

int
hw_cq_check(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_cq_info *cq)
{
	if (be == nullptr || cq == nullptr || cq->handle == 0)
		return -EINVAL;
	return dc_cq_check(to_dev(be), from_handle<ibv_cq>(cq->handle));
}

} /* namespace */

namespace mlx5_qpn_hw {

void
hw_dc_close(mlx5_qpn_hw_dev *dev)
{
	if (dev->dc_pd == nullptr)
		return;
	int rc = neg_errno(dev->glue->dealloc_pd(dev->dc_pd));
	if (rc != 0) /* a DC object still holds it: the context's close frees everything */
		HW_LOG(INFO, "%s: DC PD still in use at close (%s)", dev->name, strerror(-rc));
	dev->dc_pd = nullptr;
}

} /* namespace mlx5_qpn_hw */

extern "C" {

void
mlx5_qpn_hw_dc_qp_attr(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq,
		       uint32_t log_sq_bbs, uint64_t dc_key, struct ibv_qp_init_attr_ex *attr,
		       struct mlx5dv_qp_init_attr *dv)
{
	memset(attr, 0, sizeof(*attr));
	memset(dv, 0, sizeof(*dv));
	attr->qp_type = IBV_QPT_DRIVER;
	attr->comp_mask = IBV_QP_INIT_ATTR_PD;
	attr->pd = pd;
	attr->send_cq = cq;
	attr->recv_cq = cq;
	dv->comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
	if (srq != nullptr) {
		attr->srq = srq;
		dv->dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
		dv->dc_init_attr.dct_access_key = dc_key;
		return;
	}
	/* One WR per 8 BBs of the ring: a 256-byte inline SEND is 6 BBs, which rdma-core rounds
	 * to the power of two the DC layer asked for. */
	attr->cap.max_send_wr = 1u << (log_sq_bbs - kSqBbShift);
	attr->cap.max_send_sge = 1;
	attr->cap.max_inline_data = MLX5_QPN_HW_DC_MAX_INLINE;
	dv->dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
}

uint32_t
mlx5_qpn_hw_dc_dci_wqe_bytes(const struct ibv_qp_cap *cap)
{
	const uint32_t inl = cap->max_inline_data != 0 ?
				     MLX5_QPN_HW_DC_LIBMLX5_WQE_OVERHEAD +
					     ((4 + cap->max_inline_data + 15) & ~15u) :
				     0;
	const uint32_t sge = MLX5_QPN_HW_DC_LIBMLX5_WQE_OVERHEAD + 16 * cap->max_send_sge;
	return ((inl > sge ? inl : sge) + 63) & ~63u;
}

uint64_t
mlx5_qpn_hw_dc_dci_ring_bytes(const struct ibv_qp_cap *cap)
{
	const uint64_t bytes = uint64_t(cap->max_send_wr) * mlx5_qpn_hw_dc_dci_wqe_bytes(cap);
	uint64_t ring = 64;
	while (ring < bytes)
		ring <<= 1;
	return ring;
}

void
mlx5_qpn_hw_dc_dci_cap(uint32_t log_sq_bbs, uint32_t max_inline, struct ibv_qp_cap *cap)
{
	/* libmlx5 sizes the SQ as max_send_wr x its WQE size (mlx5_qpn_hw_dc_dci_wqe_bytes),
	 * rounded up to a power of two: with one WR per power-of-two-rounded WQE the ring is the
	 * 2^log_sq_bbs BBs asked, never twice that. */
	cap->max_inline_data = max_inline;
	if (cap->max_send_sge == 0)
		cap->max_send_sge = 1;
	const uint32_t bbs = mlx5_qpn_hw_dc_dci_wqe_bytes(cap) / 64;
	uint32_t slot = 1;
	while (slot < bbs)
		slot <<= 1;
	cap->max_send_wr = (1u << log_sq_bbs) / slot;
	if (cap->max_send_wr == 0)
		cap->max_send_wr = 1;
}

void
mlx5_qpn_hw_dc_ah_attr(const struct mlx5_qpn_dc_addr *addr, struct ibv_ah_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->dlid = addr->dlid;
	attr->sl = addr->sl;
	attr->port_num = addr->port != 0 ? addr->port : MLX5_QPN_HW_DC_PORT;
	attr->is_global = static_cast<uint8_t>(addr->is_global != 0);
	if (!attr->is_global)
		return;
	memcpy(attr->grh.dgid.raw, addr->dgid, sizeof(attr->grh.dgid.raw));
	attr->grh.flow_label = addr->flow_label;
	attr->grh.sgid_index = addr->sgid_index;
	attr->grh.hop_limit = addr->hop_limit;
	attr->grh.traffic_class = addr->traffic_class;
}

const struct mlx5_qpn_dc_ops mlx5_qpn_hw_dc_ops = {
	.cq_create = hw_cq_create,
	.cq_destroy = hw_cq_destroy,
	.dci_create = hw_dci_create,
	.dci_reset = hw_dci_reset,
	.dci_destroy = hw_dci_destroy,
	.dct_create = hw_dct_create,
	.dct_destroy = hw_dct_destroy,
	.execute = nullptr, /* the ConnectX executes WQEs itself */
	.poll = nullptr,
	.ah_create = hw_ah_create,
	.ah_destroy = hw_ah_destroy,
	.cq_check = hw_cq_check,
};

} /* extern "C" */
