/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake rdma-core of hw_fake_glue.h: one mlx5 device whose firmware answers QUERY_HCA_CAP
 * and CREATE/DESTROY_GENERAL_OBJECT(RESERVED_QPN) in the PRM layouts, and verbs objects that
 * are plain heap structs with counters.
 */
#include "hw_fake_glue.h"
#include "hw_fake_priv.h"

#include <atomic>
#include <endian.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <string>

#include "hw/mlx5_qpn_hw_sizing.h"
#include "common/mlx5_qpn_prm.h"

namespace hwfake {
namespace priv {

std::map<uint32_t, FakeQp *> g_dcis, g_dcts;
std::map<uint32_t, FakeMr *> g_mrs;

} // namespace priv

using namespace priv;

namespace {

FakeDevice g_dev;
struct ibv_device g_ibdev;
struct ibv_device *g_list[2] = {&g_ibdev, nullptr};
FakeCq *g_last_cq;
mlx5_wqe_av g_last_av;

struct FakeObj {
	uint32_t id;
};

void *
page(void)
{
	void *p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? nullptr : p;
}

ibv_device **
get_device_list(int *n)
{
	if (n != nullptr)
		*n = 1;
	return g_list;
}

void
free_device_list(ibv_device **)
{
}

const char *
get_device_name(ibv_device *)
{
	return "mlx5_fake";
}

bool
dv_is_supported(ibv_device *)
{
	return true;
}

ibv_context *
new_context(void)
{
	g_dev.contexts_open++;
	ibv_context *c = new ibv_context();
	c->device = &g_ibdev;
	return c;
}

ibv_context *
dv_open_device(ibv_device *, mlx5dv_context_attr *)
{
	if (!g_dev.devx) {
		errno = EPERM;
		return nullptr;
	}
	return new_context();
}

ibv_context *
open_device(ibv_device *)
{
	return new_context();
}

int
close_device(ibv_context *c)
{
	g_dev.closes++;
	g_dev.contexts_open--;
	delete c;
	return 0;
}

int
query_device(ibv_context *, ibv_device_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->node_guid = htobe64(g_dev.guid);
	attr->phys_port_cnt = g_dev.ports;
	attr->max_qp = 1 << 17;
	return 0;
}

int
devx_general_cmd(ibv_context *, const void *in, size_t inlen, void *out, size_t outlen)
{
	uint16_t opcode = 0, op_mod = 0;
	mlx5_qpn_prm_in_opcode(in, inlen, &opcode, &op_mod);
	const bool general = (op_mod >> 1) == MLX5_QPN_HCA_CAP_TYPE_GENERAL;
	(general ? g_dev.caps_queries : g_dev.caps2_queries)++;
	if (opcode != MLX5_QPN_CMD_OP_QUERY_HCA_CAP || (general && !g_dev.caps_ok)) {
		mlx5_qpn_prm_out_set_status(out, outlen, MLX5_QPN_CMD_STAT_BAD_SYS_STATE_ERR, 0x51);
		errno = EREMOTEIO;
		return EREMOTEIO;
	}
	mlx5_qpn_caps c{};
	c.general_obj_types = g_dev.bit44 ? MLX5_QPN_HCA_CAP_GENERAL_OBJECT_TYPES_RESERVED_QPN : 0;
	c.log_max_qp = 17;
	c.log_reserved_qpn_granularity = g_dev.gran;
	c.log_reserved_qpn_max_alloc = g_dev.max_alloc;
	c.log_max_num_reserved_qpn = g_dev.max_num;
	mlx5_qpn_prm_hca_cap_out(out, outlen, op_mod, &c);
	if (general)
		mlx5_qpn_prm::set(static_cast<uint8_t *>(out) + MLX5_QPN_PRM_HCA_CAP_OFFSET,
				  {MLX5_QPN_HW_CAP_HCA_CAP_2_BIT, 1}, g_dev.hca_cap_2);
	return 0;
}

mlx5dv_devx_obj *
devx_obj_create(ibv_context *, const void *in, size_t inlen, void *out, size_t outlen)
{
	mlx5_qpn_prm_obj_hdr h{};
	mlx5_qpn_prm_obj_hdr_parse(in, inlen, &h);
	g_dev.create_logs.push_back(h.log_obj_range);
	uint8_t st = g_dev.create_status;
	if (h.obj_type != MLX5_QPN_OBJ_TYPE_RESERVED_QPN || h.log_obj_range > g_dev.fw_max_log ||
	    h.log_obj_range < g_dev.gran)
		st = MLX5_QPN_CMD_STAT_BAD_PARAM_ERR;
	if (st != 0) {
		/* As the kernel: the outbox is copied back and the ioctl fails with EREMOTEIO
		 * (rdma-core's mlx5_get_cmd_status_err() then reads the status). */
		mlx5_qpn_prm_out_set_status(out, outlen, st, 0x1234);
		errno = EREMOTEIO;
		return nullptr;
	}
	/* Ranges aligned to their size, one after the other above 0x1000. */
	const uint32_t size = 1u << h.log_obj_range;
	uint32_t id = (0x1000 + g_dev.next_obj + size - 1) & ~(size - 1);
	g_dev.next_obj = id + size - 0x1000;
	mlx5_qpn_prm_create_obj_out(out, outlen, id);
	g_dev.objs_live++;
	return reinterpret_cast<mlx5dv_devx_obj *>(new FakeObj{id});
}

int
devx_obj_destroy(mlx5dv_devx_obj *o)
{
	delete reinterpret_cast<FakeObj *>(o);
	g_dev.objs_live--;
	g_dev.objs_destroyed++;
	return 0;
}

int
reserved_qpn_alloc(ibv_context *, uint32_t *qpn)
{
	g_dev.single_calls++;
	*qpn = g_dev.next_qpn++;
	return 0;
}

int
reserved_qpn_dealloc(ibv_context *, uint32_t)
{
	g_dev.single_calls++;
	return 0;
}

mlx5dv_devx_uar *
devx_alloc_uar(ibv_context *, uint32_t)
{
	g_dev.uars_live++;
	mlx5dv_devx_uar *u = new mlx5dv_devx_uar();
	u->page_id = 7;
	return u;
}

void
devx_free_uar(mlx5dv_devx_uar *u)
{
	g_dev.uars_live--;
	g_dev.uars_freed++;
	delete u;
}

ibv_pd *
alloc_pd(ibv_context *c)
{
	g_dev.pds_live++;
	ibv_pd *pd = new ibv_pd();
	pd->context = c;
	return pd;
}

int
dealloc_pd(ibv_pd *pd)
{
	g_dev.pds_live--;
	delete pd;
	return 0;
}

ibv_cq *
create_cq(ibv_context *c, int cqe, void *, ibv_comp_channel *, int)
{
	g_dev.cqs_live++;
	g_dev.cq_depths.push_back(cqe);
	FakeCq *f = new FakeCq();
	f->cq.context = c;
	/* As libmlx5: cqe + 1 rounded up to a power of two, every CQE invalid (opcode 0xf). */
	uint32_t n = 1;
	while (n < uint32_t(cqe) + 1)
		n <<= 1;
	f->cq.cqe = int(n) - 1;
	f->ring.assign(size_t(n) * 64, 0);
	for (uint32_t i = 0; i < n; i++)
		f->ring[size_t(i) * 64 + 63] = 0xf0;
	g_last_cq = f;
	return &f->cq;
}

int
destroy_cq(ibv_cq *cq)
{
	g_dev.cqs_live--;
	if (g_last_cq == reinterpret_cast<FakeCq *>(cq))
		g_last_cq = nullptr;
	delete reinterpret_cast<FakeCq *>(cq);
	return 0;
}

FakeQp *
new_qp(ibv_pd *pd, ibv_qp_type type, uint32_t qpn)
{
	/* The driver's control thread creates QPs while a test reads the count: atomic both ways. */
	std::atomic_ref<int>(g_dev.qps_live).fetch_add(1);
	FakeQp *f = new FakeQp();
	f->qp.pd = pd;
	f->qp.qp_num = qpn;
	f->qp.qp_type = type;
	return f;
}

ibv_qp *
create_qp(ibv_pd *pd, ibv_qp_init_attr *attr)
{
	if (attr->qp_type != IBV_QPT_UD || attr->send_cq == nullptr ||
	    attr->send_cq != attr->recv_cq)
		g_dev.bad_qp_attrs++;
	return &new_qp(pd, attr->qp_type, g_dev.next_qpn++)->qp;
}

int
destroy_qp(ibv_qp *qp)
{
	std::atomic_ref<int>(g_dev.qps_live).fetch_sub(1);
	g_dev.qps_destroyed++;
	FakeQp *f = reinterpret_cast<FakeQp *>(qp);
	if (f->dct)
		g_dcts.erase(qp->qp_num);
	if (f->dc && !f->dct) {
		g_dcis.erase(qp->qp_num);
		munmap(f->dbrec_page, 4096);
		munmap(f->reg_page, 4096);
	}
	delete f;
	return 0;
}

ibv_qp *
dv_create_qp(ibv_context *, ibv_qp_init_attr_ex *a, mlx5dv_qp_init_attr *dv)
{
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
	g_dev.dv_qps.push_back(r);
	if (g_dev.dv_create_qp_errno != 0) {
		errno = g_dev.dv_create_qp_errno;
		return nullptr;
	}
	const bool dct = r.dc_type == MLX5DV_DCTYPE_DCT;
	/* A DCT has no number until RTR (the kernel creates it there). */
	FakeQp *f = new_qp(a->pd, IBV_QPT_DRIVER, dct ? 0 : g_dev.next_qpn++);
	f->dc = true;
	f->dct = dct;
	f->cq = reinterpret_cast<FakeCq *>(a->send_cq);
	f->srq = reinterpret_cast<FakeSrq *>(a->srq);
	f->key = r.key;
	if (!dct) {
		/* As libmlx5 sizes it: WRs x the WQE (ctrl + AV + inline) in BBs, power of two. */
		uint32_t wqe = (16 + 48 + 4 + a->cap.max_inline_data + 63) / 64;
		uint32_t bbs = 1;
		while (bbs < a->cap.max_send_wr * wqe)
			bbs <<= 1;
		f->sq.assign(size_t(bbs) * 64, 0);
		f->dbrec_page = page();
		f->reg_page = page();
		g_dcis[f->qp.qp_num] = f;
	}
	return &f->qp;
}

int
modify_qp(ibv_qp *qp, ibv_qp_attr *a, int mask)
{
	g_dev.modifies.push_back({qp->qp_num, int(a->qp_state), mask, int(a->port_num),
				  int(a->path_mtu), int(a->min_rnr_timer), *a});
	FakeQp *f = reinterpret_cast<FakeQp *>(qp);
	if (f->dct && a->qp_state == IBV_QPS_RTR) {
		qp->qp_num = g_dev.next_qpn++; /* rdma-core: qp_num = the DCT number from RTR */
		g_dcts[qp->qp_num] = f;
	}
	return 0;
}

int
query_port(ibv_context *, uint8_t port, _compat_ibv_port_attr *pa)
{
	g_dev.ports_queried.push_back(port);
	ibv_port_attr *p = reinterpret_cast<ibv_port_attr *>(pa);
	p->active_mtu = IBV_MTU_4096;
	p->link_layer = IBV_LINK_LAYER_INFINIBAND;
	return 0;
}

ibv_srq *
create_srq(ibv_pd *pd, ibv_srq_init_attr *a)
{
	g_dev.srqs_live++;
	g_dev.srq_max_wr = int(a->attr.max_wr);
	FakeSrq *f = new FakeSrq();
	f->srq.pd = pd;
	/* As libmlx5: max_wr + 1 WQEs rounded up to a power of two, linked i -> i + 1. */
	f->n = 1;
	while (f->n < a->attr.max_wr + 1)
		f->n <<= 1;
	f->wqes.assign(size_t(f->n) * 32, 0);
	for (uint32_t i = 0; i < f->n; i++) {
		uint16_t next = htobe16(uint16_t((i + 1) & (f->n - 1)));
		memcpy(&f->wqes[size_t(i) * 32 + 2], &next, 2);
	}
	return &f->srq;
}

int
destroy_srq(ibv_srq *s)
{
	g_dev.srqs_live--;
	delete reinterpret_cast<FakeSrq *>(s);
	return 0;
}

ibv_mr *
reg_mr(ibv_pd *pd, void *addr, size_t len, int access)
{
	g_dev.mrs_live++;
	g_dev.mr_access = access;
	FakeMr *f = new FakeMr();
	f->mr.pd = pd;
	f->mr.addr = addr;
	f->mr.length = len;
	f->mr.lkey = 0x500 + g_dev.mrs_made++;
	g_mrs[f->mr.lkey] = f;
	return &f->mr;
}

int
dereg_mr(ibv_mr *mr)
{
	g_dev.mrs_live--;
	g_mrs.erase(mr->lkey);
	delete reinterpret_cast<FakeMr *>(mr);
	return 0;
}

/* As libmlx5's mlx5_create_ah for InfiniBand, with the installed struct mlx5_wqe_av. */
ibv_ah *
create_ah(ibv_pd *pd, ibv_ah_attr *a)
{
	g_dev.ahs_live++;
	g_dev.ah_attrs.push_back(*a);
	FakeAh *f = new FakeAh();
	f->ah.pd = pd;
	f->av.stat_rate_sl = (a->static_rate << 4) | (a->sl & 0xf);
	f->av.fl_mlid = a->src_path_bits & 0x7f;
	f->av.rlid = htobe16(a->dlid);
	if (a->is_global) {
		f->av.tclass = a->grh.traffic_class;
		f->av.hop_limit = a->grh.hop_limit;
		f->av.grh_gid_fl = htobe32(a->grh.flow_label | (1u << 30) |
					   (uint32_t(a->grh.sgid_index) << 20));
		memcpy(f->av.rgid, a->grh.dgid.raw, 16);
	}
	g_last_av = f->av;
	return &f->ah;
}

int
destroy_ah(ibv_ah *ah)
{
	g_dev.ahs_live--;
	delete reinterpret_cast<FakeAh *>(ah);
	return 0;
}

int
dv_init_obj(mlx5dv_obj *o, uint64_t type)
{
	g_dev.init_objs++;
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
		o->qp.out->bf.size = g_dev.bf_size;
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

struct mlx5_qpn_glue
make_table(void)
{
	struct mlx5_qpn_glue g;
	memset(&g, 0, sizeof(g));
	g.get_device_list = get_device_list;
	g.free_device_list = free_device_list;
	g.get_device_name = get_device_name;
	g.open_device = open_device;
	g.close_device = close_device;
	g.query_device = query_device;
	g.alloc_pd = alloc_pd;
	g.dealloc_pd = dealloc_pd;
	g.create_cq = create_cq;
	g.destroy_cq = destroy_cq;
	g.create_qp = create_qp;
	g.destroy_qp = destroy_qp;
	g.query_port = query_port;
	g.modify_qp = modify_qp;
	g.create_srq = create_srq;
	g.destroy_srq = destroy_srq;
	g.create_ah = create_ah;
	g.destroy_ah = destroy_ah;
	g.reg_mr = reg_mr;
	g.dereg_mr = dereg_mr;
	g.dv_create_qp = dv_create_qp;
	g.dv_init_obj = dv_init_obj;
	g.dv_is_supported = dv_is_supported;
	g.dv_open_device = dv_open_device;
	g.devx_general_cmd = devx_general_cmd;
	g.devx_obj_create = devx_obj_create;
	g.devx_obj_destroy = devx_obj_destroy;
	g.reserved_qpn_alloc = reserved_qpn_alloc;
	g.reserved_qpn_dealloc = reserved_qpn_dealloc;
	g.devx_alloc_uar = devx_alloc_uar;
	g.devx_free_uar = devx_free_uar;
	return g;
}

const struct mlx5_qpn_glue g_table = make_table();

} // namespace

FakeDevice &
fake()
{
	return g_dev;
}

const struct mlx5_qpn_glue *
fake_glue()
{
	return &g_table;
}

Scope::Scope()
{
	g_dev = FakeDevice();
	g_dcis.clear();
	g_dcts.clear();
	g_mrs.clear();
	mlx5_qpn_glue_set_override(&g_table);
}

Scope::~Scope() { mlx5_qpn_glue_set_override(nullptr); }

int
live_objects()
{
	return g_dev.objs_live + g_dev.uars_live + g_dev.pds_live + g_dev.cqs_live +
	       g_dev.qps_live + g_dev.contexts_open + g_dev.srqs_live + g_dev.ahs_live +
	       g_dev.mrs_live;
}

bool
dci_pages(uint32_t qpn, DciPages *p)
{
	auto it = g_dcis.find(qpn);
	if (it == g_dcis.end())
		return false;
	FakeQp *f = it->second;
	p->sq = f->sq.data();
	p->dbrec = static_cast<uint32_t *>(f->dbrec_page);
	p->reg = static_cast<uint64_t *>(f->reg_page);
	p->dbrec_page = f->dbrec_page;
	p->reg_page = f->reg_page;
	return true;
}

uint8_t *
last_cq_ring()
{
	return g_last_cq ? g_last_cq->ring.data() : nullptr;
}

uint32_t *
last_cq_dbrec()
{
	return g_last_cq ? g_last_cq->dbrec : nullptr;
}

const struct mlx5_wqe_av &
last_av()
{
	return g_last_av;
}

namespace {

/* The pages a doorbell_order() run traps, and the order of their first writes. */
void *g_trap[2];
char g_order[8];
int g_norder;

void
on_fault(int, siginfo_t *si, void *)
{
	uintptr_t pg = reinterpret_cast<uintptr_t>(si->si_addr) & ~uintptr_t(4095);
	for (int i = 0; i < 2; i++) {
		if (reinterpret_cast<uintptr_t>(g_trap[i]) == pg) {
			if (g_norder < int(sizeof(g_order)))
				g_order[g_norder++] = i == 0 ? 'D' : 'U';
			mprotect(g_trap[i], 4096,
				 PROT_READ | PROT_WRITE); /* the write then retries */
			return;
		}
	}
	abort(); /* a real crash */
}

} // namespace

std::string
doorbell_order_fn(const DciPages &p, void (*fn)(void *), void *arg)
{
	g_trap[0] = p.dbrec_page;
	g_trap[1] = p.reg_page;
	g_norder = 0;
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, &old);
	mprotect(p.dbrec_page, 4096, PROT_READ);
	mprotect(p.reg_page, 4096, PROT_READ);
	fn(arg);
	mprotect(p.dbrec_page, 4096, PROT_READ | PROT_WRITE);
	mprotect(p.reg_page, 4096, PROT_READ | PROT_WRITE);
	sigaction(SIGSEGV, &old, nullptr);
	return std::string(g_order, size_t(g_norder));
}

} // namespace hwfake
