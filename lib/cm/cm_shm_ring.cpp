/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared-memory fabric's per-node frame rings (layout and protocol: cm_shm.h): a Vyukov-style
 * bounded MPMC queue whose producers claim a slot before they copy, so that the single consumer
 * can skip a slot whose sender died, without a lock held across a copy.
 */
#include "cm_shm.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <ctime>

namespace cm_impl {
void (*shm_send_test_hook)(int stage) = nullptr;
uint64_t shm_stall_grace_ns = 1000000000ull;
} // namespace cm_impl

namespace cm_impl::shm {

namespace {

FrameSlot *
ring_of(const mlx5_qpn_cm_shm_fabric *fab, unsigned idx)
{
	auto *base = reinterpret_cast<uint8_t *>(fab->h) + sizeof(Header);
	return reinterpret_cast<FrameSlot *>(base) + size_t(idx % fab->max_nodes) * fab->slots;
}

void
log_corrupt(mlx5_qpn_cm_shm_fabric *fab, const char *what)
{
	if (!fab->corrupt_logged.exchange(true, std::memory_order_relaxed))
		CM_LOG(ERR, "shm fabric %s: shared memory %s%s is corrupted (%s)", fab->name,
		       kPrefix, fab->name, what);
}

/*
 * Position pos is claimed (the head is past it) but not published. True if the consumer may
 * skip it: its sender is dead, or never marked its claim within the grace period. The claim is
 * then SKIPPED, so a sender that was only slow backs off without touching the slot.
 */
bool
skip_unpublished(Attachment *a, FrameSlot &s, uint64_t pos, const char **why)
{
	Header *h = a->fab->h;
	uint64_t c = s.claim.load(std::memory_order_acquire);
	const uint64_t posbits = pos_bits(pos);
	if (claim_pos(c) == posbits) {
		*why = "its sender died while writing it";
		if ((c & 3) == CLAIM_SKIPPED)
			return true;
		unsigned user = unsigned(c >> 8) & 0xff;
		uint32_t gen = uint32_t(c >> 2) & 63;
		bool dead = true;
		if (user < kMaxUsers) {
			UserRec &u = h->users[user];
			dead = (u.gen.load(std::memory_order_acquire) & 63) != gen ||
			       !alive_of(u.proc);
		}
		if (!dead)
			return false; /* copying: it finishes soon */
	} else {
		*why = "its sender never claimed it (died before, or stalled past the grace period)";
		uint64_t now = qpn::shm::mono_ns();
		if (a->stall_pos != pos || a->stall_since == 0) {
			a->stall_pos = pos;
			a->stall_since = now;
			return false;
		}
		if (now - a->stall_since < cm_impl::shm_stall_grace_ns)
			return false;
	}
	return s.claim.compare_exchange_strong(c, claim_of(pos, 0, 0, CLAIM_SKIPPED),
					       std::memory_order_acq_rel,
					       std::memory_order_acquire);
}

} // namespace

/*
 * A new owner of a node slot fixes the one thing a consumer that died can leave behind: a slot
 * handed to the next lap while the tail was not advanced yet. (A consumer that died before
 * handing the slot back leaves it full: the new owner reads it again and drops it as stale.)
 */
void
repair_tail(mlx5_qpn_cm_shm_fabric *fab, unsigned idx)
{
	NodeHdr &n = fab->h->nodes[idx];
	const uint64_t cap = fab->slots, mask = cap - 1;
	FrameSlot *ring = ring_of(fab, idx);
	uint64_t pos = n.tail.load(std::memory_order_acquire);
	for (uint64_t k = 0;
	     k < cap && ring[pos & mask].seq.load(std::memory_order_acquire) == (pos & ~mask) + cap;
	     k++)
		pos++;
	n.tail.store(pos, std::memory_order_release);
}

int
shm_send(void *ctx, uint64_t dst_guid, const void *frame, uint16_t len, uint64_t sent_ns)
{
	auto *self = static_cast<Attachment *>(ctx);
	if (self == nullptr || frame == nullptr || len == 0 || len > MLX5_QPN_CM_FRAME_MAX)
		return -EINVAL;
	if (self->guid == 0)
		return -ENOTCONN; /* detached: the hooks outlived their node */
	mlx5_qpn_cm_shm_fabric *fab = self->fab;
	Header *h = fab->h;
	unsigned dst = MLX5_QPN_CM_SHM_MAX_NODES;
	for (unsigned i = 0; i < fab->max_nodes; i++) {
		if (h->nodes[i].state.load(std::memory_order_acquire) == NODE_IN_USE &&
		    h->nodes[i].guid.load(std::memory_order_relaxed) == dst_guid) {
			dst = i;
			break;
		}
	}
	if (dst == MLX5_QPN_CM_SHM_MAX_NODES || dst_guid == 0) {
		h->drops.fetch_add(1, std::memory_order_relaxed);
		return -EHOSTUNREACH;
	}
	NodeHdr &n = h->nodes[dst];
	FrameSlot *ring = ring_of(fab, dst);
	const uint64_t mask = fab->slots - 1;
	uint64_t pos = n.head.load(std::memory_order_relaxed);
	FrameSlot *s;
	for (unsigned stuck = 0;;) {
		s = &ring[pos & mask];
		uint64_t seq = s->seq.load(std::memory_order_acquire);
		auto dif = static_cast<int64_t>(seq - (pos & ~mask));
		if (dif == 0) {
			if (n.head.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed))
				break;
		} else if (dif < 0) {
			/* The slot still holds last lap's frame: the queue is full. */
			h->drops.fetch_add(1, std::memory_order_relaxed);
			return -ENOBUFS;
		} else {
			/* Another producer took pos: follow the head. A head that does not move
			 * while the slot claims a later lap is a corrupted ring: bounded. */
			uint64_t now = n.head.load(std::memory_order_relaxed);
			if (now == pos && ++stuck > 100000) {
				log_corrupt(fab, "ring sequence ahead of its head");
				h->drops.fetch_add(1, std::memory_order_relaxed);
				return -EIO;
			}
			pos = now;
		}
	}
	if (cm_impl::shm_send_test_hook != nullptr)
		cm_impl::shm_send_test_hook(1); /* position taken, slot not claimed */
	/* Claim the slot for this position unless the consumer gave up on it already. */
	const uint64_t mine = claim_of(pos, fab->user, fab->user_gen, CLAIM_WRITING);
	uint64_t c = s->claim.load(std::memory_order_acquire);
	for (;;) {
		if (claim_pos(c) >= pos_bits(pos)) {
			/* Skipped by the consumer after its grace period (and maybe taken by the
			 * next lap already): the slot is not ours. */
			h->drops.fetch_add(1, std::memory_order_relaxed);
			return -ETIMEDOUT;
		}
		if (s->claim.compare_exchange_weak(c, mine, std::memory_order_acq_rel,
						   std::memory_order_acquire))
			break;
	}
	if (cm_impl::shm_send_test_hook != nullptr)
		cm_impl::shm_send_test_hook(2); /* slot claimed, frame not published */
	s->src = self->guid;
	s->dst = dst_guid;
	s->sent_ns = sent_ns;
	s->len = len;
	std::memcpy(s->data, frame, len);
	s->seq.store((pos & ~mask) + 1, std::memory_order_release);
	return 0;
}

