/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake rdma-core's verbs objects (hw_fake_priv.h): each one counts its holders, so that
 * destroying a held object fails with EBUSY and leaves it intact, as the kernel's uverbs
 * does; each queue buffer and MR is pinned (hw_fake_mem.cpp) as ib_umem_get pins it.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include <atomic>

#include "hw_fake_glue.h"
#include "hw_fake_priv.h"

namespace hwfake {
namespace priv {

namespace {

FakeDevice &
dev()
{
	return fake();
}

FakePd *
pd_of(ibv_pd *pd)
{
	return reinterpret_cast<FakePd *>(pd);
}

void
hold_pd(ibv_pd *pd, int d)
{
	if (pd != nullptr)
		pd_of(pd)->users += d;
}

void *
page(void)
{
	void *p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? nullptr : p;
}

uint32_t
pow2_at_least(uint32_t v)
{
	uint32_t n = 1;
	while (n < v)
		n <<= 1;
	return n;
}

FakeQp *
new_qp(ibv_pd *pd, ibv_qp_type type, uint32_t qpn, ibv_cq *scq, ibv_cq *rcq)
{
	/* The driver's control thread creates QPs while a test reads the count: atomic both ways. */
	std::atomic_ref<int>(dev().qps_live).fetch_add(1);
	FakeQp *f = new FakeQp();
	f->qp.pd = pd;
	f->qp.qp_num = qpn;
	f->qp.qp_type = type;
	f->qp.state = IBV_QPS_RESET;
	f->scq = reinterpret_cast<FakeCq *>(scq);
	f->rcq = reinterpret_cast<FakeCq *>(rcq);
	f->cq = f->scq;
	if (f->scq != nullptr)
		f->scq->users++;
	if (f->rcq != nullptr && f->rcq != f->scq)
		f->rcq->users++;
	hold_pd(pd, 1);
	g_live.qps.insert(f);
	return f;
}

void
free_qp(FakeQp *f)
{
	if (f->scq != nullptr)
		f->scq->users--;
	if (f->rcq != nullptr && f->rcq != f->scq)
		f->rcq->users--;
	if (f->srq != nullptr)
		f->srq->users--;
	hold_pd(f->qp.pd, -1);
	unpin(&f->pinned);
	if (f->dct)
		g_dcts.erase(f->qp.qp_num);
	if (f->dc && !f->dct) {
		g_dcis.erase(f->qp.qp_num);
		munmap(f->dbrec_page, 4096);
		munmap(f->reg_page, 4096);
	}
	g_live.qps.erase(f);
	delete f;
}

} // namespace

ibv_pd *
alloc_pd(ibv_context *c)
{
	std::lock_guard<std::mutex> g(g_mu);
	dev().pds_live++;
	FakePd *f = new FakePd();
	f->pd.context = c;
	g_live.pds.insert(f);
	return &f->pd;
}

int
dealloc_pd(ibv_pd *pd)
{
	std::lock_guard<std::mutex> g(g_mu);
	FakePd *f = pd_of(pd);
	if (f->users > 0)
		return EBUSY; /* QPs, SRQs, MRs or AHs still hold it */
	dev().pds_live--;
	g_live.pds.erase(f);
	delete f;
	return 0;
}

ibv_cq *
create_cq(ibv_context *c, int cqe, void *, ibv_comp_channel *, int)
{
	std::lock_guard<std::mutex> g(g_mu);
	dev().cq_depths.push_back(cqe);
	/* As libmlx5: cqe + 1 rounded up to a power of two, every CQE invalid (opcode 0xf). */
	uint32_t n = pow2_at_least(uint32_t(cqe) + 1);
	uint64_t pinned = 0;
	int rc = pin(uint64_t(n) * 64, &pinned);
	if (rc != 0) {
		errno = rc;
		return nullptr;
	}
	dev().cqs_live++;
	FakeCq *f = new FakeCq();
	f->cq.context = c;
	f->cq.cqe = int(n) - 1;
	f->pinned = pinned;
	f->ring.assign(size_t(n) * 64, 0);
	for (uint32_t i = 0; i < n; i++)
		f->ring[size_t(i) * 64 + 63] = 0xf0;
	g_last_cq = f;
	g_live.cqs.insert(f);
	return &f->cq;
}

int
destroy_cq(ibv_cq *cq)
{
	std::lock_guard<std::mutex> g(g_mu);
	FakeCq *f = reinterpret_cast<FakeCq *>(cq);
	if (f->users > 0)
		return EBUSY; /* a QP completes into it */
	dev().cqs_live--;
	if (g_last_cq == f)
		g_last_cq = nullptr;
	unpin(&f->pinned);
	g_live.cqs.erase(f);
	delete f;
	return 0;
}

ibv_qp *
create_qp(ibv_pd *pd, ibv_qp_init_attr *attr)
{
	std::lock_guard<std::mutex> g(g_mu);
	if (attr->qp_type != IBV_QPT_UD || attr->send_cq == nullptr ||
	    attr->send_cq != attr->recv_cq)
		dev().bad_qp_attrs++;
	/* libmlx5's UD buffer: send WQEs of 2 BBs (ctrl, datagram, one data segment), receive
	 * WQEs of 16 bytes per SGE; powers of two. */
	const ibv_qp_cap &cap = attr->cap;
	uint64_t bytes = uint64_t(pow2_at_least(cap.max_send_wr)) * 128 +
			 uint64_t(pow2_at_least(cap.max_recv_wr)) * 16 *
				 (cap.max_recv_sge != 0 ? cap.max_recv_sge : 1);
	uint64_t pinned = 0;
	int rc = pin(bytes, &pinned);
	if (rc != 0) {
		errno = rc;
		return nullptr;
	}
	FakeQp *f = new_qp(pd, attr->qp_type, dev().next_qpn++, attr->send_cq, attr->recv_cq);
	f->pinned = pinned;
	return &f->qp;
}

/* The WQE size libmlx5 and the kernel compute for a DCI: ctrl and DC datagram (64 bytes),
 * then the inline data (its 4-byte header and the data, to 16 bytes) or the data segments, the
 * whole rounded up to a 64-byte BB; compared with the firmware's max_wqe_sz_sq_dc. */
static uint32_t
dci_wqe_size(const ibv_qp_cap &cap)
{
	uint32_t inl = 16 + 48 + ((4 + cap.max_inline_data + 15) & ~15u);
	uint32_t sge = 16 + 48 + 16 * cap.max_send_sge;
	return ((inl > sge ? inl : sge) + 63) & ~63u;
}

/* What libmlx5 reserves per WQE of an IBV_QPT_DRIVER DCI (providers/mlx5/verbs.c,
 * _sq_overhead and mlx5_calc_send_wqe, without IBV_QP_INIT_ATTR_SEND_OPS_FLAGS): the largest
 * operation it may carry, a bind-MW/UMR (ctrl 16 + UMR ctrl 48 + mkey context 64 + 64 of KLMs
 * = 192), plus the datagram segment (48): 240 bytes; then the inline data or the data
 * segments, rounded up to a BB. The SQ is max_send_wr of these, rounded up to a power of two. */
static uint32_t
libmlx5_dci_wqe_size(const ibv_qp_cap &cap)
{
	constexpr uint32_t overhead = 192 + 48;
	uint32_t inl = cap.max_inline_data != 0 ?
			       overhead + ((4 + cap.max_inline_data + 15) & ~15u) :
			       0;
	uint32_t sge = overhead + 16 * cap.max_send_sge;
	return ((inl > sge ? inl : sge) + 63) & ~63u;
}

ibv_qp *
dv_create_qp(ibv_context *, ibv_qp_init_attr_ex *a, mlx5dv_qp_init_attr *dv)
{
	std::lock_guard<std::mutex> g(g_mu);
	FakeDevice::DvQp r{};
	r.qp_type = a->qp_type;
	r.comp_mask = a->comp_mask;
	r.max_send_wr = a->cap.max_send_wr;
	r.max_send_sge = a->cap.max_send_sge;
	r.max_inline = a->cap.max_inline_data;
	r.dv_comp_mask = dv->comp_mask;
	r.dc_type = dv->dc_init_attr.dc_type;
	r.key = r.dc_type == MLX5DV_DCTYPE_DCT ? dv->dc_init_attr.dct_access_key : 0;
	r.srq = a->srq != nullptr;
	r.one_cq = a->send_cq != nullptr && a->send_cq == a->recv_cq;
	dev().dv_qps.push_back(r);
	if (dev().dv_create_qp_errno != 0) {
		errno = dev().dv_create_qp_errno;
		return nullptr;
	}
	const bool dct = r.dc_type == MLX5DV_DCTYPE_DCT;
	if (!dev().dct_cap) {
		errno = EOPNOTSUPP; /* the kernel's check_qp_type: IB_QPT_DRIVER needs cap dct */
		return nullptr;
	}
	if (dct && dev().lag_active && dev().lag_dct == 0) {
		errno = EOPNOTSUPP; /* the kernel's create_dct: LAG active, lag_dct clear */
		return nullptr;
	}
	if (!dct && dci_wqe_size(a->cap) > dev().max_wqe_sz_sq_dc) {
		errno = EINVAL; /* the kernel: wqe_size > max_wqe_sz_sq_dc */
		return nullptr;
	}
	if (dct && a->srq == nullptr) {
		errno = EINVAL; /* the kernel's check_qp_attr: a DCT receives into an SRQ */
		return nullptr;
	}
	uint64_t pinned = 0;
	uint32_t bbs = 0;
	if (!dct) {
		/* As libmlx5 sizes it (mlx5_calc_sq_size): WRs x its WQE size, power of two. */
		bbs = pow2_at_least(a->cap.max_send_wr * libmlx5_dci_wqe_size(a->cap)) / 64;
		int rc = pin(uint64_t(bbs) * 64, &pinned);
		if (rc != 0) {
			errno = rc;
			return nullptr;
		}
	}
	/* A DCT has no number until RTR (the kernel creates it there). */
	FakeQp *f = new_qp(a->pd, IBV_QPT_DRIVER, dct ? 0 : dev().next_qpn++, a->send_cq,
			   a->recv_cq);
	f->dc = true;
	f->dct = dct;
	f->pinned = pinned;
	f->srq = reinterpret_cast<FakeSrq *>(a->srq);
	if (f->srq != nullptr)
		f->srq->users++;
	f->key = r.key;
	if (!dct) {
		f->sq.assign(size_t(bbs) * 64, 0);
		f->dbrec_page = page();
		f->reg_page = page();
		g_dcis[f->qp.qp_num] = f;
	}
	return &f->qp;
}

int
destroy_qp(ibv_qp *qp)
{
	std::lock_guard<std::mutex> g(g_mu);
	std::atomic_ref<int>(dev().qps_live).fetch_sub(1);
	dev().qps_destroyed++;
	free_qp(reinterpret_cast<FakeQp *>(qp));
	return 0;
}

ibv_srq *
create_srq(ibv_pd *pd, ibv_srq_init_attr *a)
{
	std::lock_guard<std::mutex> g(g_mu);
	dev().srq_max_wr = int(a->attr.max_wr);
	/* As libmlx5: max_wr + 1 WQEs rounded up to a power of two, linked i -> i + 1. */
	uint32_t n = pow2_at_least(a->attr.max_wr + 1);
	uint64_t pinned = 0;
	int rc = pin(uint64_t(n) * 32, &pinned);
	if (rc != 0) {
		errno = rc;
		return nullptr;
	}
	dev().srqs_live++;
	FakeSrq *f = new FakeSrq();
	f->srq.pd = pd;
	f->n = n;
	f->pinned = pinned;
	f->wqes.assign(size_t(f->n) * 32, 0);
	for (uint32_t i = 0; i < f->n; i++) {
		uint16_t next = htobe16(uint16_t((i + 1) & (f->n - 1)));
		memcpy(&f->wqes[size_t(i) * 32 + 2], &next, 2);
	}
	hold_pd(pd, 1);
	g_live.srqs.insert(f);
	return &f->srq;
}

int
destroy_srq(ibv_srq *s)
{
	std::lock_guard<std::mutex> g(g_mu);
	FakeSrq *f = reinterpret_cast<FakeSrq *>(s);
	if (f->users > 0)
		return EBUSY; /* a DCT receives into it */
	dev().srqs_live--;
	hold_pd(s->pd, -1);
	unpin(&f->pinned);
	g_live.srqs.erase(f);
	delete f;
	return 0;
}

ibv_mr *
reg_mr(ibv_pd *pd, void *addr, size_t len, int access)
{
	std::lock_guard<std::mutex> g(g_mu);
	uint64_t pinned = 0;
	int rc = pin(pages_of(addr, len) * 4096, &pinned);
	if (rc != 0) {
		errno = rc;
		return nullptr;
	}
	dev().mrs_live++;
	dev().mr_access = access;
	FakeMr *f = new FakeMr();
	f->mr.pd = pd;
	f->mr.addr = addr;
	f->mr.length = len;
	f->mr.lkey = 0x500 + dev().mrs_made++;
	f->access = access;
	f->pinned = pinned;
	g_mrs[f->mr.lkey] = f;
	hold_pd(pd, 1);
	g_live.mrs.insert(f);
	return &f->mr;
}

int
dereg_mr(ibv_mr *mr)
{
	std::lock_guard<std::mutex> g(g_mu);
	FakeMr *f = reinterpret_cast<FakeMr *>(mr);
	dev().mrs_live--;
	g_mrs.erase(mr->lkey);
	hold_pd(mr->pd, -1);
	unpin(&f->pinned);
	g_live.mrs.erase(f);
	delete f;
	return 0;
}

ibv_ah *
create_ah(ibv_pd *pd, ibv_ah_attr *a)
{
	std::lock_guard<std::mutex> g(g_mu);
	dev().ah_attrs.push_back(*a);
	int rc = check_ah_attr(a, dev().roce);
	/* RoCE: the kernel resolves the destination's MAC (ib_resolve_eth_dmac) for the AH; a
	 * neighbour it cannot find fails the call (EHOSTUNREACH here). */
	if (rc == 0 && dev().roce && dev().neigh_fail)
		rc = EHOSTUNREACH;
	if (rc != 0) {
		errno = rc;
		return nullptr;
	}
	dev().ahs_live++;
	FakeAh *f = new FakeAh();
	f->ah.pd = pd;
	build_av(a, &f->av);
	g_last_av = f->av;
	hold_pd(pd, 1);
	g_live.ahs.insert(f);
	return &f->ah;
}

int
destroy_ah(ibv_ah *ah)
{
	std::lock_guard<std::mutex> g(g_mu);
	dev().ahs_live--;
	hold_pd(ah->pd, -1);
	g_live.ahs.erase(reinterpret_cast<FakeAh *>(ah));
	delete reinterpret_cast<FakeAh *>(ah);
	return 0;
}

int
dv_init_obj(mlx5dv_obj *o, uint64_t type)
{
	std::lock_guard<std::mutex> g(g_mu);
	dev().init_objs++;
	if (type & MLX5DV_OBJ_CQ) {
		FakeCq *f = reinterpret_cast<FakeCq *>(o->cq.in);
		o->cq.out->buf = f->ring.data();
		o->cq.out->dbrec = reinterpret_cast<__be32 *>(f->dbrec);
		o->cq.out->cqe_cnt = uint32_t(f->cq.cqe + 1);
		o->cq.out->cqe_size = 64;
		o->cq.out->cqn = 0x77;
	}
	if (type & MLX5DV_OBJ_QP) {
		FakeQp *f = reinterpret_cast<FakeQp *>(o->qp.in);
		o->qp.out->sq.buf = f->sq.data();
		o->qp.out->sq.wqe_cnt = uint32_t(f->sq.size() / 64);
		o->qp.out->sq.stride = 64;
		o->qp.out->dbrec = static_cast<__be32 *>(f->dbrec_page);
		o->qp.out->bf.reg = f->reg_page;
		o->qp.out->bf.size = dev().bf_size;
	}
	if (type & MLX5DV_OBJ_SRQ) {
		FakeSrq *f = reinterpret_cast<FakeSrq *>(o->srq.in);
		o->srq.out->buf = f->wqes.data();
		o->srq.out->dbrec = reinterpret_cast<__be32 *>(f->dbrec);
		o->srq.out->stride = 32;
		o->srq.out->head = 0;
		o->srq.out->tail = f->n - 1;
		o->srq.out->srqn = 0x99;
	}
	if (type & MLX5DV_OBJ_AH)
		o->ah.out->av = &reinterpret_cast<FakeAh *>(o->ah.in)->av;
	return 0;
}

void
free_leftovers(void)
{
	std::lock_guard<std::mutex> g(g_mu);
	while (!g_live.qps.empty())
		free_qp(*g_live.qps.begin());
	for (FakeAh *f : g_live.ahs)
		delete f;
	for (FakeMr *f : g_live.mrs)
		delete f;
	for (FakeSrq *f : g_live.srqs)
		delete f;
	for (FakeCq *f : g_live.cqs)
		delete f;
	for (FakePd *f : g_live.pds)
		delete f;
	g_live = Live();
	g_dcis.clear();
	g_dcts.clear();
	g_mrs.clear();
	g_last_cq = nullptr;
}

} // namespace priv
} // namespace hwfake
