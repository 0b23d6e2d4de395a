/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * In-process CM transport: the emulated fabric. Each node has one rte_ring (many producers,
 * one consumer) of pointers to fixed-size frame buffers taken from one rte_mempool shared by
 * the fabric, so memory is bounded and no allocation happens per frame. A full ring or an
 * exhausted pool drops the frame, as a real fabric would: the CM's retransmissions cope.
 */
#include "cm_internal.h"

#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_pause.h>
#include <rte_ring.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <cstring>

namespace {

constexpr unsigned kMaxNodes = 64;
constexpr size_t kNameMax = 16;

struct Slot {
	/*
	 * Set (release) once the frame is written, read (acquire) before it is read. The ring already
	 * orders the two on x86, but through compiler barriers that ThreadSanitizer cannot see; this
	 * flag makes the hand-over explicit in the C++ memory model at the cost of one store.
	 */
	std::atomic<uint32_t> full;
	uint64_t src;
	uint64_t sent_ns;
	uint16_t len;
	uint8_t data[MLX5_QPN_CM_FRAME_MAX];
};

struct Node {
	mlx5_qpn_cm_fabric *fab;
	uint64_t guid;
	rte_ring *ring;
};

} // namespace

struct mlx5_qpn_cm_fabric {
	char name[kNameMax + 1];
	unsigned max_nodes;
	unsigned ring_size;
	rte_mempool *mp;
	/* Written by attach() only, before traffic; senders read it without locks. */
	std::atomic<unsigned> nb_nodes;
	Node nodes[kMaxNodes];
	std::atomic<uint64_t> drops;
};

namespace {

Node *
find_node(mlx5_qpn_cm_fabric *fab, uint64_t guid)
{
	unsigned n = fab->nb_nodes.load(std::memory_order_acquire);
	for (unsigned i = 0; i < n; i++)
		if (fab->nodes[i].guid == guid)
			return &fab->nodes[i];
	return nullptr;
}

int
ring_send(void *ctx, uint64_t dst_guid, const void *frame, uint16_t len, uint64_t sent_ns)
{
	auto *self = static_cast<Node *>(ctx);
	mlx5_qpn_cm_fabric *fab = self->fab;
	if (frame == nullptr || len == 0 || len > MLX5_QPN_CM_FRAME_MAX)
		return -EINVAL;
	Node *dst = find_node(fab, dst_guid);
	if (dst == nullptr) {
		fab->drops.fetch_add(1, std::memory_order_relaxed);
		return -EHOSTUNREACH;
	}
	void *obj;
	if (rte_mempool_get(fab->mp, &obj) != 0) {
		fab->drops.fetch_add(1, std::memory_order_relaxed);
		return -ENOBUFS;
	}
	auto *s = static_cast<Slot *>(obj);
	/* Pairs with the receiver's release below: the slot came back through the mempool. */
	(void)s->full.load(std::memory_order_acquire);
	s->src = self->guid;
	s->sent_ns = sent_ns;
	s->len = len;
	std::memcpy(s->data, frame, len);
	s->full.store(1, std::memory_order_release);
	if (rte_ring_mp_enqueue(dst->ring, obj) != 0) {
		s->full.store(0, std::memory_order_relaxed);
		rte_mempool_put(fab->mp, obj);
		fab->drops.fetch_add(1, std::memory_order_relaxed);
		return -ENOBUFS;
	}
	return 0;
}

int
ring_recv_burst(void *ctx, mlx5_qpn_cm_frame *frames, unsigned int n)
{
	auto *self = static_cast<Node *>(ctx);
	if (frames == nullptr)
		return -EINVAL;
	void *objs[32];
	n = std::min(n, 32u);
	unsigned got = rte_ring_sc_dequeue_burst(self->ring, objs, n, nullptr);
	for (unsigned i = 0; i < got; i++) {
		auto *s = static_cast<Slot *>(objs[i]);
		while (s->full.load(std::memory_order_acquire) == 0)
			rte_pause();
		frames[i].src_guid = s->src;
		frames[i].sent_ns = s->sent_ns;
		frames[i].len = s->len;
		std::memcpy(frames[i].data, s->data, s->len);
		s->full.store(0, std::memory_order_release);
	}
	if (got != 0)
		rte_mempool_put_bulk(self->fab->mp, objs, got);
	return int(got);
}

} // namespace

