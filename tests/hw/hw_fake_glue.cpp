/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake rdma-core of hw_fake_glue.h: one mlx5 device whose firmware answers QUERY_HCA_CAP
 * and CREATE/DESTROY_GENERAL_OBJECT(RESERVED_QPN) in the PRM layouts, and verbs objects that
 * are plain heap structs with counters.
 */
#include "hw_fake_glue.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#include "hw/mlx5_qpn_hw_sizing.h"
#include "common/mlx5_qpn_prm.h"

namespace hwfake {
namespace {

FakeDevice g_dev;
struct ibv_device g_ibdev;
struct ibv_device *g_list[2] = {&g_ibdev, nullptr};

struct FakeObj {
	uint32_t id;
};

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
	attr->phys_port_cnt = 1;
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
	ibv_cq *cq = new ibv_cq();
	cq->context = c;
	cq->cqe = cqe;
	return cq;
}

int
destroy_cq(ibv_cq *cq)
{
	g_dev.cqs_live--;
	delete cq;
	return 0;
}

ibv_qp *
create_qp(ibv_pd *pd, ibv_qp_init_attr *attr)
{
	if (attr->qp_type != IBV_QPT_UD || attr->send_cq == nullptr ||
	    attr->send_cq != attr->recv_cq)
		g_dev.bad_qp_attrs++;
	g_dev.qps_live++;
	ibv_qp *qp = new ibv_qp();
	qp->pd = pd;
	qp->qp_num = g_dev.next_qpn++;
	qp->qp_type = attr->qp_type;
	return qp;
}

int
destroy_qp(ibv_qp *qp)
{
	g_dev.qps_live--;
	g_dev.qps_destroyed++;
	delete qp;
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
	mlx5_qpn_glue_set_override(&g_table);
}

Scope::~Scope() { mlx5_qpn_glue_set_override(nullptr); }

int
live_objects()
{
	return g_dev.objs_live + g_dev.uars_live + g_dev.pds_live + g_dev.cqs_live +
	       g_dev.qps_live + g_dev.contexts_open;
}

} // namespace hwfake
