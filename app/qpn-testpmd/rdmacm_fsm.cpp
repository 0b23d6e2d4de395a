/* SPDX-License-Identifier: BSD-3-Clause */
/* The rdma_cm state machine, the device check and the private data (rdmacm_fsm.h). */
#include "rdmacm_fsm.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <endian.h>

#include <mlx5_qpn/mlx5_qpn_cm.h>

namespace {

rdmacm_step
stay(rdmacm_state s)
{
	return rdmacm_step{s, 0, QPN_CONN_EV_ERROR, 0};
}

rdmacm_step
go(rdmacm_state s, uint16_t actions, qpn_conn_event_type deliver = QPN_CONN_EV_ERROR,
   uint16_t reason = 0)
{
	return rdmacm_step{s, actions, deliver, reason};
}

/* The engine gives the QPN back and releases; nothing it is told afterwards matters. */
rdmacm_step
release(uint16_t more = 0)
{
	return go(RC_ST_RELEASING, uint16_t(RC_ACT_RELEASE_QPN | more));
}

bool
live(rdmacm_state s)
{
	return s != RC_ST_FREE && s != RC_ST_RELEASING;
}

/* What ends a connection the same way on both sides; false: EVENT is not one of them. */
bool
common_end(rdmacm_state s, int event, int status, rdmacm_step *out)
{
	switch (event) {
	case RDMA_CM_EVENT_REJECTED:
		/* Both engines release on REJECTED (and count its reason). */
		*out = go(RC_ST_RELEASING, RC_ACT_DELIVER, QPN_CONN_EV_REJECTED,
			  rdmacm_rej_reason(status));
		return true;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RC_IN_CALL_FAILED:
	case RC_IN_REFUSED:
		*out = release(RC_ACT_COUNT_ERROR);
		return true;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		*out = release(RC_ACT_COUNT_ERROR | RC_ACT_CLOSE);
		return true;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		/* The address the connection was made from is gone (netdev down, address moved,
		 * bond failover): its route no longer holds, so it fails, at any stage. */
		*out = release(RC_ACT_COUNT_ERROR);
		return true;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		/* An established connection closes; before that, a DISCONNECTED is a failure. */
		*out = s == RC_ST_ESTABLISHED || s == RC_ST_DISCONNECTING || s == RC_ST_ACCEPTED ?
			       release() :
			       release(RC_ACT_COUNT_ERROR);
		return true;
	default:
		return false;
	}
}

rdmacm_step
active_step(rdmacm_state s, int event, int status)
{
	if (event == RC_IN_START)
		return s == RC_ST_FREE ? go(RC_ST_ADDR, 0) : stay(s);
	if (!live(s))
		return stay(s);
	switch (event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		return s == RC_ST_ADDR ? go(RC_ST_ROUTE, RC_ACT_RESOLVE_ROUTE) : stay(s);
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		/* The route names the device: check it before presenting its QPN. */
		return s == RC_ST_ROUTE ? go(RC_ST_CONNECTING, RC_ACT_CHECK | RC_ACT_CONNECT) :
					  stay(s);
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		/* No QP on the id: the REP comes as CONNECT_RESPONSE; its private data is checked,
		 * then establish sends the RTU. */
		return s == RC_ST_CONNECTING ? go(RC_ST_ESTABLISHED,
						  RC_ACT_CHECK | RC_ACT_ESTABLISH | RC_ACT_DELIVER,
						  QPN_CONN_EV_ESTABLISHED) :
					       stay(s);
	case RDMA_CM_EVENT_ESTABLISHED:
		return s == RC_ST_CONNECTING ?
			       go(RC_ST_ESTABLISHED, RC_ACT_DELIVER, QPN_CONN_EV_ESTABLISHED) :
			       stay(s);
	case RC_IN_DISCONNECT:
		/* A failed DREQ: the connection is closing already, its DISCONNECTED comes. */
		return s == RC_ST_ESTABLISHED && status == 0 ? go(RC_ST_DISCONNECTING, 0) : stay(s);
	case RDMA_CM_EVENT_DISCONNECTED:
		if (s == RC_ST_ESTABLISHED || s == RC_ST_DISCONNECTING)
			return go(RC_ST_RELEASING, RC_ACT_DELIVER, QPN_CONN_EV_CLOSED);
		break;
	default:
		break;
	}
	rdmacm_step out;
	return common_end(s, event, status, &out) ? out : stay(s);
}

rdmacm_step
passive_step(rdmacm_state s, int event, int status)
{
	switch (event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		/* Checked (device, private data) before the engine takes a QPN for it. */
		return s == RC_ST_FREE ? go(RC_ST_REQUESTED, RC_ACT_CHECK | RC_ACT_DELIVER,
					    QPN_CONN_EV_REQUEST) :
					 stay(s);
	case RC_IN_REFUSED:
		/* The engine never saw it and holds no QPN: reject and destroy here. */
		if (s == RC_ST_REQUESTED)
			return go(RC_ST_FREE,
				  RC_ACT_REJECT | RC_ACT_DESTROY_ID | RC_ACT_COUNT_ERROR);
		break;
	case RC_IN_ACCEPT:
		/* A failed accept: the engine rejects and releases (conn.h). */
		if (s == RC_ST_REQUESTED)
			return go(status == 0 ? RC_ST_ACCEPTED : RC_ST_RELEASING, 0);
		return stay(s);
	case RC_IN_REJECT:
		/* Our own reject: the engine releases next. */
		return s == RC_ST_REQUESTED || s == RC_ST_RELEASING ?
			       go(RC_ST_RELEASING, RC_ACT_REJECT) :
			       stay(s);
	case RDMA_CM_EVENT_ESTABLISHED:
		return s == RC_ST_ACCEPTED ?
			       go(RC_ST_ESTABLISHED, RC_ACT_DELIVER, QPN_CONN_EV_ESTABLISHED) :
			       stay(s);
	default:
		break;
	}
	if (!live(s))
		return stay(s);
	rdmacm_step out;
	return common_end(s, event, status, &out) ? out : stay(s);
}

} /* namespace */