extern "C" {

struct mlx5_qpn_cm_fabric *
mlx5_qpn_cm_fabric_create(const char *name, unsigned int max_nodes, unsigned int ring_size)
{
	if (name == nullptr || name[0] == '\0' || std::strlen(name) > kNameMax || max_nodes == 0 ||
	    max_nodes > kMaxNodes || ring_size < 2 || ring_size > 65536 ||
	    (ring_size & (ring_size - 1)) != 0) {
		CM_LOG(ERR,
		       "fabric create: invalid parameters (name of 1..%zu chars, 1..%u nodes, "
		       "ring size a power of two in 2..65536)",
		       kNameMax, kMaxNodes);
		rte_errno = EINVAL;
		return nullptr;
	}
	auto *fab = new (std::nothrow) mlx5_qpn_cm_fabric();
	if (fab == nullptr) {
		rte_errno = ENOMEM;
		return nullptr;
	}
	std::snprintf(fab->name, sizeof(fab->name), "%s", name);
	fab->max_nodes = max_nodes;
	fab->ring_size = ring_size;
	char mpname[64];
	std::snprintf(mpname, sizeof(mpname), "cmf_%s", name);
	/* Enough buffers for every ring to be full at once: a ring never finds the pool empty. */
	unsigned nb = max_nodes * ring_size;
	fab->mp = rte_mempool_create(mpname, nb, sizeof(Slot), 0, 0, nullptr, nullptr, nullptr,
				     nullptr, SOCKET_ID_ANY, 0);
	if (fab->mp == nullptr) {
		int err = rte_errno;
		CM_LOG(ERR, "fabric %s: cannot create frame pool of %u: %s", name, nb,
		       rte_strerror(err));
		delete fab;
		rte_errno = err;
		return nullptr;
	}
	return fab;
}

void
mlx5_qpn_cm_fabric_destroy(struct mlx5_qpn_cm_fabric *fab)
{
	if (fab == nullptr)
		return;
	unsigned n = fab->nb_nodes.load(std::memory_order_acquire);
	for (unsigned i = 0; i < n; i++) {
		void *obj;
		while (rte_ring_sc_dequeue(fab->nodes[i].ring, &obj) == 0)
			rte_mempool_put(fab->mp, obj);
		rte_ring_free(fab->nodes[i].ring);
	}
	rte_mempool_free(fab->mp);
	delete fab;
}

int
mlx5_qpn_cm_fabric_attach(struct mlx5_qpn_cm_fabric *fab, uint64_t guid,
			  struct mlx5_qpn_cm_transport *tp)
{
	if (fab == nullptr || tp == nullptr || guid == 0)
		return -EINVAL;
	if (find_node(fab, guid) != nullptr)
		return -EEXIST;
	unsigned idx = fab->nb_nodes.load(std::memory_order_relaxed);
	if (idx >= fab->max_nodes)
		return -ENOSPC;
	/* "cmf_" + 16 + "_" + two digits fits RTE_RING_NAMESIZE; rte_ring_create checks. */
	char rname[64];
	std::snprintf(rname, sizeof(rname), "cmf_%s_%u", fab->name, idx);
	rte_ring *r = rte_ring_create(rname, fab->ring_size, SOCKET_ID_ANY, RING_F_SC_DEQ);
	if (r == nullptr) {
		int err = rte_errno;
		CM_LOG(ERR, "fabric %s: cannot create ring %s: %s", fab->name, rname,
		       rte_strerror(err));
		return err == EEXIST ? -EEXIST : -ENOMEM;
	}
	Node &n = fab->nodes[idx];
	n.fab = fab;
	n.guid = guid;
	n.ring = r;
	fab->nb_nodes.store(idx + 1, std::memory_order_release);
	tp->ctx = &n;
	tp->send = ring_send;
	tp->recv_burst = ring_recv_burst;
	return 0;
}

uint64_t
mlx5_qpn_cm_fabric_drops(const struct mlx5_qpn_cm_fabric *fab)
{
	return fab != nullptr ? fab->drops.load(std::memory_order_relaxed) : 0;
}

} // extern "C"
