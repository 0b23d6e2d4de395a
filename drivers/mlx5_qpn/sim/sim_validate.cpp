/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's checks: of the devargs an opener passes, and of everything read back
 * from the shared segment. The parameters the devargs make (SimCfg) are built and compared here.
 */
#include "sim_internal.h"

#include <atomic>

#include "mlx5_qpn_prm_status.h"

namespace mlx5_qpn_sim {

/* ---- validation of what is read back from the segment ----
 *
 * Another process of this user may have crashed mid-write or be buggy: nothing read back is used
 * before it is checked. hdr_ok() is cheap (a few dozen compares) and runs at every lock of the
 * device mutex; shm_valid() walks every table and runs at attach (and rec_ok()/dc checks guard
 * each use afterwards). */

/* The device parameters, as validate() checks devargs. NULL if fine, else the bad field. */
static const char *
cfg_bad(const SimCfg &c)
{
	if (c.nb_ports < 1 || c.nb_ports > kMaxPorts)
		return "ports";
	if (c.cap_reserved_qpn > 1)
		return "cap_reserved_qpn";
	if (c.aip > 1)
		return "aip";
	if (c.log_max_alloc > (c.aip ? kAipShift : kQpnBits))
		return "log_max_alloc";
	if (c.log_gran > c.log_max_alloc)
		return "log_gran";
	if (c.log_max_num > kQpnBits)
		return "log_max_num";
	if (c.log_max_qp > kQpnBits)
		return "log_max_qp";
	if (c.fault_fw_status >= MLX5_QPN_SIM_NB_STATUS)
		return "fault_fw_status";
	if (!QpnTable::cfg_ok(c.table) || c.table.nb_ports != c.nb_ports)
		return "QPN table parameters";
	return nullptr;
}

/* Header, parameters and the table's scalar fields. NULL if fine, else what is wrong. */
const char *
hdr_bad(const SimShm *s)
{
	if (s->pre.magic != kSimMagic)
		return "magic";
	if (s->pre.version != kSimVersion)
		return "layout version";
	if (s->pre.size != sizeof(SimShm))
		return "size";
	/* Written by other processes: atomic loads (atomic_ref<const T> is C++26, hence the
	 * const_cast; a load does not write). */
	auto &state = const_cast<uint32_t &>(s->pre.state);
	if (std::atomic_ref<uint32_t>(state).load(std::memory_order_acquire) != kSimStateReady)
		return "state";
	if (const char *bad = cfg_bad(s->cfg))
		return bad;
	if (!s->table.valid())
		return "QPN table";
	if (s->recs_live > kRecMaxLive)
		return "record count";
	auto &nb_active = const_cast<uint32_t &>(s->dc.nb_active);
	if (std::atomic_ref<uint32_t>(nb_active).load(std::memory_order_relaxed) > kDcMaxDci)
		return "DC active count";
	return nullptr;
}

/* A record: key inside the device's space, a known kind, an owner slot, a block inside the space
 * and aligned, a DC table index inside its table. */
bool
rec_ok(const SimShm *s, const SimRec &r)
{
	if (r.key == 0 || r.key > space_of(s) || r.owner >= kMaxOwners)
		return false;
	uint32_t idx = r.key - 1;
	switch (r.kind) {
	case REC_OBJ:
		return r.log_size <= kQpnBits && (idx & ((uint32_t(1) << r.log_size) - 1)) == 0 &&
		       (uint32_t(1) << r.log_size) <= space_of(s) - idx;
	case REC_QP:
		return r.log_size == 0;
	case REC_DCI:
		return r.log_size == 0 && r.aux < kDcMaxDci;
	case REC_DCT:
		return r.log_size == 0 && r.aux < kDcMaxDct;
	default:
		return false;
	}
}

bool
owners_ok(const SimPrefix &p)
{
	for (uint32_t i = 0; i < kMaxOwners; i++)
		if (p.owners[i].live > 1)
			return false;
	return true;
}

/* Everything, once, at attach (mutex held). NULL if fine, else what is wrong. */
const char *
shm_bad(const SimShm *s)
{
	if (const char *bad = hdr_bad(s))
		return bad;
	if (!owners_ok(s->pre))
		return "owner table";
	uint32_t n = 0;
	for (uint32_t i = 0; i < kRecCap; i++) {
		if (s->recs[i].key == 0)
			continue;
		if (!rec_ok(s, s->recs[i]))
			return "QPN record";
		n++;
	}
	if (n != s->recs_live)
		return "record count";
	for (uint32_t i = 0; i < kNbUars; i++)
		if (s->uar_meta[i].in_use > 1 || s->uar_meta[i].owner >= kMaxOwners)
			return "UAR table";
	if (!dc_valid(&s->dc, kMaxOwners, kNbUars))
		return "DC tables";
	return nullptr;
}

int
validate(const mlx5_qpn_devargs *da)
{
	const char *bad = nullptr;
	unsigned val = 0;
	const mlx5_qpn_sim_devargs *a = mlx5_qpn_sim_cargs(da);

	if (da->backend != &g_backend)
		bad = "backend";
	else if (!name_ok(da->name))
		bad = "name";
	else if (a->ports < 1 || a->ports > kMaxPorts)
		bad = "ports", val = a->ports;
	else if (a->cap_reserved_qpn != 0 && a->cap_reserved_qpn != 1)
		bad = "cap_reserved_qpn", val = unsigned(a->cap_reserved_qpn);
	else if (a->log_max_alloc > (a->aip ? kAipShift : kQpnBits))
		bad = "log_max_alloc", val = a->log_max_alloc;
	else if (a->log_gran > a->log_max_alloc)
		bad = "log_gran", val = a->log_gran;
	else if (a->log_max_num > kQpnBits)
		bad = "log_max_num", val = a->log_max_num;
	else if (a->log_max_qp > kQpnBits)
		bad = "log_max_qp", val = a->log_max_qp;
	else if (a->aip > 1)
		bad = "aip", val = a->aip;
	else if (a->fault_fw_status >= MLX5_QPN_SIM_NB_STATUS)
		bad = "fault_fw_status", val = a->fault_fw_status;
	else if (a->dc_err_every > 1000000)
		bad = "dc_err_every", val = a->dc_err_every;
	if (bad != nullptr) {
		SIM_LOG(ERR, "invalid device argument %s=%u", bad, val);
		return -EINVAL;
	}
	QpnTableCfg tc;
	tc.qpn_inc = a->qpn_inc;
	tc.qos_shift = a->qos_shift;
	tc.res_start = a->rsvd_first;
	tc.res_count = a->rsvd_count;
	tc.nb_ports = a->ports;
	tc.premark_special = true;
	if (!QpnTable::cfg_ok(tc)) {
		SIM_LOG(ERR,
			"invalid QPN table arguments qpn_inc=%u qos_shift=%u rsvd_first=%u rsvd_count=%u",
			a->qpn_inc, a->qos_shift, a->rsvd_first, a->rsvd_count);
		return -EINVAL;
	}
	return 0;
}

void
cfg_from(const mlx5_qpn_devargs *da, SimCfg *c)
{
	const mlx5_qpn_sim_devargs *a = mlx5_qpn_sim_cargs(da);
	*c = SimCfg();
	c->guid = a->guid ? a->guid : guid_from_name(da->name);
	c->nb_ports = a->ports;
	c->cap_reserved_qpn = uint32_t(a->cap_reserved_qpn);
	c->log_gran = a->log_gran;
	c->log_max_alloc = a->log_max_alloc;
	c->log_max_num = a->log_max_num;
	c->log_max_qp = a->log_max_qp;
	c->aip = a->aip;
	c->fault_nodevx = a->fault_nodevx;
	c->fault_fw_rate = a->fault_fw_rate;
	c->fault_fw_after = a->fault_fw_after;
	c->fault_fw_status = a->fault_fw_status;
	c->slow_cmd_us = a->slow_cmd_us;
	c->limit = a->limit;
	c->dc_err_every = a->dc_err_every;
	c->table.qpn_inc = a->qpn_inc;
	c->table.qos_shift = a->qos_shift;
	c->table.res_start = a->rsvd_first;
	c->table.res_count = a->rsvd_count;
	c->table.nb_ports = a->ports;
	c->table.premark_special = true; /* QP0/QP1 are never ordinary QPNs */
}

bool
cfg_equal(const SimCfg &a, const SimCfg &b)
{
	return a.guid == b.guid && a.nb_ports == b.nb_ports &&
	       a.cap_reserved_qpn == b.cap_reserved_qpn && a.log_gran == b.log_gran &&
	       a.log_max_alloc == b.log_max_alloc && a.log_max_num == b.log_max_num &&
	       a.log_max_qp == b.log_max_qp && a.aip == b.aip && a.fault_nodevx == b.fault_nodevx &&
	       a.fault_fw_rate == b.fault_fw_rate && a.fault_fw_after == b.fault_fw_after &&
	       a.fault_fw_status == b.fault_fw_status && a.slow_cmd_us == b.slow_cmd_us &&
	       a.limit == b.limit && a.dc_err_every == b.dc_err_every &&
	       a.table.qpn_inc == b.table.qpn_inc && a.table.qos_shift == b.table.qos_shift &&
	       a.table.res_start == b.table.res_start && a.table.res_count == b.table.res_count;
}

} // namespace mlx5_qpn_sim
