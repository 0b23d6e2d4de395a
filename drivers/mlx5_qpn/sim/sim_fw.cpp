/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's firmware command model. Every command takes the device mutex (a
 * process-shared robust mutex in the segment, the serialised command interface) with a bounded
 * wait, checks the header, and repairs the device if the previous holder died inside a command;
 * fw_begin() counts the command, models its latency and injects faults; fw_fail() turns a PRM
 * status into an errno and counts it.
 */
#include "sim_internal.h"
#include "mlx5_qpn_prm_status.h"

#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>

#include <rte_pause.h>

using namespace mlx5_qpn_sim;

namespace mlx5_qpn_sim {

/* Bound on every wait for the device mutex or the segment's init lock (a test hook lowers it). */
uint64_t g_lock_timeout_ns = qpn::shm::kLockTimeoutNs;

/* A process died inside a command: the records are the truth, rebuild the rest from them. */
static void
repair(SimShm *s)
{
	SimRec *copy = new (std::nothrow) SimRec[kRecMaxLive];

	if (copy != nullptr) {
		/* The hash may be mid-shift: re-insert every entry once. */
		uint32_t n = 0;
		for (uint32_t i = 0; i < kRecCap && n < kRecMaxLive; i++)
			if (s->recs[i].key && rec_ok(s, s->recs[i]))
				copy[n++] = s->recs[i];
		memset(s->recs, 0, sizeof(s->recs));
		s->recs_live = 0;
		for (uint32_t i = 0; i < n; i++)
			if (rec_find(s, copy[i].key) == nullptr)
				rec_insert(s, copy[i]);
		delete[] copy;
	}
	s->table.reset_bitmap();
	s->ctr.objs_live = s->ctr.qpns_reserved = s->ctr.qps_live = 0;
	for (uint32_t i = 0; i < kRecCap; i++) {
		const SimRec &r = s->recs[i];
		if (!r.key || !rec_ok(s, r))
			continue;
		if (r.kind == REC_OBJ) {
			s->table.mark_range(r.key - 1, uint32_t(1) << r.log_size);
			s->ctr.objs_live++;
			s->ctr.qpns_reserved += uint64_t(1) << r.log_size;
		} else {
			s->table.mark_range(r.key - 1, 1);
			s->ctr.qps_live++;
		}
	}
	dc_rebuild(&s->dc);
	s->ctr.repairs++;
	reclaim_dead(s);
}

/*
 * Take the device mutex with a bounded wait and check the header before anything is used.
 * @return 0 (locked); -ETIMEDOUT (held by a hung process); -EIO (not a mutex any more);
 *         -EPROTO (header or parameters corrupted; not locked).
 */
int
dev_lock(SimShm *s, const char *name)
{
	int rc = qpn::shm::mutex_lock(&s->mutex, g_lock_timeout_ns);

	if (rc == -ETIMEDOUT) {
		SIM_LOG(ERR,
			"device %s: the device mutex is held by another process for more than %" PRIu64
			" ms",
			name, g_lock_timeout_ns / 1000000);
		return rc;
	}
	if (rc < 0) {
		SIM_LOG(ERR,
			"device %s: the device mutex in shared memory /mlx5_qpn_%s is corrupted",
			name, name);
		return -EIO;
	}
	const char *bad = hdr_bad(s);
	if (bad != nullptr) {
		if (rc == 1)
			pthread_mutex_consistent(&s->mutex);
		pthread_mutex_unlock(&s->mutex);
		SIM_LOG(ERR, "device %s: shared memory /mlx5_qpn_%s is corrupted (%s)", name, name,
			bad);
		return -EPROTO;
	}
	if (rc == 1) {
		SIM_LOG(WARNING,
			"device %s: a process died inside a device command: repairing the device",
			name);
		repair(s);
		pthread_mutex_consistent(&s->mutex);
	}
	return 0;
}

void
dev_unlock(SimShm *s)
{
	pthread_mutex_unlock(&s->mutex);
}

/* A firmware command's modelled latency, with the device mutex held as the firmware's command
 * interface is busy. Below a millisecond the wait spins on the clock: a nanosleep() would be
 * stretched by the timer slack and the wake-up (about 100 us for a 10 us sleep on a loaded VM),
 * and the latency a comparison states must be the latency it runs. */
static void
fw_latency(uint32_t us)
{
	constexpr uint32_t kSpinBelowUs = 1000;
	if (us < kSpinBelowUs) {
		const uint64_t end = qpn::shm::mono_ns() + uint64_t(us) * 1000;
		while (qpn::shm::mono_ns() < end)
			rte_pause();
		return;
	}
	struct timespec ts = {time_t(us / 1000000), long(us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Start a firmware command (mutex held): count it, take its time, inject a fault.
 * @return 0 or the PRM status to fail it with. */
uint8_t
fw_begin(SimShm *s, CmdKind kind)
{
	s->ctr.commands++;
	if (s->cfg.slow_cmd_us != 0)
		fw_latency(s->cfg.slow_cmd_us);
	/* A create or a modify may be refused, as a ConnectX refuses them (no resources, a bad
	 * state); a destroy or a query never fails by injection: close always cleans up. */
	if (kind != CMD_CREATE && kind != CMD_MODIFY)
		return 0;
	uint64_t n = ++s->fault_cmds;
	bool fail = ((s->cfg.fault_fw_after != 0u) && n > s->cfg.fault_fw_after) ||
		    ((s->cfg.fault_fw_rate != 0u) && n % s->cfg.fault_fw_rate == 0);
	if (!fail)
		return 0;
	s->ctr.faults_injected++;
	return uint8_t(s->cfg.fault_fw_status ? s->cfg.fault_fw_status :
						uint32_t(MLX5_QPN_CMD_STAT_NO_RES_ERR));
}

int
fw_fail(SimShm *s, uint8_t status)
{
	s->ctr.cmd_failed++;
	if (status < MLX5_QPN_SIM_NB_STATUS)
		s->ctr.failed_by_status[status]++;
	return -mlx5_qpn_cmd_status_to_errno(status);
}

} // namespace mlx5_qpn_sim

extern "C" {

int
mlx5_qpn_sim_test_hold_mutex(struct mlx5_qpn_backend *be)
{
	if (be == nullptr)
		return -EINVAL;
	SimDev *d = to_dev(be);
	return dev_lock(d->shm, d->name); /* never unlocked: the caller hangs or dies holding it */
}

uint64_t
mlx5_qpn_sim_set_lock_timeout_ns(uint64_t ns)
{
	uint64_t old = g_lock_timeout_ns;
	g_lock_timeout_ns = ns ? ns : qpn::shm::kLockTimeoutNs;
	return old;
}

} /* extern "C" */
