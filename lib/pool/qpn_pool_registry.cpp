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

/* The threads whose inline binding may name a pool: a doubly linked list of thread-local nodes
 * (registering cannot fail), under g_reg_mutex. */
namespace {
struct BindNode {
	BindNode *prev, *next;
	mlx5_qpn_pool_binding *b;
	bool linked;
};
BindNode *g_bind_head;
constinit __attribute__((tls_model("initial-exec"))) thread_local BindNode t_bind_node{};
} // namespace

void
bind_link()
{
	std::lock_guard<std::recursive_mutex> g(g_reg_mutex);
	BindNode &n = t_bind_node;
	if (n.linked)
		return;
	n = {nullptr, g_bind_head, &mlx5_qpn_pool_tls, true};
	if (g_bind_head != nullptr)
		g_bind_head->prev = &n;
	g_bind_head = &n;
}

void
bind_unlink()
{
	std::lock_guard<std::recursive_mutex> g(g_reg_mutex);
	BindNode &n = t_bind_node;
	if (!n.linked)
		return;
	(n.prev != nullptr ? n.prev->next : g_bind_head) = n.next;
	if (n.next != nullptr)
		n.next->prev = n.prev;
	n = {};
}

void
bind_forget_all()
{
	g_bind_head = nullptr;
	t_bind_node = {};
}

void
registry_del(mlx5_qpn_pool *p)
{
	std::lock_guard<std::recursive_mutex> g(g_reg_mutex);
	for (auto &e : g_registry)
		if (e.pool == p)
			e = {nullptr, 0, -1};
	g_freed[g_freed_next++ % RTE_DIM(g_freed)] = {p, p->uid, -1};
	/* Only `pool` is written, atomically, and only from p: an owner rebinding to another pool
	 * at the same moment keeps its new binding; the other fields are read only after `pool`
	 * matched, and only the thread itself writes them. */
	for (BindNode *n = g_bind_head; n != nullptr; n = n->next) {
		mlx5_qpn_pool *expect = p;
		std::atomic_ref<mlx5_qpn_pool *>(n->b->pool)
			.compare_exchange_strong(expect, nullptr, rlx);
	}
}

/* Find or claim this process's entry in the pool's process table; -1 if the table is full. */
static int32_t
proc_register(mlx5_qpn_pool *p)
{
	const uint64_t me = proc_self_ident();
	for (uint32_t i = 0; i < kMaxProcs; i++)
		if (p->procs[i].ident.load(acq) == me)
			return static_cast<int32_t>(i);
	/* Before the entry is claimed: a thief that finds our index in an owner word must find
	 * `fenced` as it will stay (the owner word is written after this returns). */
	const uint32_t fenced = fence_register() ? 1 : 0;
	for (uint32_t i = 0; i < kMaxProcs; i++) {
		uint64_t expect = 0;
		if (p->procs[i].ident.compare_exchange_strong(expect, me, acq_rel, rlx)) {
			p->procs[i].fenced.store(fenced, rel);
			return static_cast<int32_t>(i);
		}
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
