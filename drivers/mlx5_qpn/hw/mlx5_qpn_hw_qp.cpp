/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ordinary-QP source of the hardware backend: one UD QP on a one-entry CQ per QPN, held
 * as the reservation (see mlx5_qpn_hw_qp.h).
 */
#include "mlx5_qpn_hw_qp.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <mutex>
#include <new>

#include "mlx5_qpn_hw_log.h"

namespace {

/* Buckets of the QPN -> QP table: a destroy finds its QP in count/1024 steps, not count. */
constexpr uint32_t QP_BUCKETS = 1024;

struct held_qp {
	held_qp *next;
	uint32_t qpn;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
};

/* A verbs call that returned NULL: its errno, negated; -EIO when it set none. */
int
neg_errno_or_eio(void)
{
	return errno > 0 ? -errno : -EIO;
}

} /* namespace */

struct mlx5_qpn_hw_qps {
	const struct mlx5_qpn_glue *glue;
	struct ibv_context *ctx;
	char name[64];
	mutable std::mutex lock; /* guards everything below */
	struct ibv_pd *pd;       /* allocated with the first QP */
	uint32_t count;
	held_qp *bucket[QP_BUCKETS];
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
	snprintf(q->name, sizeof(q->name), "%s", name != nullptr ? name : "?");
	return q;
}

int
mlx5_qpn_hw_qps_get(struct mlx5_qpn_hw_qps *q, uint32_t *qpn)
{
	if (q == nullptr || qpn == nullptr)
		return -EINVAL;
	held_qp *h = new (std::nothrow) held_qp();
	if (h == nullptr)
		return -ENOMEM;
	std::lock_guard<std::mutex> g(q->lock);
	int rc = 0;
	const char *what = "ibv_alloc_pd";
	errno = 0;
	if (q->pd == nullptr && (q->pd = q->glue->alloc_pd(q->ctx)) == nullptr) {
		rc = neg_errno_or_eio();
	} else {
		what = "ibv_create_cq";
		errno = 0;
		h->cq = q->glue->create_cq(q->ctx, MLX5_QPN_HW_QP_CQE, nullptr, nullptr, 0);
		if (h->cq == nullptr) {
			rc = neg_errno_or_eio();
		} else {
			struct ibv_qp_init_attr attr;
			mlx5_qpn_hw_qp_init_attr(&attr, h->cq);
			what = "ibv_create_qp(UD)";
			errno = 0;
			h->qp = q->glue->create_qp(q->pd, &attr);
			if (h->qp == nullptr) {
				rc = neg_errno_or_eio();
				q->glue->destroy_cq(h->cq);
			}
		}
	}
	if (rc != 0) {
		HW_LOG(ERR, "%s: ordinary QPN: %s failed (%s)", q->name, what, strerror(-rc));
		delete h;
		return rc;
	}
	h->qpn = h->qp->qp_num;
	held_qp *&head = q->bucket[h->qpn % QP_BUCKETS];
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
	held_qp **pp = &q->bucket[qpn % QP_BUCKETS];
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
	q->glue->destroy_cq(h->cq);
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
			if (owner) {
				q->glue->destroy_qp(h->qp);
				q->glue->destroy_cq(h->cq);
			}
			delete h;
		}
	}
	if (owner && q->pd != nullptr)
		q->glue->dealloc_pd(q->pd);
	delete q;
	return held;
}

} /* extern "C" */
