/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The local path of the hardware backend's DC objects (mlx5_qpn_hw_dc_path.h): the path a
 * caller gives, or the port's default, resolved against the port (ibv_query_port,
 * ibv_query_gid_ex) and checked as the kernel checks an RTR's address vector, then the INIT,
 * RTR and RTS transitions that carry it, shared by creation and by a DCI's recovery.
 */
#include "mlx5_qpn_hw_dc_path.h"

#include <cerrno>
#include <cstring>

#include <mutex>

#include "mlx5_qpn_glue.h"
#include "mlx5_qpn_hw_log.h"

namespace mlx5_qpn_hw {

namespace {

/* Min RNR NAK timer of a DCT: 12 = 0.64 ms, the IBTA table's middle (UCX's default too). */
constexpr uint8_t kDctMinRnrTimer = 12;

/* A GID entry that RoCE v2 routes by an IPv4 address: type v2, address ::ffff:a.b.c.d. */
bool
gid_is_roce_v2_ipv4(const struct ibv_gid_entry &e)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return e.gid_type == IBV_GID_TYPE_ROCE_V2 && memcmp(e.gid.raw, mapped, 12) == 0;
}

int
query_gid(mlx5_qpn_hw_dev *dev, uint8_t port, uint32_t index, struct ibv_gid_entry *e)
{
	memset(e, 0, sizeof(*e));
	if (dev->glue->query_gid_ex == nullptr)
		return -EOPNOTSUPP; /* a glue table without it (tests' partial tables) */
	return neg_errno(
		dev->glue->query_gid_ex(dev->ctx, port, index, e, 0, sizeof(struct ibv_gid_entry)));
}

/* The path's own fields, as mlx5_set_path() and the AV checks bound them. 0, or -EINVAL with
 * one line naming the field. */
int
path_fields_check(const mlx5_qpn_hw_dev *dev, const struct mlx5_qpn_dc_path *p, uint8_t port,
		  const char *what)
{
	const char *bad = nullptr;
	unsigned v = 0;
	if (dev->caps.nb_ports != 0 && port > dev->caps.nb_ports)
		bad = "port", v = port;
	else if (p != nullptr && p->sl > 15)
		bad = "sl", v = p->sl;
	else if (p != nullptr && p->path_mtu > IBV_MTU_4096)
		bad = "path_mtu", v = p->path_mtu;
	else if (p != nullptr && p->static_rate > IBV_RATE_800_GBPS)
		bad = "static_rate", v = p->static_rate;
	else if (p != nullptr && p->is_global > 1)
		bad = "is_global", v = p->is_global;
	else if (p != nullptr && p->is_global && p->flow_label > 0xfffff)
		bad = "flow_label", v = p->flow_label;
	if (bad == nullptr)
		return 0;
	HW_LOG(ERR, "%s: %s: path refused: %s %u", dev->name, what, bad, v);
	return -EINVAL;
}

/* The InfiniBand GRH of a port that requires one (IBV_QPF_GRH_REQUIRED: the kernel refuses an
 * AV without it): the port's GID at index 0 (subnet prefix and port GUID) as the source, hop
 * limit 64, the same GID as the destination of the object's own path (a DCI's and a DCT's RTR
 * AV names no peer; each SEND's AV carries the route). 0, or -EINVAL with one line. */
int
ib_required_grh(mlx5_qpn_hw_dev *dev, const char *what, dc_rtr *out)
{
	struct ibv_gid_entry e;
	int rc = query_gid(dev, out->port, 0, &e);
	if (rc != 0) {
		HW_LOG(ERR, "%s: %s: port %u requires a GRH but its GID 0 is unreadable (%s)",
		       dev->name, what, out->port, strerror(-rc));
		return -EINVAL;
	}
	out->ah.is_global = 1;
	out->ah.grh.sgid_index = 0;
	out->ah.grh.hop_limit = 64;
	memcpy(out->ah.grh.dgid.raw, e.gid.raw, sizeof(out->ah.grh.dgid.raw));
	return 0;
}

/* The GRH of a path the caller gives: InfiniBand may go without one unless the port requires
 * it (then the port's own, ib_required_grh), RoCE may not; the source GID index must name an
 * entry. 0, or -EINVAL with one line. */
int
path_grh(mlx5_qpn_hw_dev *dev, const struct mlx5_qpn_dc_path *p, bool roce, bool grh_required,
	 const char *what, dc_rtr *out)
{
	if (!p->is_global) {
		if (!roce)
			return grh_required ? ib_required_grh(dev, what, out) : 0;
		HW_LOG(ERR, "%s: %s: path refused: RoCE port %u needs a GRH (is_global)", dev->name,
		       what, out->port);
		return -EINVAL;
	}
	struct ibv_gid_entry e;
	int rc = query_gid(dev, out->port, p->sgid_index, &e);
	if (rc != 0) {
		HW_LOG(ERR, "%s: %s: path refused: GID index %u of port %u has no entry (%s)",
		       dev->name, what, p->sgid_index, out->port, strerror(-rc));
		return -EINVAL;
	}
	out->ah.is_global = 1;
	out->ah.grh.sgid_index = p->sgid_index;
	out->ah.grh.hop_limit = p->hop_limit != 0 ? p->hop_limit : 64;
	out->ah.grh.traffic_class = p->traffic_class;
	out->ah.grh.flow_label = p->flow_label;
	return 0;
}

/* The RoCE default GRH: the first RoCE v2 entry of an IPv4 address, what rdma_cm resolves for
 * an IPv4 route (index 0 is the link-local RoCE v1 entry, which routes nowhere). 0, or -EINVAL
 * with one line. */
int
default_roce_grh(mlx5_qpn_hw_dev *dev, const struct ibv_port_attr &pa, const char *what,
		 dc_rtr *out)
{
	int n = pa.gid_tbl_len > 0 && pa.gid_tbl_len <= 1024 ? pa.gid_tbl_len : 256;
	struct ibv_gid_entry e;
	for (int i = 0; i < n; i++) {
		if (query_gid(dev, out->port, uint32_t(i), &e) != 0 || !gid_is_roce_v2_ipv4(e))
			continue;
		out->ah.is_global = 1;
		out->ah.grh.sgid_index = uint8_t(i);
		out->ah.grh.hop_limit = 64;
		return 0;
	}
	HW_LOG(ERR, "%s: %s: no usable RoCE v2 GID (an IPv4 address) on port %u: give a path",
	       dev->name, what, out->port);
	return -EINVAL;
}

} /* namespace */

