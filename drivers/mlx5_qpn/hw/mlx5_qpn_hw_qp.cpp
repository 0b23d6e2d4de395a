/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ordinary-QP source of the hardware backend: one UD QP per QPN on one shared one-entry CQ,
 * held as the reservation (see mlx5_qpn_hw_qp.h).
 */
#include "mlx5_qpn_hw_qp.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <mutex>
#include <new>

#include "mlx5_qpn_hw_log.h"

namespace {

/* Buckets of the QPN -> QP table: a destroy finds its QP in count/1024 steps, not count. */
constexpr uint32_t kQpBuckets = 1024;

struct held_qp {
	held_qp *next;
	uint32_t qpn;
	struct ibv_qp *qp;
};

/* A verbs call that returned NULL: its errno, negated; -EIO when it set none. */
int
neg_errno_or_eio()
{
	return errno > 0 ? -errno : -EIO;
}

uint64_t
pow2_at_least(uint64_t v)
{
	uint64_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

uint64_t
round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) / to * to;
}

/* libmlx5's WQE and CQE sizes (mlx5dv.h: the segments; the basic block of a send WQE). */
constexpr uint64_t kSendWqeBb = 64, kCtrlSeg = 16, kDatagramSeg = 48, kDataSeg = 16;
constexpr uint64_t kCqeSize = 64, kDbrecSlot = 64;

} /* namespace */

struct mlx5_qpn_hw_qps {
	const struct mlx5_qpn_glue *glue;
	struct ibv_context *ctx;
	char name[64];
	mutable std::mutex lock; /* guards everything below */
	struct ibv_pd *pd;       /* allocated with the first QP */
	struct ibv_cq *cq;       /* shared by every QP, created with the first */
	uint32_t count;
	uint32_t cap; /* most QPs held at once (RLIMIT_MEMLOCK) */
	held_qp *bucket[kQpBuckets];
};

extern "C" {

void
mlx5_qpn_hw_qp_init_attr(struct ibv_qp_init_attr *attr, struct ibv_cq *cq)
{
	memset(attr, 0, sizeof(*attr));
	attr->send_cq = cq;
	attr->recv_cq = cq;
	attr->qp_type = IBV_QPT_UD;
	/* The smallest queues a provider accepts: the QP only holds its number. */
	attr->cap.max_send_wr = 1;
	attr->cap.max_recv_wr = 1;
	attr->cap.max_send_sge = 1;
	attr->cap.max_recv_sge = 1;
	attr->cap.max_inline_data = 0;
	attr->sq_sig_all = 0;
}

struct mlx5_qpn_hw_qps *
mlx5_qpn_hw_qps_new(const struct mlx5_qpn_glue *glue, struct ibv_context *ctx, const char *name)
{
	if (glue == nullptr || ctx == nullptr)
		return nullptr;
	mlx5_qpn_hw_qps *q = new (std::nothrow) mlx5_qpn_hw_qps();
	if (q == nullptr)
		return nullptr;
	q->glue = glue;
	q->ctx = ctx;
	q->cap = UINT32_MAX;
	snprintf(q->name, sizeof(q->name), "%s", name != nullptr ? name : "?");
	return q;
}

uint64_t
mlx5_qpn_hw_qp_pin_bytes(const struct ibv_qp_init_attr *attr, uint64_t page)
{
	if (page == 0)
		page = 4096;
	const uint64_t sge = attr->cap.max_send_sge * kDataSeg;
	const uint64_t inl = attr->cap.max_inline_data;
	const uint64_t swqe = round_up(kCtrlSeg + kDatagramSeg + (sge > inl ? sge : inl),
				       kSendWqeBb);
	const uint64_t rwqe = pow2_at_least(attr->cap.max_recv_sge * kDataSeg);
	const uint64_t sq = pow2_at_least(attr->cap.max_send_wr) * swqe;
	const uint64_t rq = pow2_at_least(attr->cap.max_recv_wr) * rwqe;
	return round_up(sq + rq, page) + kDbrecSlot;
}

uint64_t
mlx5_qpn_hw_cq_pin_bytes(int cqe, uint64_t page)
{
	if (page == 0)
		page = 4096;
	const uint64_t n = pow2_at_least(static_cast<uint64_t>(cqe < 0 ? 0 : cqe) + 1);
	return round_up(n * kCqeSize, page) + kDbrecSlot;
}

uint32_t
mlx5_qpn_hw_qps_fit(uint64_t room, uint64_t page)
{
	if (room == UINT64_MAX)
		return UINT32_MAX;
	struct ibv_qp_init_attr attr;
	mlx5_qpn_hw_qp_init_attr(&attr, nullptr);
	const uint64_t cq = mlx5_qpn_hw_cq_pin_bytes(MLX5_QPN_HW_QP_CQE, page);
	const uint64_t qp = mlx5_qpn_hw_qp_pin_bytes(&attr, page);
	if (room < cq)
		return 0;
	const uint64_t n = (room - cq) / qp;
	return n < UINT32_MAX ? static_cast<uint32_t>(n) : UINT32_MAX - 1;
}

void
mlx5_qpn_hw_qps_set_cap(struct mlx5_qpn_hw_qps *q, uint32_t cap)
{
	if (q == nullptr)
		return;
	std::lock_guard<std::mutex> g(q->lock);
	q->cap = cap;
}

} /* extern "C" */

