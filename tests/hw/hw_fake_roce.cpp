/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake device's ports (hw_fake_glue.h): InfiniBand or RoCE, the GID table with its types,
 * _ibv_query_gid_ex, the address vector libmlx5's mlx5_create_ah builds for each, the checks
 * the kernel makes of an AV, and the route a RoCE SEND needs to arrive.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "hw_fake_glue.h"
#include "hw_fake_priv.h"

namespace hwfake {

void
use_roce(FakeDevice &d)
{
	d.roce = true;
	d.gids.clear();
	FakeDevice::FakeGid g{};
	/* fe80::<interface id>: the port's EUI-64 (here the GUID, from which mlx5 derives it). */
	g.raw[0] = 0xfe;
	g.raw[1] = 0x80;
	uint64_t id = htobe64(d.guid);
	memcpy(g.raw + 8, &id, 8);
	g.type = IBV_GID_TYPE_ROCE_V1;
	d.gids.push_back(g);
	g.type = IBV_GID_TYPE_ROCE_V2;
	d.gids.push_back(g);
	/* ::ffff:192.0.2.10, the interface's IPv4 address, after the link-local pair. */
	memset(g.raw, 0, sizeof(g.raw));
	g.raw[10] = 0xff;
	g.raw[11] = 0xff;
	g.raw[12] = 192;
	g.raw[13] = 0;
	g.raw[14] = 2;
	g.raw[15] = 10;
	g.type = IBV_GID_TYPE_ROCE_V1;
	d.gids.push_back(g);
	g.type = IBV_GID_TYPE_ROCE_V2;
	d.gids.push_back(g);
}

namespace priv {

namespace {

/* Entries the port reports (gid_tbl_len); those past gids are empty. */
constexpr uint32_t MIN_GID_TBL_LEN = 16;

uint32_t
gid_tbl_len(void)
{
	const FakeDevice &d = fake();
	return d.gids.size() > MIN_GID_TBL_LEN ? uint32_t(d.gids.size()) : MIN_GID_TBL_LEN;
}

bool
port_ok(uint32_t port)
{
	return port >= 1 && port <= fake().ports;
}

bool
empty(const FakeDevice::FakeGid &g)
{
	static const uint8_t zero[16] = {};
	return memcmp(g.raw, zero, 16) == 0;
}

} // namespace

const FakeDevice::FakeGid *
gid_at(uint32_t index)
{
	static FakeDevice::FakeGid ib;
	const FakeDevice &d = fake();
	if (!d.roce && d.gids.empty()) {
		/* InfiniBand: one entry, the default subnet prefix and the port GUID. */
		if (index != 0)
			return nullptr;
		memset(&ib, 0, sizeof(ib));
		ib.raw[0] = 0xfe;
		ib.raw[1] = 0x80;
		uint64_t id = htobe64(d.guid);
		memcpy(ib.raw + 8, &id, 8);
		ib.type = IBV_GID_TYPE_IB;
		return &ib;
	}
	if (index >= d.gids.size() || empty(d.gids[index]))
		return nullptr;
	return &d.gids[index];
}

int
port_active_mtu(void)
{
	return fake().active_mtu;
}

int
query_port(ibv_context *, uint8_t port, _compat_ibv_port_attr *pa)
{
	std::lock_guard<std::mutex> g(g_mu);
	FakeDevice &d = fake();
	d.ports_queried.push_back(port);
	if (!port_ok(port))
		return EINVAL;
	ibv_port_attr *p = reinterpret_cast<ibv_port_attr *>(pa);
	/* The exported entry (IBVERBS_1.1) fills struct _compat_ibv_port_attr: ibv_port_attr up
	 * to and with flags (libibverbs/verbs.c, __lib_query_port with the compat length), not
	 * port_cap_flags2 and active_speed_ex behind it. */
	memset(p, 0, offsetof(ibv_port_attr, flags) + sizeof(p->flags));
	p->state = IBV_PORT_ACTIVE;
	p->max_mtu = IBV_MTU_4096;
	p->active_mtu = ibv_mtu(d.active_mtu);
	p->gid_tbl_len = int(gid_tbl_len());
	p->pkey_tbl_len = 1;
	p->lid = d.roce ? 0 : 0x10;
	p->link_layer = d.roce ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
	p->flags = d.grh_required ? IBV_QPF_GRH_REQUIRED : 0;
	return 0;
}

int
query_gid_ex(ibv_context *, uint32_t port, uint32_t index, ibv_gid_entry *e, uint32_t flags,
	     size_t entry_size)
{
	std::lock_guard<std::mutex> g(g_mu);
	if (flags != 0 || e == nullptr || entry_size < sizeof(*e) || !port_ok(port) ||
	    index >= gid_tbl_len())
		return EINVAL;
	const FakeDevice::FakeGid *gid = gid_at(index);
	if (gid == nullptr)
		return ENODATA; /* an empty entry, as the kernel's rdma_get_gid_attr says */
	memset(e, 0, sizeof(*e));
	memcpy(e->gid.raw, gid->raw, 16);
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = gid->type;
	e->ndev_ifindex = fake().roce ? 2 : 0;
	return 0;
}

int
check_ah_attr(const ibv_ah_attr *a, bool sgid_checked)
{
	if (!port_ok(a->port_num))
		return EINVAL;
	/* RoCE has no LIDs: every packet carries a GRH (rdma_check_ah_attr); a port that
	 * requires a GRH refuses an AV without one (rdma_check_ah_attr for a QP's AV,
	 * mlx5_create_ah for an AH: IBV_QPF_GRH_REQUIRED). */
	if ((fake().roce || fake().grh_required) && !a->is_global)
		return EINVAL;
	if (a->is_global && sgid_checked && gid_at(a->grh.sgid_index) == nullptr)
		return EINVAL;
	return 0;
}

void
build_av(const ibv_ah_attr *a, mlx5_wqe_av *av)
{
	memset(av, 0, sizeof(*av));
	const uint8_t rate = a->static_rate != 0 ? uint8_t(a->static_rate + 5) : 0;
	uint32_t grh = 1;
	if (fake().roce) {
		const FakeDevice::FakeGid *s = gid_at(a->grh.sgid_index);
		if (s != nullptr && s->type == IBV_GID_TYPE_ROCE_V2) {
			/* rlid is the UDP source port: from the flow label, else fixed here (libmlx5
			 * draws one at random). */
			uint32_t fl = a->grh.flow_label;
			uint16_t sport = fl != 0 ?
						 uint16_t(((fl & 0x3fff) ^ ((fl & 0xfc000) >> 14)) |
							  0xc000) :
						 0xc000;
			av->rlid = htobe16(sport);
		}
		grh = 0; /* reserved on RoCE: every packet has a GRH */
		av->stat_rate_sl = uint8_t((rate << 4) | ((a->sl & 0x7) << 1)); /* sl: priority */
		/* The neighbour's MAC, as the kernel resolves it: a locally administered one
		 * derived from the destination GID. */
		av->rmac[0] = 0x02;
		memcpy(av->rmac + 2, a->grh.dgid.raw + 12, 4);
	} else {
		av->fl_mlid = a->src_path_bits & 0x7f;
		av->rlid = htobe16(a->dlid);
		av->stat_rate_sl = uint8_t((rate << 4) | (a->sl & 0xf));
	}
	if (a->is_global) {
		av->tclass = a->grh.traffic_class;
		av->hop_limit = a->grh.hop_limit;
		av->grh_gid_fl = htobe32((grh << 30) | (uint32_t(a->grh.sgid_index) << 20) |
					 (a->grh.flow_label & 0xfffff));
		memcpy(av->rgid, a->grh.dgid.raw, 16);
	}
}

bool
roce_route_ok(const uint8_t *wqe_av, const FakeQp *dct)
{
	const FakeDevice &d = fake();
	if (!d.roce)
		return true; /* InfiniBand routes by LID inside the subnet */
	uint32_t gfl;
	memcpy(&gfl, wqe_av + 28, 4);
	gfl = be32toh(gfl);
	const uint8_t hop = wqe_av[27];
	const FakeDevice::FakeGid *src = gid_at((gfl >> 20) & 0xff);
	if (src == nullptr || !dct->path.set || !dct->path.global)
		return false;
	const FakeDevice::FakeGid *dst = gid_at(dct->path.sgid_index);
	if (dst == nullptr || src->type != dst->type)
		return false; /* RoCE v1 and v2 are different wire formats */
	/* The SEND's hop limit must reach the DCT, the DCT's its ACK back. */
	if (int(hop) < d.route_hops || int(dct->path.hop_limit) < d.route_hops)
		return false;
	/* RoCE v1 is an Ethernet frame, not an IP packet: no router forwards it. */
	if (d.route_hops > 1 && src->type != IBV_GID_TYPE_ROCE_V2)
		return false;
	return true;
}

} // namespace priv
} // namespace hwfake
