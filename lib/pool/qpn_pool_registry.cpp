/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The process-local registry of live pools (for thread-exit flushes and stale bindings), and this
 * process's entry in a pool's process table.
 */
#include "qpn_pool_ops.h"
#include "qpn_pool_proc.h"

using namespace qpn;
using namespace qpn::detail;

namespace qpn::detail {

std::recursive_mutex g_reg_mutex;
RegEntry g_registry[64];
/* Pools freed by this process, most recent last (a ring): tells a stale thread binding from a
 * live pool that did not fit in the registry. */
static RegEntry g_freed[64];
static uint32_t g_freed_next;
static bool g_reg_overflow; /* some live pool is missing from g_registry */

void
registry_add(mlx5_qpn_pool *p)
{
	std::lock_guard<std::recursive_mutex> g(g_reg_mutex);
	for (auto &e : g_registry)
		if (e.pool == nullptr || e.pool == p) {
			e = {p, p->uid, -1};
			return;
		}
	/* Full: the pool still works; only the automatic flush at thread exit is skipped. */
	g_reg_overflow = true;
}

void
registry_del(mlx5_qpn_pool *p)
{
	std::lock_guard<std::recursive_mutex> g(g_reg_mutex);
	for (auto &e : g_registry)
		if (e.pool == p)
			e = {nullptr, 0, -1};
	g_freed[g_freed_next++ % RTE_DIM(g_freed)] = {p, p->uid, -1};
}

/* Find or claim this process's entry in the pool's process table; -1 if the table is full. */
static int32_t
proc_register(mlx5_qpn_pool *p)
{
	const uint64_t me = proc_self_ident();
	for (uint32_t i = 0; i < kMaxProcs; i++)
		if (p->procs[i].ident.load(acq) == me)
			return static_cast<int32_t>(i);
	for (uint32_t i = 0; i < kMaxProcs; i++) {
		uint64_t expect = 0;
		if (p->procs[i].ident.compare_exchange_strong(expect, me, acq_rel, rlx))
			return static_cast<int32_t>(i);
	}
	return -1;
}

/* This process's index in the pool's table (process-local cache in the registry). */
int32_t
my_proc(mlx5_qpn_pool *p)
{
	{
		std::lock_guard<std::recursive_mutex> g(g_reg_mutex);
		for (auto &e : g_registry)
			if (e.pool == p && e.uid == p->uid) {
				if (e.proc < 0)
					e.proc = proc_register(p);
				return e.proc;
			}
	}
	return proc_register(p);
}

/* Is the pool of a thread binding still alive in this process? (g_reg_mutex held) */
bool
registry_alive(const mlx5_qpn_pool *p, uint64_t uid)
{
	for (const auto &e : g_registry)
		if (e.pool == p && e.uid == uid)
			return true;
	if (!g_reg_overflow)
		return false;
	for (const auto &e : g_freed)
		if (e.pool == p && e.uid == uid)
			return false;
	return true; /* unknown: keep it (a live binding dropped would strand its cache claim) */
}

} /* namespace qpn::detail */
