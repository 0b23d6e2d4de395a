/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_POOL_PROC_H
#define QPN_POOL_PROC_H

/*
 * Process identities for crash recovery of a shared pool. A process is named by its pid and its
 * start time (field 22 of /proc/<pid>/stat, clock ticks since boot), so that a recycled pid does
 * not pass for the process that died: both are packed in one 64-bit word, which the pool's
 * process table stores and compares with one CAS.
 *
 *   63  62           22 21        0
 *  +---+---------------+-----------+
 *  | 0 |  start (41)   |  pid (22) |     0 = no process
 *  +---+---------------+-----------+
 */

#include <cstdint>

namespace qpn {

constexpr unsigned kPidBits = 22; /* pid_max is at most 2^22 */
constexpr uint64_t kPidMask = (1ull << kPidBits) - 1;

constexpr uint32_t
ident_pid(uint64_t ident)
{
	return static_cast<uint32_t>(ident & kPidMask);
}

/* The calling process's identity (read once per process; a fork()ed child reads its own). */
uint64_t proc_self_ident();

/* Forget the cached identity: called in a fork()ed child. */
void proc_forget_self();

/*
 * Is the process gone? True when kill(pid, 0) gives ESRCH, when /proc/<pid>/stat cannot be read
 * or its start time differs (the pid was recycled), or when it is a zombie or dead (Z, X): its
 * memory is gone and it will never call the pool again. EPERM means alive (another user's).
 */
bool proc_dead(uint64_t ident);

} /* namespace qpn */

#endif /* QPN_POOL_PROC_H */
