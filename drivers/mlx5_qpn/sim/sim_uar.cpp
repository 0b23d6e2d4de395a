/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's UAR pages and doorbell service. uar_map hands out one of kNbUars 4-KiB
 * pages in the segment (the doorbell/BlueFlame register at MLX5_QPN_UAR_DB_OFFSET); the first map of a
 * handle registers an rte_service whose body, mlx5_qpn_sim_poll(), consumes every new doorbell
 * value once across all pollers of all processes. The DC data path does not run here: the
 * device executes DC WQEs inside the CQ poll of the DC layer (mlx5_qpn_dc.h), one way for
 * every backend.
 */
#include "sim_internal.h"
#include "mlx5_qpn_prm_status.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <pthread.h>
#include <unistd.h>

#include <atomic>

#include <rte_common.h>
#include <rte_lcore.h>
#include <rte_service.h>
#include <rte_service_component.h>

using namespace mlx5_qpn_sim;

/* The UAR pages, their meta and the counters are shared memory, polled by other processes. */
static_assert(std::atomic_ref<uint32_t>::is_always_lock_free, "lock-free in shared memory");
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free, "lock-free in shared memory");

namespace mlx5_qpn_sim {

namespace {

/* fork() children inherit EAL's memory but not its threads: never register services there. */
bool g_forked;
pid_t g_atfork_pid;

void
on_fork_child()
{
	g_forked = true;
}

__attribute__((constructor)) void
sim_register_atfork()
{
	g_atfork_pid = getpid();
	pthread_atfork(nullptr, nullptr, on_fork_child);
}

int32_t
svc_run(void *arg)
{
	return mlx5_qpn_sim_poll(static_cast<mlx5_qpn_backend *>(arg)) > 0 ? 0 : -EAGAIN;
}

void
svc_register(SimDev *d)
{
	if (d->svc_registered || g_forked || getpid() != g_atfork_pid || rte_lcore_count() == 0)
		return;
	struct rte_service_spec spec;
	memset(&spec, 0, sizeof(spec));
	snprintf(spec.name, sizeof(spec.name), "sim_%.16s_%u", d->name, unsigned(d->slot));
	spec.callback = svc_run;
	spec.callback_userdata = d;
	spec.capabilities = RTE_SERVICE_CAP_MT_SAFE; /* the poll is lock-free */
	spec.socket_id = -1;                         /* SOCKET_ID_ANY */
	uint32_t id;
	if (rte_service_component_register(&spec, &id) != 0) {
		SIM_LOG(WARNING,
			"device %s: doorbell service not registered; call mlx5_qpn_sim_poll()",
			d->name);
		return;
	}
	rte_service_component_runstate_set(id, 1);
	rte_service_runstate_set(id, 1);
	d->svc_id = id;
	d->svc_registered = true;
}

} // namespace

void
svc_unregister(SimDev *d)
{
	if (!d->svc_registered)
		return;
	rte_service_runstate_set(d->svc_id, 0);
	rte_service_component_runstate_set(d->svc_id, 0);
	/* A service lcore may be inside the callback: wait until it has left. */
	for (int i = 0; i < 100000 && rte_service_may_be_active(d->svc_id) == 1; i++)
		usleep(10);
	rte_service_component_unregister(d->svc_id);
	d->svc_registered = false;
}

int
sim_uar_map(mlx5_qpn_backend *be, mlx5_qpn_uar *uar)
{
	if ((be == nullptr) || (uar == nullptr))
		return -EINVAL;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	uint8_t st = fw_begin(s, CMD_CREATE);
	if (!st) {
		st = MLX5_QPN_CMD_STAT_LIM_ERR;
		for (uint32_t i = 0; i < kNbUars; i++) {
			SimUarMeta &m = s->uar_meta[i];
			if (m.in_use)
				continue;
			memset(s->uar[i], 0, kUarPage);
			m.owner = d->slot;
			m.gen = ++s->gen_next;
			std::atomic_ref<uint64_t>(m.last_seen).store(0, std::memory_order_relaxed);
			std::atomic_ref<uint64_t>(m.count).store(0, std::memory_order_relaxed);
			std::atomic_ref<uint32_t>(m.in_use).store(1, std::memory_order_release);
			s->ctr.uars_live++;
			uar->base_addr = s->uar[i];
			uar->reg_addr = s->uar[i] + MLX5_QPN_UAR_DB_OFFSET;
			uar->page_id = i;
			uar->mmap_off = offsetof(SimShm, uar) + uint64_t(i) * kUarPage;
			uar->handle = (uint64_t(m.gen) << 32) | i;
			st = 0;
			break;
		}
	}
	if (st) {
		rc = fw_fail(s, st);
		dev_unlock(s);
		return rc;
	}
	dev_unlock(s);
	svc_register(d);
	return 0;
}

int
sim_uar_unmap(mlx5_qpn_backend *be, mlx5_qpn_uar *uar)
{
	if ((be == nullptr) || (uar == nullptr))
		return -EINVAL;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	fw_begin(s, CMD_DESTROY);
	uint32_t i = uar->page_id;
	if (i >= kNbUars || !s->uar_meta[i].in_use || s->uar_meta[i].owner != d->slot ||
	    s->uar_meta[i].gen != uint32_t(uar->handle >> 32)) {
		SIM_LOG(ERR, "device %s: UAR page %u is not mapped by this handle", d->name, i);
		rc = fw_fail(s, MLX5_QPN_CMD_STAT_BAD_RES_ERR);
		dev_unlock(s);
		return rc;
	}
	std::atomic_ref<uint32_t>(s->uar_meta[i].in_use).store(0, std::memory_order_release);
	s->ctr.uars_live--;
	dev_unlock(s);
	memset(uar, 0, sizeof(*uar));
	return 0;
}

} // namespace mlx5_qpn_sim

extern "C" {

int
mlx5_qpn_sim_poll(struct mlx5_qpn_backend *be)
{
	if (be == nullptr)
		return -EINVAL;
	SimShm *s = to_dev(be)->shm;
	int n = 0;

	for (uint32_t i = 0; i < kNbUars; i++) {
		SimUarMeta &m = s->uar_meta[i];
		if (std::atomic_ref<uint32_t>(m.in_use).load(std::memory_order_acquire) == 0u)
			continue;
		auto *reg = reinterpret_cast<uint64_t *>(s->uar[i] + MLX5_QPN_UAR_DB_OFFSET);
		uint64_t v = std::atomic_ref<uint64_t>(*reg).load(std::memory_order_acquire);
		std::atomic_ref<uint64_t> last_seen(m.last_seen);
		uint64_t seen = last_seen.load(std::memory_order_acquire);
		/* Whoever swaps the value in consumes the doorbell: concurrent pollers in any
		 * process count each new value once. */
		if (v != seen &&
		    last_seen.compare_exchange_strong(seen, v, std::memory_order_acq_rel,
						      std::memory_order_acquire)) {
			std::atomic_ref<uint64_t>(m.count).fetch_add(1, std::memory_order_relaxed);
			std::atomic_ref<uint64_t>(s->ctr.doorbells)
				.fetch_add(1, std::memory_order_relaxed);
			n++;
		}
	}
	return n;
}

int
mlx5_qpn_sim_service_id(struct mlx5_qpn_backend *be, uint32_t *id)
{
	if ((be == nullptr) || (id == nullptr))
		return -EINVAL;
	SimDev *d = to_dev(be);
	if (!d->svc_registered)
		return -ENOENT;
	*id = d->svc_id;
	return 0;
}

} /* extern "C" */