rdmacm_step
rdmacm_fsm_step(bool passive, rdmacm_state state, int event, int status)
{
	/* The engine's release ends every connection, in any state, once. */
	if (event == RC_IN_RELEASE)
		return state == RC_ST_FREE ? stay(state) : go(RC_ST_FREE, RC_ACT_DESTROY_ID);
	return passive ? passive_step(state, event, status) : active_step(state, event, status);
}

unsigned
rdmacm_engine_events(bool passive, uint16_t actions, qpn_conn_event_type *out)
{
	unsigned n = 0;
	bool err = (actions & RC_ACT_COUNT_ERROR) != 0;
	bool rel = (actions & RC_ACT_RELEASE_QPN) != 0;
	if (err)
		out[n++] = QPN_CONN_EV_ERROR;
	if (rel && (passive || !err))
		out[n++] = QPN_CONN_EV_CLOSED;
	return n;
}

uint16_t
rdmacm_rej_reason(int status)
{
	return status > 0 && status < MLX5_QPN_CM_REJ_REASON_SLOTS ? uint16_t(status) : UINT16_MAX;
}

const char *
rdmacm_fail_reason(int input)
{
	switch (input) {
	case RDMA_CM_EVENT_ADDR_CHANGE:
		return "the local address changed (RDMA_CM_EVENT_ADDR_CHANGE)";
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return "the RDMA device was removed";
	case RDMA_CM_EVENT_ADDR_ERROR:
		return "address resolution failed";
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return "route resolution failed";
	case RDMA_CM_EVENT_UNREACHABLE:
		return "the peer is unreachable";
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return "connection error";
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		return "disconnected before it was established";
	case RC_IN_CALL_FAILED:
		return "an rdma_cm call failed";
	case RC_IN_REFUSED:
		return "refused by the device or private-data check";
	default:
		return "failed";
	}
}

bool
rdmacm_same_device(uint64_t id_guid_be, uint8_t id_port, uint64_t probed_guid, uint8_t probed_port,
		   std::string *why)
{
	char line[160];
	uint64_t id_guid = be64toh(id_guid_be);
	if (id_guid_be == 0) {
		*why = "the connection has no RDMA device (address not resolved to one)";
		return false;
	}
	if (id_guid != probed_guid) {
		snprintf(line, sizeof(line),
			 "routes through node GUID %016" PRIx64
			 ", not the probed device's %016" PRIx64 " (its QPNs are another device's)",
			 id_guid, probed_guid);
		*why = line;
		return false;
	}
	if (probed_port != 0 && id_port != probed_port) {
		snprintf(line, sizeof(line), "routes through port %u, not port %u", id_port,
			 probed_port);
		*why = line;
		return false;
	}
	return true;
}

size_t
rdmacm_pdata_put(const rdmacm_pdata &p, uint8_t *buf)
{
	uint16_t magic = htons(kRdmacmPdataMagic);
	uint32_t dctn = htonl(p.dctn);
	uint64_t key = htobe64(p.dc_key);
	memcpy(buf, &magic, 2);
	buf[2] = kRdmacmPdataVersion;
	buf[3] = 0;
	memcpy(buf + 4, &dctn, 4);
	memcpy(buf + 8, &key, 8);
	return kRdmacmPdataLen;
}

int
rdmacm_pdata_get(const void *buf, size_t len, rdmacm_pdata *p, std::string *why)
{
	const uint8_t *b = static_cast<const uint8_t *>(buf);
	if (b == nullptr || len < kRdmacmPdataLen) {
		*why = "private data too short (" + std::to_string(b == nullptr ? 0 : len) +
		       " bytes, need " + std::to_string(kRdmacmPdataLen) + ")";
		return -EINVAL;
	}
	uint16_t magic;
	uint32_t dctn;
	uint64_t key;
	memcpy(&magic, b, 2);
	memcpy(&dctn, b + 4, 4);
	memcpy(&key, b + 8, 8);
	if (ntohs(magic) != kRdmacmPdataMagic) {
		*why = "private data is not qpn-testpmd's (no magic)";
		return -EINVAL;
	}
	if (b[2] != kRdmacmPdataVersion) {
		*why = "private data version " + std::to_string(b[2]) + ", expected " +
		       std::to_string(kRdmacmPdataVersion);
		return -EINVAL;
	}
	dctn = ntohl(dctn);
	if (dctn > 0xffffff) {
		*why = "private data: DCT number over 24 bits";
		return -EINVAL;
	}
	p->dctn = dctn;
	p->dc_key = be64toh(key);
	return 0;
}

