/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Process identities for the pool's process table: lib/shm's one liveness rule (pid + start
 * time, zombies dead), packed into the 64-bit word the table compares with one CAS.
 */
#include "qpn_pool_proc.h"

#include <atomic>

#include "qpn_shm.h"

namespace qpn {

namespace {

std::atomic<uint64_t> g_self{0};

constexpr unsigned kStartBits = 41; /* clock ticks since boot: centuries at 100 Hz */

uint64_t
make_ident(uint32_t pid, uint64_t start)
{
	return ((start & ((1ull << kStartBits) - 1)) << kPidBits) | (pid & kPidMask);
}

} // namespace

uint64_t
proc_self_ident()
{
	uint64_t id = g_self.load(std::memory_order_relaxed);
	if (id != 0)
		return id;
	shm::ProcId me = shm::self(); /* start_time 0 without /proc: the pid alone then */
	id = make_ident(static_cast<uint32_t>(me.pid), me.start_time);
	if (id == 0)
		id = 1ull << kPidBits; /* never 0, which means "no process" */
	g_self.store(id, std::memory_order_relaxed);
	return id;
}

void
proc_forget_self()
{
	g_self.store(0, std::memory_order_relaxed);
}

bool
proc_dead(uint64_t ident)
{
	uint32_t pid = ident_pid(ident);
	if (pid == 0)
		return false;
	shm::ProcId id{static_cast<int32_t>(pid), 0, ident >> kPidBits};
	return !shm::alive(id);
}

} /* namespace qpn */
