/* SPDX-License-Identifier: BSD-3-Clause */
/* Process identities (pid + start time) and liveness, for the pool's process table. */
#include "qpn_pool_proc.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

namespace qpn {

namespace {

std::atomic<uint64_t> g_self{0};

/* Reads state and start time of pid; false if the process is gone or the file is malformed. */
bool read_stat(uint32_t pid, char *state, uint64_t *start)
{
	char path[32], buf[1024];
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: the fields start after the last ')'. */
	const char *p = strrchr(buf, ')');
	if (p == nullptr || p[1] != ' ')
		return false;
	p += 2;
	*state = *p;
	/* p is at field 3 (state); field 22 (starttime) is 19 fields further. */
	for (int f = 3; f < 22; f++) {
		p = strchr(p, ' ');
		if (p == nullptr)
			return false;
		p++;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 10);
	if (end == p || errno != 0)
		return false;
	*start = v;
	return true;
}

uint64_t make_ident(uint32_t pid, uint64_t start)
{
	return ((start & ((1ull << 41) - 1)) << kPidBits) | (pid & kPidMask);
}

} // namespace

uint64_t proc_self_ident()
{
	uint64_t id = g_self.load(std::memory_order_relaxed);
	if (id != 0)
		return id;
	uint32_t pid = static_cast<uint32_t>(getpid());
	char st;
	uint64_t start = 0;
	if (!read_stat(pid, &st, &start))
		start = 0; /* no /proc: pid alone (a recycled pid then passes for us) */
	id = make_ident(pid, start);
	if (id == 0)
		id = 1ull << kPidBits; /* never 0, which means "no process" */
	g_self.store(id, std::memory_order_relaxed);
	return id;
}

void proc_forget_self() { g_self.store(0, std::memory_order_relaxed); }

bool proc_dead(uint64_t ident)
{
	uint32_t pid = ident_pid(ident);
	if (pid == 0)
		return false;
	if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
		return true;
	char st;
	uint64_t start;
	if (!read_stat(pid, &st, &start))
		return access("/proc/self/stat", R_OK) == 0; /* gone, unless /proc is missing */
	if (st == 'Z' || st == 'X' || st == 'x')
		return true;
	return make_ident(pid, start) != ident && (ident >> kPidBits) != 0;
}

} /* namespace qpn */