namespace {

/* The PD and the shared CQ, made with the first QP; *what names a failing call. */
int
ensure_pd_cq(mlx5_qpn_hw_qps *q, const char **what)
{
	errno = 0;
	*what = "ibv_alloc_pd";
	if (q->pd == nullptr && (q->pd = q->glue->alloc_pd(q->ctx)) == nullptr)
		return neg_errno_or_eio();
	errno = 0;
	*what = "ibv_create_cq";
	if (q->cq == nullptr && (q->cq = q->glue->create_cq(q->ctx, MLX5_QPN_HW_QP_CQE, nullptr,
							    nullptr, 0)) == nullptr)
		return neg_errno_or_eio();
	return 0;
}

} /* namespace */

extern "C" {

int
mlx5_qpn_hw_qps_get(struct mlx5_qpn_hw_qps *q, uint32_t *qpn)
{
	if (q == nullptr || qpn == nullptr)
		return -EINVAL;
	held_qp *h = new (std::nothrow) held_qp();
	if (h == nullptr)
		return -ENOMEM;
	std::lock_guard<std::mutex> g(q->lock);
	if (q->count >= q->cap) {
		HW_LOG(ERR,
		       "%s: ordinary QPN refused: %u UD QPs held, all that RLIMIT_MEMLOCK allows",
		       q->name, q->count);
		delete h;
		return -ENOMEM;
	}
	const char *what = nullptr;
	int rc = ensure_pd_cq(q, &what);
	if (rc == 0) {
		struct ibv_qp_init_attr attr;
		mlx5_qpn_hw_qp_init_attr(&attr, q->cq);
		what = "ibv_create_qp(UD)";
		errno = 0;
		h->qp = q->glue->create_qp(q->pd, &attr);
		if (h->qp == nullptr)
			rc = neg_errno_or_eio();
	}
	if (rc != 0) {
		HW_LOG(ERR, "%s: ordinary QPN: %s failed (%s)", q->name, what, strerror(-rc));
		delete h;
		return rc;
	}
	h->qpn = h->qp->qp_num;
	held_qp *&head = q->bucket[h->qpn % kQpBuckets];
	h->next = head;
	head = h;
	q->count++;
	*qpn = h->qpn;
	return 0;
}

int
mlx5_qpn_hw_qps_put(struct mlx5_qpn_hw_qps *q, uint32_t qpn)
{
	if (q == nullptr)
		return -EINVAL;
	std::lock_guard<std::mutex> g(q->lock);
	held_qp **pp = &q->bucket[qpn % kQpBuckets];
	while (*pp != nullptr && (*pp)->qpn != qpn)
		pp = &(*pp)->next;
	held_qp *h = *pp;
	if (h == nullptr) {
		/* Refused before rdma-core: a double free must not destroy someone else's QP. */
		HW_LOG(ERR, "%s: QPN 0x%x is not an ordinary QP held by this device", q->name, qpn);
		return -EINVAL;
	}
	int rc = q->glue->destroy_qp(h->qp);
	if (rc != 0) {
		rc = rc > 0 ? -rc : rc;
		HW_LOG(ERR, "%s: ibv_destroy_qp(0x%x) failed (%s)", q->name, qpn, strerror(-rc));
		return rc;
	}
	*pp = h->next;
	q->count--;
	delete h;
	return 0;
}

uint32_t
mlx5_qpn_hw_qps_count(const struct mlx5_qpn_hw_qps *q)
{
	if (q == nullptr)
		return 0;
	std::lock_guard<std::mutex> g(q->lock);
	return q->count;
}

uint32_t
mlx5_qpn_hw_qps_free(struct mlx5_qpn_hw_qps *q, int owner)
{
	if (q == nullptr)
		return 0;
	const uint32_t held = q->count;
	for (held_qp *&head : q->bucket) {
		while (head != nullptr) {
			held_qp *h = head;
			head = h->next;
			if (owner)
				q->glue->destroy_qp(h->qp);
			delete h;
		}
	}
	/* The CQ after every QP on it, the PD after everything in it. */
	if (owner && q->cq != nullptr)
		q->glue->destroy_cq(q->cq);
	if (owner && q->pd != nullptr)
		q->glue->dealloc_pd(q->pd);
	delete q;
	return held;
}

} /* extern "C" */