bool
rdmacm_pdata_check(const rdmacm_pdata &p, bool need_dct, std::string *why)
{
	if (need_dct && p.dctn == 0) {
		*why = "the peer's REP names no DCT (its --msgs-per-conn=0 or no data path): "
		       "nothing to send to";
		return false;
	}
	return true;
}

bool
rdmacm_dc_addr(const ibv_ah_attr &a, mlx5_qpn_dc_addr *out, std::string *why)
{
	if (a.port_num == 0) {
		*why = "the resolved route has no port";
		return false;
	}
	if (a.sl > 15 || a.grh.flow_label > 0xfffff) {
		*why = "the resolved route has SL " + std::to_string(a.sl) + " / flow label " +
		       std::to_string(a.grh.flow_label) + " (above 15 / 20 bits)";
		return false;
	}
	if (a.dlid == 0 && !a.is_global) {
		*why = "the resolved route has neither a LID nor a GRH";
		return false;
	}
	*out = mlx5_qpn_dc_addr{};
	out->port = a.port_num;
	out->sl = a.sl;
	out->dlid = a.dlid;
	out->is_global = a.is_global ? 1 : 0;
	if (a.is_global) {
		out->sgid_index = a.grh.sgid_index;
		out->hop_limit = a.grh.hop_limit;
		out->traffic_class = a.grh.traffic_class;
		out->flow_label = a.grh.flow_label;
		memcpy(out->dgid, a.grh.dgid.raw, sizeof(out->dgid));
	}
	return true;
}

namespace {

void
gid_str(const uint8_t *g, char *out, size_t len)
{
	if (inet_ntop(AF_INET6, g, out, socklen_t(len)) == nullptr)
		snprintf(out, len, "?");
}

} /* namespace */

bool
rdmacm_identify(bool has_device, uint64_t id_guid_be, uint8_t id_port, const uint8_t *id_sgid,
		const rdmacm_probed &probed, std::string *why)
{
	if (!has_device)
		return rdmacm_same_device(0, id_port, probed.guid, probed.port, why);
	if (id_guid_be == 0 && probed.guid != 0) {
		*why = "routes through a device with node GUID 0 (a VF without one), not the "
		       "probed device";
		return false;
	}
	if (id_guid_be != 0)
		return rdmacm_same_device(id_guid_be, id_port, probed.guid, probed.port, why);
	/* Both GUIDs 0 (VFs without one): the port's GIDs tell the VFs apart. */
	if (probed.port != 0 && id_port != probed.port) {
		*why = "routes through port " + std::to_string(id_port) + ", not port " +
		       std::to_string(probed.port);
		return false;
	}
	static const uint8_t zero[16] = {};
	if (id_sgid == nullptr || memcmp(id_sgid, zero, 16) == 0) {
		*why = "node GUID 0 (a VF) and no source GID on the connection: cannot tell the "
		       "device";
		return false;
	}
	for (unsigned i = 0; i < probed.nb_gids && i < kRdmacmMaxGids; i++)
		if (memcmp(id_sgid, probed.gids[i], 16) == 0)
			return true;
	char g[INET6_ADDRSTRLEN];
	gid_str(id_sgid, g, sizeof(g));
	*why = std::string("node GUID 0 (a VF): source GID ") + g +
	       " is not one of the probed port's " + std::to_string(probed.nb_gids) +
	       " GIDs (another VF's)";
	return false;
}

int
rdmacm_send_gate(rdmacm_state state, const rdmacm_pdata &peer)
{
	return state == RC_ST_ESTABLISHED && peer.dctn != 0 ? 0 : -ENOTCONN;
}

bool
rdmacm_dc_path(const ibv_ah_attr &a, uint8_t path_mtu, mlx5_qpn_dc_path *out, std::string *why)
{
	if (a.port_num == 0) {
		*why = "the resolved route has no port";
		return false;
	}
	if (a.sl > 15 || a.grh.flow_label > 0xfffff || path_mtu > IBV_MTU_4096) {
		*why = "the resolved route has SL " + std::to_string(a.sl) + " / flow label " +
		       std::to_string(a.grh.flow_label) + " / path MTU " +
		       std::to_string(path_mtu) + " (above 15 / 20 bits / 5)";
		return false;
	}
	*out = mlx5_qpn_dc_path{};
	out->port = a.port_num;
	out->sl = a.sl;
	out->path_mtu = path_mtu;
	out->static_rate = a.static_rate;
	out->is_global = a.is_global ? 1 : 0;
	if (a.is_global) {
		out->sgid_index = a.grh.sgid_index;
		out->hop_limit = a.grh.hop_limit;
		out->traffic_class = a.grh.traffic_class;
		out->flow_label = a.grh.flow_label;
	}
	return true;
}
