/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake rdma-core of hw_fake_glue.h: one mlx5 device whose firmware answers QUERY_HCA_CAP
 * and CREATE/DESTROY_GENERAL_OBJECT(RESERVED_QPN) in the PRM layouts; the glue table over it
 * (the verbs objects are in hw_fake_objects.cpp, the rules in the files hw_fake_priv.h lists).
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
#include <set>
#include <string>

#include "common/mlx5_qpn_prm.h"
#include "hw/mlx5_qpn_hw_sizing.h"
#include "hw_fake_caps.h"
#include "mlx5_qpn.h"

namespace hwfake {
namespace priv {

std::map<uint32_t, FakeQp *> g_dcis, g_dcts;
std::map<uint32_t, FakeMr *> g_mrs;
Live g_live;
std::mutex g_mu;
FakeCq *g_last_cq;
mlx5_wqe_av g_last_av;

} // namespace priv

using namespace priv;

namespace {

FakeDevice g_dev;
struct ibv_device g_ibdev;
struct ibv_device *g_list[2] = {&g_ibdev, nullptr};

struct FakeObj {
	uint32_t id;
};

/* Contexts, DEVX objects and UARs handed out and not given back (freed at a Scope's end);
 * the contexts opened with DEVX; the asynchronous events not read yet; the QPNs
 * mlx5dv_reserved_qpn_alloc handed out. */
std::set<ibv_context *> g_ctxs;
std::set<ibv_context *> g_devx_ctxs;
std::vector<ibv_async_event> g_events;
std::set<uint32_t> g_single_qpns;
std::set<FakeObj *> g_objs;
std::set<mlx5dv_devx_uar *> g_uars;

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

__be64
get_device_guid(ibv_device *)
{
	return htobe64(g_dev.guid);
}

bool
dv_is_supported(ibv_device *)
{
	return true;
}

ibv_context *
new_context(bool devx)
{
	std::lock_guard<std::mutex> g(g_mu);
	g_dev.contexts_open++;
	ibv_context *c = new ibv_context();
	c->device = &g_ibdev;
	c->async_fd = -1; /* no file behind the fake's events (get_async_event reads them) */
	c->cmd_fd = -1;
	g_ctxs.insert(c);
	if (devx)
		g_devx_ctxs.insert(c);
	return c;
}

ibv_context *
dv_open_device(ibv_device *, mlx5dv_context_attr *)
{
	if (!g_dev.devx) {
		errno = EPERM;
		return nullptr;
	}
	return new_context(true);
}

ibv_context *
open_device(ibv_device *)
{
	return new_context(false);
}

/* As on a context whose async_fd is non-blocking: the oldest event, or -1 with EAGAIN. */
int
get_async_event(ibv_context *c, ibv_async_event *ev)
{
	std::lock_guard<std::mutex> g(g_mu);
	for (auto it = g_events.begin(); it != g_events.end(); ++it) {
		if (it->element.cq->context != c)
			continue;
		*ev = *it;
		g_events.erase(it);
		return 0;
	}
	errno = EAGAIN;
	return -1;
}

void
ack_async_event(ibv_async_event *)
{
}

int
close_device(ibv_context *c)
{
	std::lock_guard<std::mutex> g(g_mu);
	g_dev.closes++;
	g_dev.contexts_open--;
	g_ctxs.erase(c);
	g_devx_ctxs.erase(c);
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
	if (opcode == hwfake::cmd_query_lag) {
		/* lag_state: non-zero while the ports are bonded. */
		if (outlen < mlx5_qpn_prm::field_end(hwfake::query_lag_state)) {
			errno = EINVAL;
			return EINVAL;
		}
		memset(out, 0, outlen);
		mlx5_qpn_prm::set(static_cast<uint8_t *>(out), hwfake::query_lag_state,
				  g_dev.lag_active ? 1 : 0);
		return 0;
	}
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
	if (general) {
		uint8_t *cap = static_cast<uint8_t *>(out) + MLX5_QPN_PRM_HCA_CAP_OFFSET;
		mlx5_qpn_prm::set(cap, {MLX5_QPN_HW_CAP_HCA_CAP_2_BIT, 1}, g_dev.hca_cap_2);
		mlx5_qpn_prm::set(cap, hwfake::cap_max_wqe_sz_sq_dc, g_dev.max_wqe_sz_sq_dc);
		mlx5_qpn_prm::set(cap, hwfake::cap_dct, g_dev.dct_cap);
		mlx5_qpn_prm::set(cap, hwfake::cap_lag_dct, g_dev.lag_dct);
	}
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
	std::lock_guard<std::mutex> g(g_mu);
	g_dev.objs_live++;
	FakeObj *o = new FakeObj{id};
	g_objs.insert(o);
	return reinterpret_cast<mlx5dv_devx_obj *>(o);
}

int
devx_obj_destroy(mlx5dv_devx_obj *o)
{
	std::lock_guard<std::mutex> g(g_mu);
	g_objs.erase(reinterpret_cast<FakeObj *>(o));
	delete reinterpret_cast<FakeObj *>(o);
	g_dev.objs_live--;
	g_dev.objs_destroyed++;
	return 0;
}

/* libmlx5's _mlx5dv_reserved_qpn_alloc: EOPNOTSUPP unless the context read
 * general_obj_types with RESERVED_QPN (which it does over DEVX only); _dealloc: EINVAL for a
 * QPN it did not hand out. Both return the positive errno. */
int
reserved_qpn_alloc(ibv_context *c, uint32_t *qpn)
{
	std::lock_guard<std::mutex> g(g_mu);
	g_dev.single_calls++;
	if (!g_dev.bit44 || g_devx_ctxs.count(c) == 0)
		return EOPNOTSUPP;
	*qpn = g_dev.next_qpn++;
	g_single_qpns.insert(*qpn);
	return 0;
}

int
reserved_qpn_dealloc(ibv_context *, uint32_t qpn)
{
	std::lock_guard<std::mutex> g(g_mu);
	g_dev.single_calls++;
	if (g_single_qpns.erase(qpn) == 0) {
		errno = EINVAL;
		return EINVAL;
	}
	return 0;
}

mlx5dv_devx_uar *
devx_alloc_uar(ibv_context *, uint32_t)
{
	std::lock_guard<std::mutex> g(g_mu);
	g_dev.uars_live++;
	mlx5dv_devx_uar *u = new mlx5dv_devx_uar();
	u->page_id = 7;
	g_uars.insert(u);
	return u;
}

void
devx_free_uar(mlx5dv_devx_uar *u)
{
	std::lock_guard<std::mutex> g(g_mu);
	g_dev.uars_live--;
	g_dev.uars_freed++;
	g_uars.erase(u);
	delete u;
}

struct mlx5_qpn_glue
make_table(void)
{
	struct mlx5_qpn_glue g;
	memset(&g, 0, sizeof(g));
	g.get_device_list = get_device_list;
	g.free_device_list = free_device_list;
	g.get_device_name = get_device_name;
	g.get_device_guid = get_device_guid;
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
	g.get_async_event = get_async_event;
	g.ack_async_event = ack_async_event;
	g.modify_qp = modify_qp;
	g.create_srq = create_srq;
	g.destroy_srq = destroy_srq;
	g.create_ah = create_ah;
	g.destroy_ah = destroy_ah;
	g.reg_mr = reg_mr;
	g.dereg_mr = dereg_mr;
	g.query_gid_ex = query_gid_ex;
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

struct mlx5_qpn_glue
make_table_without_reserved_qpn(void)
{
	struct mlx5_qpn_glue g = make_table();
	g.reserved_qpn_alloc = nullptr;
	g.reserved_qpn_dealloc = nullptr;
	return g;
}

const struct mlx5_qpn_glue g_table_old = make_table_without_reserved_qpn();

/* Give back whatever the code under test left behind, then start from a fresh device. */
void
reset_all(void)
{
	free_leftovers();
	std::lock_guard<std::mutex> g(g_mu);
	for (ibv_context *c : g_ctxs)
		delete c;
	for (FakeObj *o : g_objs)
		delete o;
	for (mlx5dv_devx_uar *u : g_uars)
		delete u;
	g_ctxs.clear();
	g_devx_ctxs.clear();
	g_events.clear();
	g_single_qpns.clear();
	g_objs.clear();
	g_uars.clear();
	g_dev = FakeDevice();
}

} // namespace

void
priv::raise_cq_error(ibv_cq *cq)
{
	ibv_async_event ev{};
	ev.event_type = IBV_EVENT_CQ_ERR;
	ev.element.cq = cq;
	g_events.push_back(ev);
}

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

const struct mlx5_qpn_glue *
fake_glue_without_reserved_qpn()
{
	return &g_table_old;
}

Scope::Scope() : Scope(&g_table) {}

Scope::Scope(const struct mlx5_qpn_glue *table)
{
	reset_all();
	mlx5_qpn_glue_set_override(table);
}

Scope::~Scope()
{
	/* A device probed through the generic layer leaves its lease file, keyed by the fake's
	 * GUID: remove it while the fake still names the GUID (-EBUSY, nothing removed, if a
	 * device is still probed here). Only a GUID a test set, its own: the default one is
	 * shared by every process running these tests at once (the sanitizer suites run side by
	 * side), whose lease file may be in use, and it is one file, not one per run. */
	if (g_dev.guid != FakeDevice().guid)
		mlx5_qpn_dev_purge("mlx5_fake");
	mlx5_qpn_glue_set_override(nullptr);
	reset_all();
}

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
