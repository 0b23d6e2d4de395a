/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's ops table (mlx5_qpn_sim_ops, the default backend), QUERY_HCA_CAP, and
 * the small public queries of mlx5_qpn_sim.h: node GUID, counters, reclaim. The entry points the
 * table names live with their objects (see sim_internal.h for the file map).
 */
#include "sim_internal.h"

#include <atomic>

#include <cerrno>
#include <cstring>

#include <rte_log.h>

RTE_LOG_REGISTER(mlx5_qpn_sim_logtype, mlx5_qpn.sim, INFO);

using namespace mlx5_qpn_sim;

namespace {

int
sim_query_caps(mlx5_qpn_backend *be, mlx5_qpn_caps *caps)
{
	if ((be == nullptr) || (caps == nullptr))
		return -EINVAL;
	SimShm *s = to_dev(be)->shm;
	int rc = dev_lock(s, to_dev(be)->name);
	if (rc)
		return rc;
	fw_begin(s, CMD_QUERY);
	memset(caps, 0, sizeof(*caps));
	caps->node_guid = s->cfg.guid;
	caps->general_obj_types = s->cfg.cap_reserved_qpn ? uint64_t(1) << 44 : 0;
	caps->reserved_qpn_obj = uint8_t(s->cfg.cap_reserved_qpn);
	caps->log_reserved_qpn_granularity = uint8_t(s->cfg.log_gran);
	caps->log_reserved_qpn_max_alloc = uint8_t(s->cfg.log_max_alloc);
	caps->log_max_num_reserved_qpn = uint8_t(s->cfg.log_max_num);
	caps->log_max_qp = uint8_t(s->cfg.log_max_qp);
	caps->nb_ports = uint8_t(s->cfg.nb_ports);
	caps->port = 1; /* one handle, its first port (the emulated fabric has no other) */
	caps->devx = s->cfg.fault_nodevx ? 0 : 1;
	caps->qpn_limit = to_dev(be)->qpn_limit;
	dev_unlock(s);
	return 0;
}

} // namespace

extern "C" {

const struct mlx5_qpn_dev_ops mlx5_qpn_sim_ops = {
	.open = sim_open,
	.query_caps = sim_query_caps,
	.range_reserve = sim_range_reserve,
	.range_release = sim_range_release,
	.qpn_reserve_one = sim_qpn_reserve_one,
	.qpn_release_one = sim_qpn_release_one,
	.qp_create = sim_qp_create,
	.qp_destroy = sim_qp_destroy,
	.uar_map = sim_uar_map,
	.uar_unmap = sim_uar_unmap,
	.dc = &mlx5_qpn_sim_dc_ops,
	.cmd_count = sim_cmd_count,
	.close = sim_close,
};

int
mlx5_qpn_sim_node_guid(struct mlx5_qpn_backend *be, uint64_t *guid)
{
	if ((be == nullptr) || (guid == nullptr))
		return -EINVAL;
	*guid = to_dev(be)->shm->cfg.guid;
	return 0;
}

int
mlx5_qpn_sim_stats_get(struct mlx5_qpn_backend *be, struct mlx5_qpn_sim_stats *st)
{
	if ((be == nullptr) || (st == nullptr))
		return -EINVAL;
	SimShm *s = to_dev(be)->shm;
	int rc = dev_lock(s, to_dev(be)->name);
	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	st->commands = s->ctr.commands;
	st->cmd_failed = s->ctr.cmd_failed;
	st->faults_injected = s->ctr.faults_injected;
	st->cmds_may_fail = s->fault_cmds;
	memcpy(st->failed_by_status, s->ctr.failed_by_status, sizeof(st->failed_by_status));
	st->objs_live = s->ctr.objs_live;
	st->qpns_reserved = s->ctr.qpns_reserved;
	st->qps_live = s->ctr.qps_live;
	st->uars_live = s->ctr.uars_live;
	st->qpns_used = s->table.used();
	for (uint32_t i = 0; i < kMaxOwners; i++)
		st->owners_live += static_cast<unsigned long>(s->pre.owners[i].live != 0);
	st->reclaimed_objs = s->ctr.reclaimed_objs;
	st->reclaimed_qps = s->ctr.reclaimed_qps;
	st->repairs = s->ctr.repairs;
	st->doorbells = std::atomic_ref<uint64_t>(s->ctr.doorbells).load(std::memory_order_relaxed);
	st->dc_wqes = s->dc.ctr.wqes;
	st->dc_delivered = s->dc.ctr.delivered;
	st->dc_err_cqes = s->dc.ctr.err_cqes;
	st->dc_stalls = s->dc.ctr.stalls;
	st->dc_sends = s->dc.ctr.sends;
	st->dc_dropped = s->dc.ctr.dropped;
	st->dc_key_violations = s->dc.ctr.key_violations;
	st->dc_faults = s->dc.ctr.faults;
	st->dc_resets = s->dc.ctr.resets;
	st->dc_rnr = s->dc.ctr.rnr;
	st->dc_cqs = s->dc.ctr.cqs;
	st->dc_dcis = s->dc.ctr.dcis;
	st->dc_dcts = s->dc.ctr.dcts;
	dev_unlock(s);
	return 0;
}

int
mlx5_qpn_sim_reclaim(struct mlx5_qpn_backend *be)
{
	if (be == nullptr)
		return -EINVAL;
	SimShm *s = to_dev(be)->shm;
	int rc = dev_lock(s, to_dev(be)->name);
	if (rc)
		return rc;
	rc = reclaim_dead(s);
	dev_unlock(s);
	return rc;
}

} /* extern "C" */
