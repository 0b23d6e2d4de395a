/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Locked memory on the fake device, by the kernel's rule (ib_umem_get): pinning n pages fails
 * with ENOMEM when the process's pinned pages would exceed RLIMIT_MEMLOCK's soft limit and the
 * caller lacks CAP_IPC_LOCK in its effective set. Both are read at each call, so a test changes
 * them with MemlockLimit and the next registration sees it.
 */
#include <errno.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hw_fake_glue.h"
#include "hw_fake_priv.h"

namespace hwfake {

namespace {

constexpr uint64_t PAGE = 4096;

bool
caps_get(__user_cap_data_struct d[2])
{
	__user_cap_header_struct h{};
	h.version = _LINUX_CAPABILITY_VERSION_3;
	h.pid = 0; /* the calling thread */
	return syscall(SYS_capget, &h, d) == 0;
}

bool
caps_set(__user_cap_data_struct d[2])
{
	__user_cap_header_struct h{};
	h.version = _LINUX_CAPABILITY_VERSION_3;
	h.pid = 0;
	return syscall(SYS_capset, &h, d) == 0;
}

bool
has_ipc_lock(void)
{
	__user_cap_data_struct d[2] = {};
	return caps_get(d) && (d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK));
}

} // namespace

namespace priv {

uint64_t
pages_of(const void *addr, uint64_t len)
{
	const uint64_t a = uint64_t(uintptr_t(addr));
	if (len == 0)
		return 0;
	return ((a + len + PAGE - 1) / PAGE) - (a / PAGE);
}

int
pin(uint64_t bytes, uint64_t *pinned)
{
	const uint64_t add = (bytes + PAGE - 1) / PAGE * PAGE;
	FakeDevice &d = fake();
	struct rlimit r;
	if (getrlimit(RLIMIT_MEMLOCK, &r) == 0 && r.rlim_cur != RLIM_INFINITY &&
	    (d.pinned + add) / PAGE > r.rlim_cur / PAGE && !has_ipc_lock())
		return ENOMEM;
	d.pinned += add;
	*pinned = add;
	return 0;
}

void
unpin(uint64_t *pinned)
{
	fake().pinned -= *pinned;
	*pinned = 0;
}

} // namespace priv

MemlockLimit::MemlockLimit(uint64_t bytes)
{
	if (getrlimit(RLIMIT_MEMLOCK, &old_) != 0)
		return;
	struct rlimit r = old_;
	r.rlim_cur = bytes;
	if (setrlimit(RLIMIT_MEMLOCK, &r) != 0)
		return;
	limit_set_ = true;
	__user_cap_data_struct d[2] = {};
	if (!caps_get(d))
		return;
	const unsigned i = CAP_TO_INDEX(CAP_IPC_LOCK);
	if (d[i].effective & CAP_TO_MASK(CAP_IPC_LOCK)) {
		d[i].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
		if (!caps_set(d))
			return;
		cap_dropped_ = true;
	}
	ok_ = true;
}

MemlockLimit::~MemlockLimit()
{
	if (cap_dropped_) {
		__user_cap_data_struct d[2] = {};
		if (caps_get(d)) {
			d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective |= CAP_TO_MASK(CAP_IPC_LOCK);
			caps_set(d);
		}
	}
	if (limit_set_)
		setrlimit(RLIMIT_MEMLOCK, &old_);
}

} // namespace hwfake
