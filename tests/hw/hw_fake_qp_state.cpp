/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ibv_modify_qp on the fake device: the state machine and attribute masks the kernel checks
 * — mlx5_ib's modify_dci_qp_is_ok() for a DCI, mlx5_ib_modify_dct() for a DCT, the core's
 * ib_modify_qp_is_ok() table for a UD QP — then the port, the path MTU and the AV. A refused
 * call returns EINVAL (rdma-core's ibv_modify_qp returns the positive errno), changes nothing,
 * and is recorded like the others (FakeDevice::modifies, with its rc).
 */
#include <errno.h>
#include <string.h>

#include <atomic>

#include "hw_fake_glue.h"
#include "hw_fake_priv.h"

namespace hwfake {
namespace priv {

namespace {

/* is_valid_mask(): every required bit, nothing beyond required and optional. */
bool
valid_mask(int mask, int req, int opt)
{
	return (mask & req) == req && (mask & ~(req | opt)) == 0;
}

constexpr int S = IBV_QP_STATE;

/* modify_dci_qp_is_ok: the kernel's (5.2 on) takes RESET from any state and an AV at
 * INIT->RTR; the older one (old_dci_rules) neither. */
bool
dci_ok(int cur, int nw, int mask)
{
	const bool old = fake().old_dci_rules;
	if (nw == IBV_QPS_RESET)
		return !old && valid_mask(mask, S, 0);
	if (nw == IBV_QPS_ERR)
		return cur != IBV_QPS_RESET && valid_mask(mask, S, 0);
	if (cur == IBV_QPS_RESET && nw == IBV_QPS_INIT)
		return valid_mask(mask, S | IBV_QP_PKEY_INDEX | IBV_QP_PORT, 0);
	if (cur == IBV_QPS_INIT && nw == IBV_QPS_INIT)
		return valid_mask(mask, S, IBV_QP_PKEY_INDEX | IBV_QP_PORT);
	if (cur == IBV_QPS_INIT && nw == IBV_QPS_RTR)
		return valid_mask(mask, S | IBV_QP_PATH_MTU,
				  IBV_QP_PKEY_INDEX | (old ? 0 : IBV_QP_AV));
	if (cur == IBV_QPS_RTR && nw == IBV_QPS_RTS)
		return valid_mask(mask,
				  S | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_SQ_PSN,
				  IBV_QP_MIN_RNR_TIMER);
	if (cur == IBV_QPS_RTS && nw == IBV_QPS_RTS)
		return valid_mask(mask, S, IBV_QP_MIN_RNR_TIMER);
	return false;
}

bool
dct_ok(int cur, int nw, int mask)
{
	if (cur == IBV_QPS_RESET && nw == IBV_QPS_INIT)
		return mask == (S | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT);
	if (cur == IBV_QPS_INIT && nw == IBV_QPS_RTR)
		return mask == (S | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU);
	return false;
}

/* ib_modify_qp_is_ok()'s qp_state_table, the UD column: required and optional attributes. */
struct Step {
	int cur, nw, req, opt;
};
constexpr int QKEY = IBV_QP_QKEY, CUR = IBV_QP_CUR_STATE;
const Step UD_STEPS[] = {
	{IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | QKEY, 0},
	{IBV_QPS_INIT, IBV_QPS_INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | QKEY},
	{IBV_QPS_INIT, IBV_QPS_RTR, 0, IBV_QP_PKEY_INDEX | QKEY},
	{IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN, CUR | QKEY},
	{IBV_QPS_RTS, IBV_QPS_RTS, 0, CUR | QKEY},
	{IBV_QPS_RTS, IBV_QPS_SQD, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY},
	{IBV_QPS_SQD, IBV_QPS_RTS, 0, CUR | QKEY},
	{IBV_QPS_SQD, IBV_QPS_SQD, 0, IBV_QP_PKEY_INDEX | QKEY},
	{IBV_QPS_SQE, IBV_QPS_RTS, 0, CUR | QKEY},
};

bool
ud_ok(int cur, int nw, int mask)
{
	if (nw == IBV_QPS_RESET || nw == IBV_QPS_ERR)
		return valid_mask(mask | S, S, 0); /* from any state, nothing else */
	for (const Step &s : UD_STEPS)
		if (s.cur == cur && s.nw == nw)
			return valid_mask(mask | S, S | s.req, s.opt);
	return false;
}

int
check(const FakeQp *f, const ibv_qp_attr *a, int mask)
{
	const bool dc = f->dc;
	if (!(mask & IBV_QP_STATE) && dc)
		return EINVAL; /* mlx5_ib: a DC QP's modify names its state */
	const int cur = f->state;
	const int nw = (mask & IBV_QP_STATE) ? int(a->qp_state) : cur;
	if (nw < IBV_QPS_RESET || nw > IBV_QPS_ERR)
		return EINVAL;
	const bool ok = f->dct ? dct_ok(cur, nw, mask) :
			dc     ? dci_ok(cur, nw, mask) :
				 ud_ok(cur, nw, mask);
	if (!ok)
		return EINVAL;
	if ((mask & IBV_QP_PORT) && (a->port_num < 1 || a->port_num > fake().ports))
		return EINVAL;
	if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096 ||
					 int(a->path_mtu) > port_active_mtu()))
		return EINVAL;
	/* PSNs are 24 bits (IBTA; the QP context's fields are 24 bits wide). */
	if (((mask & IBV_QP_SQ_PSN) && a->sq_psn > 0xffffff) ||
	    ((mask & IBV_QP_RQ_PSN) && a->rq_psn > 0xffffff))
		return EINVAL;
	if (mask & IBV_QP_AV) {
		/* The AV's port is the QP's (uverbs modify_qp: dest.port_num against port_num;
		 * the port set at INIT otherwise). */
		const int port = (mask & IBV_QP_PORT) ? int(a->port_num) : int(f->port);
		if (int(a->ah_attr.port_num) != port)
			return EINVAL;
		/* ib_rate_to_mlx5: 0 (the port's rate) or IB_RATE_2_5_GBPS (2) and above. */
		if (a->ah_attr.static_rate == 1 || a->ah_attr.static_rate > IBV_RATE_800_GBPS)
			return EINVAL;
		int rc = check_ah_attr(&a->ah_attr, true);
		if (rc != 0)
			return rc;
	}
	return 0;
}

void
record_path(FakeQp *f, const ibv_qp_attr *a, int mask)
{
	f->path = QpPath();
	f->path.set = true;
	f->path.mtu = int(a->path_mtu);
	if (mask & IBV_QP_AV) {
		f->path.global = a->ah_attr.is_global != 0;
		f->path.sl = a->ah_attr.sl;
		if (f->path.global) {
			f->path.sgid_index = a->ah_attr.grh.sgid_index;
			f->path.hop_limit = a->ah_attr.grh.hop_limit;
			f->path.tclass = a->ah_attr.grh.traffic_class;
		}
	}
	FakeDevice::RtrPath r{};
	r.qpn = f->qp.qp_num;
	r.dct = f->dct;
	r.is_global = f->path.global;
	r.sgid_index = f->path.sgid_index;
	r.hop_limit = f->path.hop_limit;
	r.traffic_class = f->path.tclass;
	r.sl = f->path.sl;
	r.path_mtu = f->path.mtu;
	fake().rtr_paths.push_back(r);
}

} // namespace

void
qp_reset(FakeQp *f)
{
	f->sq_ci = 0;
	f->db_valid = false;
	f->db_idx = 0;
	f->uar_last = 0;
	f->waiting = false;
	f->path = QpPath();
	f->timeout = 0;
	f->retry_cnt = 0;
	if (f->dbrec_page != nullptr) {
		/* libmlx5's mlx5_modify_qp to RESET: both doorbell record slots back to 0. */
		uint32_t *db = static_cast<uint32_t *>(f->dbrec_page);
		std::atomic_ref<uint32_t>(db[0]).store(0, std::memory_order_release);
		std::atomic_ref<uint32_t>(db[1]).store(0, std::memory_order_release);
	}
	if (f->reg_page != nullptr) {
		/* The device took the last doorbell: a write after RESET is a new one even if it
		 * carries the same 8 bytes. */
		std::atomic_ref<uint64_t>(*static_cast<uint64_t *>(f->reg_page))
			.store(0, std::memory_order_release);
	}
}

int
modify_qp(ibv_qp *qp, ibv_qp_attr *a, int mask)
{
	std::lock_guard<std::mutex> g(g_mu);
	FakeQp *f = reinterpret_cast<FakeQp *>(qp);
	int rc = check(f, a, mask);
	if (rc == 0 && fake().refuse_modify_errno != 0 && (mask & IBV_QP_STATE) &&
	    int(a->qp_state) == fake().refuse_modify_to)
		rc = fake().refuse_modify_errno;
	fake().modifies.push_back({qp->qp_num, int(a->qp_state), mask, int(a->port_num),
				   int(a->path_mtu), int(a->min_rnr_timer), *a, rc});
	if (rc != 0)
		return rc;
	const int cur = f->state;
	const int nw = (mask & IBV_QP_STATE) ? int(a->qp_state) : cur;
	if (mask & IBV_QP_PORT)
		f->port = a->port_num;
	if (nw == IBV_QPS_RESET)
		qp_reset(f);
	if (cur == IBV_QPS_INIT && nw == IBV_QPS_RTR) {
		if (f->dct) {
			/* rdma-core: qp_num = the DCT number the kernel creates at RTR */
			qp->qp_num = fake().next_qpn++;
			g_dcts[qp->qp_num] = f;
		}
		if (f->dc)
			record_path(f, a, mask);
	}
	if (cur == IBV_QPS_RTR && nw == IBV_QPS_RTS) {
		f->timeout = a->timeout;
		f->retry_cnt = a->retry_cnt;
	}
	f->state = nw;
	qp->state = ibv_qp_state(nw);
	return 0;
}

} // namespace priv
} // namespace hwfake
