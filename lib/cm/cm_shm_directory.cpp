/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared-memory fabric's service directory (cm_shm.h): where a passive side publishes its
 * service (node GUID, the DCT's QPN, DC key) and an active side finds it. Entries are written
 * rarely under a sequence word and read lock-free by pollers of other processes; an entry whose
 * publisher died is ignored by lookups and reused by the next publish.
 */
#include "cm_shm.h"

#include <cerrno>

using namespace cm_impl::shm;

namespace {

bool
dir_is_mine(const DirEntry &e)
{
	qpn::shm::ProcId id{};
	id.pid = e.pid.load(std::memory_order_relaxed);
	id.start_time = e.start.load(std::memory_order_relaxed);
	return qpn::shm::is_self(id);
}

bool
dir_alive(int32_t pid, uint64_t start)
{
	qpn::shm::ProcId id{};
	id.pid = pid;
	id.start_time = start;
	return qpn::shm::is_self(id) || qpn::shm::alive(id);
}

} // namespace

namespace cm_impl::shm {

/* Remove this process's directory entries of @p guid. */
void
dir_withdraw(Header *h, uint64_t guid)
{
	for (auto &e : h->dir) {
		if (e.state.load(std::memory_order_acquire) != DIR_VALID ||
		    e.node_guid.load(std::memory_order_relaxed) != guid || !dir_is_mine(e))
			continue;
		uint32_t st = DIR_VALID;
		if (!e.state.compare_exchange_strong(st, DIR_WRITING, std::memory_order_acq_rel))
			continue;
		e.seq.fetch_add(1, std::memory_order_acq_rel);
		e.node_guid.store(0, std::memory_order_release);
		e.seq.fetch_add(1, std::memory_order_release);
		e.state.store(DIR_FREE, std::memory_order_release);
	}
}

} // namespace cm_impl::shm

extern "C" {


int
mlx5_qpn_cm_shm_fabric_publish(struct mlx5_qpn_cm_shm_fabric *fab,
			       const struct mlx5_qpn_cm_shm_service *svc)
{
	if (fab == nullptr || svc == nullptr || svc->node_guid == 0)
		return -EINVAL;
	{
		std::lock_guard<std::mutex> g(fab->mu);
		bool mine = false;
		for (auto &a : fab->att)
			mine |= a.guid == svc->node_guid;
		if (!mine)
			return -ENOENT;
	}
	Header *h = fab->h;
	const qpn::shm::ProcId me = qpn::shm::self();
	for (int pass = 0; pass < 2; pass++) {
		for (auto &e : h->dir) {
			uint32_t st = e.state.load(std::memory_order_acquire);
			/* First pass: free entries; second: entries of dead publishers (and state
			 * words that are none of ours). */
			bool known = st == DIR_FREE || st == DIR_WRITING || st == DIR_VALID;
			if (pass == 0 ?
				    st != DIR_FREE :
				    known && (st != DIR_VALID ||
					      dir_alive(e.pid.load(std::memory_order_relaxed),
							e.start.load(std::memory_order_relaxed))))
				continue;
			if (!e.state.compare_exchange_strong(st, DIR_WRITING,
							     std::memory_order_acq_rel))
				continue;
			e.seq.fetch_add(1, std::memory_order_acq_rel);
			/* Release stores, acquire loads in lookup(): a reader that sees any new field
			 * also sees the odd sequence before it and skips the entry (no fences, which
			 * GCC's ThreadSanitizer does not model). */
			e.service_id.store(svc->service_id, std::memory_order_release);
			e.node_guid.store(svc->node_guid, std::memory_order_release);
			e.dc_key.store(svc->dc_key, std::memory_order_release);
			e.dct_qpn.store(svc->dct_qpn, std::memory_order_release);
			e.pid.store(me.pid, std::memory_order_release);
			e.start.store(me.start_time, std::memory_order_release);
			e.seq.fetch_add(1, std::memory_order_release);
			e.state.store(DIR_VALID, std::memory_order_release);
			return 0;
		}
	}
	CM_LOG(ERR, "shm fabric %s: service directory full (%d entries)", fab->name,
	       MLX5_QPN_CM_SHM_MAX_SERVICES);
	return -ENOSPC;
}

int
mlx5_qpn_cm_shm_fabric_lookup(const struct mlx5_qpn_cm_shm_fabric *fab, uint64_t service_id,
			      struct mlx5_qpn_cm_shm_service *out, unsigned int n)
{
	if (fab == nullptr || (out == nullptr && n != 0))
		return -EINVAL;
	unsigned got = 0;
	for (auto &e : fab->h->dir) {
		if (got >= n)
			break;
		uint32_t s1 = e.seq.load(std::memory_order_acquire);
		if ((s1 & 1) != 0 || e.state.load(std::memory_order_acquire) != DIR_VALID)
			continue;
		mlx5_qpn_cm_shm_service v;
		v.service_id = e.service_id.load(std::memory_order_acquire);
		v.node_guid = e.node_guid.load(std::memory_order_acquire);
		v.dc_key = e.dc_key.load(std::memory_order_acquire);
		v.dct_qpn = e.dct_qpn.load(std::memory_order_acquire);
		v.pid = e.pid.load(std::memory_order_acquire);
		uint64_t start = e.start.load(std::memory_order_acquire);
		if (e.seq.load(std::memory_order_relaxed) != s1)
			continue; /* rewritten while read */
		if (v.service_id != service_id || v.node_guid == 0 || !dir_alive(v.pid, start))
			continue;
		out[got++] = v;
	}
	return int(got);
}

/* The 2.1 ABI's names: the same functions under second symbols (mlx5_qpn_cm.h). */
int mlx5_qpn_cm_shm_publish(struct mlx5_qpn_cm_shm_fabric *fab,
			    const struct mlx5_qpn_cm_shm_service *svc)
	__attribute__((alias("mlx5_qpn_cm_shm_fabric_publish")));
int mlx5_qpn_cm_shm_lookup(const struct mlx5_qpn_cm_shm_fabric *fab, uint64_t service_id,
			   struct mlx5_qpn_cm_shm_service *out, unsigned int n)
	__attribute__((alias("mlx5_qpn_cm_shm_fabric_lookup")));

} // extern "C"