int
shm_recv_burst(void *ctx, mlx5_qpn_cm_frame *frames, unsigned int n)
{
	auto *self = static_cast<Attachment *>(ctx);
	if (self == nullptr || frames == nullptr)
		return -EINVAL;
	if (self->guid == 0)
		return -ENOTCONN; /* detached: the slot may be another process's queue now */
	Header *h = self->fab->h;
	NodeHdr &node = h->nodes[self->idx];
	FrameSlot *ring = ring_of(self->fab, self->idx);
	const uint64_t cap = self->fab->slots, mask = cap - 1;
	uint64_t pos = node.tail.load(std::memory_order_relaxed);
	unsigned got = 0;
	while (got < n) {
		FrameSlot &s = ring[pos & mask];
		uint64_t seq = s.seq.load(std::memory_order_acquire);
		const char *why = "";
		if (seq != (pos & ~mask) + 1) {
			/* Empty, a sender still copying, or a sender that died there. */
			if (node.head.load(std::memory_order_acquire) <= pos ||
			    !skip_unpublished(self, s, pos, &why))
				break;
			/* The claim is ours now, but its sender may have published and left just
			 * before it was judged (its user record is cleared at close): read again. */
			seq = s.seq.load(std::memory_order_acquire);
		}
		if (seq != (pos & ~mask) + 1) {
			h->drops.fetch_add(1, std::memory_order_relaxed);
			CM_LOG(WARNING,
			       "shm fabric %s: node %016" PRIx64 ": queue position %" PRIu64
			       " skipped: %s",
			       self->fab->name, self->guid, pos, why);
		} else {
			uint16_t len = s.len;
			if (s.dst == self->guid && len != 0 && len <= MLX5_QPN_CM_FRAME_MAX) {
				frames[got].src_guid = s.src;
				frames[got].sent_ns = s.sent_ns;
				frames[got].len = len;
				std::memcpy(frames[got].data, s.data, len);
				got++;
			} else {
				h->drops.fetch_add(
					1, std::memory_order_relaxed); /* previous owner's */
			}
		}
		s.seq.store((pos & ~mask) + cap, std::memory_order_release);
		pos++;
		node.tail.store(pos, std::memory_order_release);
		self->stall_since = 0;
	}
	return int(got);
}

} // namespace cm_impl::shm
