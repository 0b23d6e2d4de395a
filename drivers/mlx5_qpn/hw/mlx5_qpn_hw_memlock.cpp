/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The locked-memory budget (see mlx5_qpn_hw_memlock.h): the kernel's rule of ib_umem_get —
 * pinned_vm + new pages <= RLIMIT_MEMLOCK, unless capable(CAP_IPC_LOCK) — read without libcap.
 */
#include "mlx5_qpn_hw_memlock.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mlx5_qpn_hw_log.h"

namespace {

/* CAP_IPC_LOCK in the effective set: the kernel then pins without looking at the limit. */
bool
has_ipc_lock()
{
	struct __user_cap_header_struct hdr;
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	memset(&hdr, 0, sizeof(hdr));
	memset(data, 0, sizeof(data));
	hdr.version = _LINUX_CAPABILITY_VERSION_3;
	hdr.pid = 0;
	if (syscall(SYS_capget, &hdr, data) != 0)
		return false;
	return (data[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK)) != 0;
}

/* VmPin of /proc/self/status in bytes: what this process has pinned already (0 unknown). */
uint64_t
pinned_now()
{
	FILE *f = fopen("/proc/self/status", "re");
	if (f == nullptr)
		return 0;
	char line[128];
	unsigned long long kib = 0;
	while (fgets(line, sizeof(line), f) != nullptr)
		if (sscanf(line, "VmPin: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return static_cast<uint64_t>(kib) * 1024;
}

} /* namespace */

extern "C" {

uint64_t
mlx5_qpn_hw_memlock_room(uint64_t *limit, uint64_t *pinned)
{
	struct rlimit rl;
	if (limit != nullptr)
		*limit = UINT64_MAX;
	if (pinned != nullptr)
		*pinned = 0;
	if (has_ipc_lock() || getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return UINT64_MAX;
	const uint64_t now = pinned_now();
	if (limit != nullptr)
		*limit = rl.rlim_cur;
	if (pinned != nullptr)
		*pinned = now;
	return rl.rlim_cur > now ? rl.rlim_cur - now : 0;
}

const char *
mlx5_qpn_hw_memlock_str(uint64_t bytes, char *buf, unsigned int len)
{
	if (buf == nullptr || len == 0)
		return "";
	const unsigned long long b = bytes;
	if (bytes == UINT64_MAX)
		snprintf(buf, len, "unlimited");
	else if (b != 0 && b % (1ull << 20) == 0)
		snprintf(buf, len, "%llu MiB", b >> 20);
	else if (b != 0 && b % 1024 == 0)
		snprintf(buf, len, "%llu KiB", b >> 10);
	else
		snprintf(buf, len, "%llu bytes", b);
	return buf;
}

int
mlx5_qpn_hw_memlock_check(const char *devname, uint64_t need_bytes, const char *what)
{
	uint64_t limit = 0, pinned = 0;
	const uint64_t room = mlx5_qpn_hw_memlock_room(&limit, &pinned);
	if (need_bytes <= room)
		return 0;
	char lim[32], need[32], pin[32];
	HW_LOG(ERR,
	       "%s: RLIMIT_MEMLOCK is %s with %s pinned already, but %s needs %s more: raise "
	       "it (ulimit -l, LimitMEMLOCK=) or grant CAP_IPC_LOCK",
	       devname != nullptr ? devname : "?", mlx5_qpn_hw_memlock_str(limit, lim, sizeof(lim)),
	       mlx5_qpn_hw_memlock_str(pinned, pin, sizeof(pin)),
	       what != nullptr ? what : "the device",
	       mlx5_qpn_hw_memlock_str(need_bytes, need, sizeof(need)));
	return -ENOMEM;
}

} /* extern "C" */
