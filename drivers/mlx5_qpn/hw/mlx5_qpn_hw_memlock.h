/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_HW_MEMLOCK_H
#define MLX5_QPN_HW_MEMLOCK_H

/**
 * @file
 * Internal: the locked-memory budget of the hardware backend. Every queue buffer, doorbell
 * page and memory region rdma-core creates is pinned by the kernel (ib_umem_get), which counts
 * it in the process's pinned_vm and refuses it with ENOMEM beyond RLIMIT_MEMLOCK unless the
 * process has CAP_IPC_LOCK in its effective set. Checking first turns "the Nth QP failed with
 * ENOMEM" into one line saying what the limit is and what is needed.
 *
 * Thread safety: reentrant; nothing is cached (a limit or capability change is seen at once).
 */

#include <cstdint>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The bytes the process may still pin: UINT64_MAX when it has CAP_IPC_LOCK in its effective
 * set (read with the capget system call) or RLIMIT_MEMLOCK is RLIM_INFINITY; otherwise the
 * soft limit less what is pinned already (VmPin of /proc/self/status, 0 if unreadable), never
 * below 0.
 * @param limit  If not NULL: the soft RLIMIT_MEMLOCK (UINT64_MAX for RLIM_INFINITY or when
 *               the capability lifts it).
 * @param pinned If not NULL: VmPin in bytes (0 when the limit does not apply).
 */
uint64_t mlx5_qpn_hw_memlock_room(uint64_t *limit, uint64_t *pinned);

/**
 * Whether need_bytes more may be pinned.
 * @param devname  device name for the log line.
 * @param need_bytes what the caller is about to pin.
 * @param what     what it is for, e.g. "the DC objects".
 * @return 0 when it fits; -ENOMEM with one ERR line naming RLIMIT_MEMLOCK's current value, what
 *         is pinned already, the amount needed and what for.
 */
int mlx5_qpn_hw_memlock_check(const char *devname, uint64_t need_bytes, const char *what);

/**
 * The limit as text for a log line ("unlimited", "64 KiB", "8 MiB", "12345 bytes").
 * @return buf.
 */
const char *mlx5_qpn_hw_memlock_str(uint64_t bytes, char *buf, unsigned int len);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLX5_QPN_HW_MEMLOCK_H */
