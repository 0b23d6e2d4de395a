/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_SHM_H
#define QPN_SHM_H

/*
 * Internal: the one way mlx5-qpn opens state that several processes share outside DPDK's own
 * memory — the emulated device, the per-device lease file and the CM fabric. Not installed.
 *
 * Threat model (doc/guides/reliability.md): another local user must not be able to read, write
 * or block our state. So a segment is
 *  - created exclusively (O_CREAT | O_EXCL, mode 0600), or, when one exists, adopted only if it
 *    is a regular file owned by the effective user with no group/other permission bits (a file
 *    another user pre-created with mode 0666 is refused in one line, never adopted);
 *  - initialised under an advisory file lock taken with a bounded wait (a lock held by a hung
 *    or hostile process is an error, never a hang), re-checked after locking so that a file
 *    unlinked by a refused opener meanwhile is not initialised a second time;
 *  - locked at run time through a robust process-shared mutex taken with a bounded wait.
 * Everything read back from a segment is validated by its user before use: the segment itself
 * may have been written by a crashed or buggy process of the same user.
 *
 * One liveness rule serves every user: a process is the pid *and* its start time (field 22 of
 * /proc/<pid>/stat), so a reused pid is not taken for the process that died.
 */

#include <cstddef>
#include <cstdint>

#include <ctime>

#include <pthread.h>

namespace qpn::shm {

/** CLOCK_MONOTONIC in ns: one clock for every process of the host (deadlines, liveness, the
 * pool's quarantine). Inline: the pool reads it on its slow paths. */
inline uint64_t
mono_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

/* ---- process identity and liveness ---------------------------------------------------------- */

/* A process, as recorded in shared memory. 16 bytes, no padding, the same in every build. */
struct ProcId {
	int32_t pid; /* 0: none */
	uint32_t rsvd;
	uint64_t start_time; /* clock ticks after boot (/proc/<pid>/stat field 22); 0: unknown */
};
static_assert(sizeof(ProcId) == 16, "ProcId is part of shared layouts");

/* This process (re-read after fork(): a child is a different process). */
ProcId self();

/* Is `id` the same process as ours? */
bool is_self(const ProcId &id);

/*
 * Is the process alive? False for pid <= 0, a pid that no longer exists, a process that has
 * exited (a zombie, killed and not reaped, included: it holds nothing any more), or a pid whose
 * start time differs (reused). A peer is read from /proc once, then watched through a pidfd
 * (qpn_shm_alive.cpp says why); where pidfds are missing (before Linux 5.3), from /proc at each
 * call. Thread-safe; the answer for a process that has exited never turns back.
 */
bool alive(const ProcId &id);

/* Start time of a pid (field 22 of /proc/<pid>/stat); false if it does not exist. */
bool start_time_of(int32_t pid, uint64_t *start, char *state);

/* ---- segments --------------------------------------------------------------------------------- */

struct Segment {
	int fd = -1;
	void *addr = nullptr; /* mapping, once segment_map() succeeded */
	size_t size = 0;      /* mapped size */
	bool created = false; /* this opener created the file (it may remove it on failure) */
	char name[64] = {};   /* POSIX shm name, "/..." */
};

/* Default bound on every wait for a lock another process holds. */
constexpr uint64_t kLockTimeoutNs = 5000000000ull; /* 5 s */

/*
 * Open or create the POSIX shared-memory object `name` ("/" + up to 60 characters of
 * [A-Za-z0-9_.-]) and take its init lock (an exclusive flock) within `timeout_ns`.
 * On success the caller holds the init lock and must call segment_unlock() (or segment_close())
 * when the segment is initialised or validated; seg->created says whether the file is new
 * (then empty, size 0).
 *
 * @return 0; -EINVAL bad name; -EACCES an existing object that is not ours alone (wrong owner,
 *         group/other bits, not a regular file) — one ERR line says which; -ETIMEDOUT the init
 *         lock stayed held; other negative errno from the system.
 */
int segment_open_locked(const char *name, Segment *seg, uint64_t timeout_ns = kLockTimeoutNs);

/* Size of the file now (fstat). @return 0 or negative errno. */
int segment_file_size(const Segment *seg, size_t *size);

/*
 * Map the segment read-write at `size` bytes. With `reset`, the file is first truncated to 0
 * and sized again, so every byte reads zero (the init lock must be held). Without it, the
 * file's size must be exactly `size` (-EPROTO otherwise: a segment of another layout).
 */
int segment_map(Segment *seg, size_t size, bool reset);

/* Unmap (keeping the file open and the init lock), so that it can be mapped again, e.g. with
 * `reset`. */
void segment_unmap(Segment *seg);

/* Drop the init lock. */
void segment_unlock(Segment *seg);

/*
 * Take the init lock again on an open segment (e.g. to decide at close whether this is the last
 * user), within `timeout_ns`. @return 0 locked; -ENOENT the name was removed meanwhile (nothing
 * to decide: the lock is not held); -ETIMEDOUT; other negative errno.
 */
int segment_lock(Segment *seg, uint64_t timeout_ns = kLockTimeoutNs);

/*
 * Read `len` bytes at `off` of the file without mapping it (to inspect the header of a segment
 * whose size or layout is not known yet). @return 0; -EPROTO the file is shorter; negative errno.
 */
int segment_read(const Segment *seg, void *buf, size_t len, size_t off);

/* Unmap and close; with `remove`, also unlink the name (only if this opener created it, or if
 * `force`). Safe on a partly opened segment. */
void segment_close(Segment *seg, bool remove = false, bool force = false);

/* Remove a segment by name; 0, or negative errno (-ENOENT if there is none). */
int segment_unlink(const char *name);

/* ---- robust process-shared mutexes ---------------------------------------------------------- */

/* Initialise a robust, process-shared mutex in shared memory. @return 0 or negative errno. */
int mutex_init(pthread_mutex_t *m);

/*
 * Lock with a bounded wait (CLOCK_MONOTONIC).
 * @return 0 locked; 1 locked, but its previous holder died holding it (the caller repairs the
 *         state it guards, then calls pthread_mutex_consistent()); -ETIMEDOUT; -EIO if the mutex
 *         is unrecoverable or not a mutex at all (corrupted segment).
 */
int mutex_lock(pthread_mutex_t *m, uint64_t timeout_ns = kLockTimeoutNs);

} /* namespace qpn::shm */

#endif /* QPN_SHM_H */