int
dc_port_query(mlx5_qpn_hw_dev *dev, uint8_t port, const char *what, struct ibv_port_attr *pa)
{
	memset(pa, 0, sizeof(*pa));
	/* The exported entry fills ibv_port_attr up to and with flags (mlx5_qpn_glue.h); what
	 * follows stays 0. The header's ibv_query_port would reach the provider's op instead, a
	 * symbol this library does not link. */
	int rc = neg_errno(
		dev->glue->query_port(dev->ctx, port,
				      reinterpret_cast<struct _compat_ibv_port_attr *>(pa)));
	if (rc != 0)
		HW_LOG(ERR, "%s: %s: ibv_query_port(%u) failed (%s)", dev->name, what, port,
		       strerror(-rc));
	return rc;
}

/*
 * The RTR attributes for path (NULL: the port's default, mlx5_qpn_dc.h), checked as the kernel
 * checks them (rdma_check_ah_attr: RoCE needs a GRH; the GID index must name an entry;
 * mlx5_set_path: sl, rate) so that a refusal names the field. The path MTU never exceeds the
 * port's active MTU (rdma_cm and UCX take the smaller). 0, or -EINVAL with one line; the
 * negated errno of ibv_query_port.
 */
int
dc_resolve_path(mlx5_qpn_hw_dev *dev, const struct mlx5_qpn_dc_path *p, const char *what,
		dc_rtr *out)
{
	memset(out, 0, sizeof(*out));
	uint8_t port = p != nullptr && p->port != 0 ? p->port : dev->port;
	int rc = path_fields_check(dev, p, port, what);
	if (rc != 0)
		return rc;
	struct ibv_port_attr pa;
	rc = dc_port_query(dev, port, what, &pa);
	if (rc != 0)
		return rc;
	enum ibv_mtu active = pa.active_mtu != 0 ? pa.active_mtu : IBV_MTU_1024;
	bool roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	bool grh_required = (pa.flags & IBV_QPF_GRH_REQUIRED) != 0;
	out->port = port;
	out->mtu = p != nullptr && p->path_mtu != 0 && p->path_mtu < active ?
			   static_cast<enum ibv_mtu>(p->path_mtu) :
			   active;
	out->ah.port_num = port;
	out->ah.sl = p != nullptr ? p->sl : 0;
	out->ah.static_rate = p != nullptr ? p->static_rate : 0;
	if (p != nullptr)
		return path_grh(dev, p, roce, grh_required, what, out);
	if (!roce) /* the InfiniBand default: no GRH, unless the port requires one */
		return grh_required ? ib_required_grh(dev, what, out) : 0;
	return default_roce_grh(dev, pa, what, out);
}

