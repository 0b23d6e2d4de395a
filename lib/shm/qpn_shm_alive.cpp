/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Liveness of the processes that share our segments and pools (shm::alive()).
 *
 * A peer is named by its pid and start time (ProcId). The first question about it reads
 * /proc/<pid>/stat once (the start time tells a reused pid from the process we mean); the
 * answer is then kept as a pidfd, which becomes readable when the process has exited (all its
 * threads: a zombie counts as exited) and can never refer to a later process of the same pid.
 * Every later question is one poll() on it.
 *
 * Why not /proc at each call: the callers are slow paths that can run thousands of times a
 * second (a secondary whose allocations find every QPN in quarantine asked whether its primary
 * was alive on each of them: 8.5k /proc reads a second, measured with a uprobe on
 * start_time_of()), each an open, a read and a close. And /proc was wrong about one case: a
 * process whose main thread has exited while its other threads run shows its leader as a
 * zombie there, yet it is alive (it holds its memory and may still call the pool); its pidfd
 * turns readable only when every thread has exited.
 */
#include "qpn_shm.h"

#include <cerrno>
#include <csignal>
#include <mutex>
#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same on every architecture */
#endif

namespace qpn::shm {

namespace {

/* What /proc says about the process now: alive and the one we mean? */
bool
alive_by_proc(const ProcId &id)
{
	if (kill(id.pid, 0) == -1 && errno == ESRCH)
		return false;
	uint64_t start;
	char st;
	if (!start_time_of(id.pid, &start, &st))
		return false; /* gone between the two looks */
	if (st == 'Z' || st == 'X')
		return false;
	return id.start_time == 0 || start == id.start_time;
}

/* A peer watched through a pidfd; fd < 0 and `exited`: known to have exited. */
struct Watched {
	ProcId id;
	int fd;
	bool exited;
};

constexpr unsigned kWatchMax = 64; /* peers of one process (fds); the oldest makes room */

std::mutex g_mutex;
Watched g_watch[kWatchMax];
unsigned g_nwatch, g_next_evict;
bool g_no_pidfd; /* the kernel has none (ENOSYS): /proc at each call */

bool
same(const ProcId &a, const ProcId &b)
{
	return a.pid == b.pid && a.start_time == b.start_time;
}

/* g_mutex held. The entry for id, or nullptr. */
Watched *
find(const ProcId &id)
{
	for (unsigned i = 0; i < g_nwatch; i++)
		if (same(g_watch[i].id, id))
			return &g_watch[i];
	return nullptr;
}

/* g_mutex held. Room for one more entry (closing the oldest if all are taken). */
Watched *
slot()
{
	if (g_nwatch < kWatchMax)
		return &g_watch[g_nwatch++];
	Watched *w = &g_watch[g_next_evict++ % kWatchMax];
	if (w->fd >= 0)
		close(w->fd);
	return w;
}

/* fork(): the child must not inherit the mutex held by a thread that does not exist there. The
 * watched pidfds stay valid in the child (copies of the same fds). */
void
fork_prepare()
{
	g_mutex.lock();
}
void
fork_release()
{
	g_mutex.unlock();
}
std::once_flag g_atfork;

} // namespace

bool
alive(const ProcId &id)
{
	if (id.pid <= 0)
		return false;
	std::call_once(g_atfork, [] { pthread_atfork(fork_prepare, fork_release, fork_release); });
	std::lock_guard<std::mutex> g(g_mutex);
	Watched *w = find(id);
	if (w == nullptr) {
		if (g_no_pidfd)
			return alive_by_proc(id);
		/* Open first, then ask /proc: if the pid was reused in between, /proc shows the
		 * newcomer's start time and we answer "exited", which is true of the one we mean. */
		int fd = int(syscall(SYS_pidfd_open, id.pid, 0));
		if (fd < 0) {
			if (errno == ENOSYS)
				g_no_pidfd = true;
			return errno == ESRCH ? false : alive_by_proc(id);
		}
		uint64_t start;
		bool same_process = start_time_of(id.pid, &start, nullptr) &&
				    (id.start_time == 0 || start == id.start_time);
		w = slot();
		*w = Watched{id, fd, false};
		if (!same_process) {
			close(fd);
			*w = Watched{id, -1, true};
			return false;
		}
	}
	if (w->exited)
		return false;
	/* Readable once every thread of the process has exited (a zombie): not before. */
	struct pollfd p = {w->fd, POLLIN, 0};
	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
		close(w->fd);
		w->fd = -1;
		w->exited = true;
		return false;
	}
	return true;
}

} /* namespace qpn::shm */