/* One ibv_modify_qp step; the failing state is named in the log. */
int
dc_modify(mlx5_qpn_hw_dev *dev, struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
	  const char *what)
{
	int rc = neg_errno(dev->glue->modify_qp(qp, a, mask));
	if (rc != 0)
		HW_LOG(ERR, "%s: %s: ibv_modify_qp failed (%s)", dev->name, what, strerror(-rc));
	return rc;
}

namespace {

/*
 * INIT -> RTR. A DCI's AV is optional at RTR from kernel 5.2 on (modify_dci_qp_is_ok); an
 * earlier kernel refuses the mask bit with EINVAL. A DCI's RTR AV names no peer (each SEND's AV
 * carries the route), so on such a kernel the DCI goes to RTR without it: the refusal is
 * retried once without IBV_QP_AV, and when that passes the device remembers it (one line) and
 * its later DCIs leave the AV out at once.
 */
int
dci_rtr(mlx5_qpn_hw_dev *dev, struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, bool dct)
{
	if (dct)
		return dc_modify(dev, qp, a, mask, "DCT RTR");
	bool no_av;
	{
		std::lock_guard<std::mutex> g(dev->dc_lock);
		no_av = dev->dci_rtr_no_av;
	}
	if (no_av)
		return dc_modify(dev, qp, a, mask & ~IBV_QP_AV, "DCI RTR");
	int rc = neg_errno(dev->glue->modify_qp(qp, a, mask));
	if (rc != -EINVAL) {
		if (rc != 0)
			HW_LOG(ERR, "%s: DCI RTR: ibv_modify_qp failed (%s)", dev->name,
			       strerror(-rc));
		return rc;
	}
	rc = dc_modify(dev, qp, a, mask & ~IBV_QP_AV, "DCI RTR");
	if (rc != 0)
		return rc;
	std::lock_guard<std::mutex> g(dev->dc_lock);
	if (!dev->dci_rtr_no_av)
		HW_LOG(WARNING,
		       "%s: DCI RTR: this kernel takes no address vector at DCI INIT->RTR (its "
		       "modify_dci_qp_is_ok is older than 5.2): DCIs go to RTR without one, and "
		       "a DCI in ERR cannot be reset (kernel 5.2 or later recovers DCIs)",
		       dev->name);
	dev->dci_rtr_no_av = true;
	return 0;
}

} /* namespace */

/*
 * RESET -> INIT -> RTR (-> RTS for a DCI), with the masks the kernel requires of each
 * (modify_dci_qp_is_ok; a DCT's RTR creates it, mlx5_ib_modify_dct): the path's port at INIT,
 * its MTU and address vector at RTR, as UCX's uct_dc_mlx5_iface_create_dct and
 * uct_dc_mlx5_iface_dci_connect do.
 */
int
dc_to_ready(mlx5_qpn_hw_dev *dev, struct ibv_qp *qp, bool dct, const dc_rtr &rtr)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = rtr.port;
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (dct) /* SENDs only: no remote access, but the kernel wants the mask bit */
		mask |= IBV_QP_ACCESS_FLAGS;
	int rc = dc_modify(dev, qp, &a, mask, dct ? "DCT INIT" : "DCI INIT");
	if (rc)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = rtr.mtu;
	a.ah_attr = rtr.ah;
	mask = IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV;
	if (dct) {
		a.min_rnr_timer = kDctMinRnrTimer;
		mask |= IBV_QP_MIN_RNR_TIMER;
	}
	rc = dci_rtr(dev, qp, &a, mask, dct);
	if (rc || dct)
		return rc;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14; /* 4.096 us * 2^14 = 67 ms per try */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
	       IBV_QP_MAX_QP_RD_ATOMIC;
	return dc_modify(dev, qp, &a, mask, "DCI RTS");
}

} /* namespace mlx5_qpn_hw */
