/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared segments and process liveness: see qpn_shm.h for the threat model.
 */
#include "qpn_shm.h"

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <csignal>
#include <fcntl.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_log.h>

#include "mlx5_qpn_log.h"

RTE_LOG_REGISTER(mlx5_qpn_shm_logtype, mlx5_qpn.shm, INFO);
#define SHM_LOG(level, ...) MLX5_QPN_LOG(shm, level, __VA_ARGS__)

namespace qpn::shm {

namespace {

void
sleep_ns(uint64_t ns)
{
	struct timespec ts = {time_t(ns / 1000000000ull), long(ns % 1000000000ull)};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Cached identity of this process; `pid` tells whether a fork() made it stale. */
ProcId g_self;

bool
name_ok(const char *name)
{
	if (name == nullptr || name[0] != '/')
		return false;
	size_t n = strnlen(name, sizeof(Segment::name));
	if (n < 2 || n >= sizeof(Segment::name))
		return false;
	for (size_t i = 1; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

/* An object someone else could read, write or lock is refused: one line says why. */
int
check_ours(int fd, const char *name)
{
	struct stat st;
	if (fstat(fd, &st) == -1)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		SHM_LOG(ERR, "refusing shared memory %s: not a regular file", name);
		return -EACCES;
	}
	if (st.st_uid != geteuid()) {
		SHM_LOG(ERR,
			"refusing shared memory %s: owned by uid %u, not by this user (uid %u); remove it",
			name, unsigned(st.st_uid), unsigned(geteuid()));
		return -EACCES;
	}
	if ((st.st_mode & 077) != 0) {
		SHM_LOG(ERR,
			"refusing shared memory %s: mode %04o gives access to other users; remove it",
			name, unsigned(st.st_mode & 07777));
		return -EACCES;
	}
	return 0;
}

/* flock with a bounded wait: polls LOCK_NB with a growing sleep (1 us .. 10 ms). */
int
flock_timed(int fd, uint64_t timeout_ns)
{
	const uint64_t deadline = mono_ns() + timeout_ns;
	uint64_t nap = 1000;
	for (;;) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (mono_ns() >= deadline)
			return -ETIMEDOUT;
		sleep_ns(nap);
		nap = nap < 10000000 ? nap * 2 : nap;
	}
}

} /* namespace */

/* ---- process identity ----------------------------------------------------------------------- */

bool
start_time_of(int32_t pid, uint64_t *start, char *state)
{
	if (pid <= 0)
		return false;
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", int(pid));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* The command name (field 2) may hold spaces and parentheses: fields resume after the
	 * last ')'. */
	char *p = strrchr(buf, ')');
	if (p == nullptr || p[1] != ' ')
		return false;
	p += 2;
	if (state != nullptr)
		*state = *p;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (p == nullptr)
			return false;
		p++;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 10);
	if (errno != 0 || end == p)
		return false;
	*start = v;
	return true;
}

ProcId
self()
{
	int32_t pid = int32_t(getpid());
	ProcId s = g_self;
	if (s.pid != pid) {
		s = ProcId{pid, 0, 0};
		start_time_of(pid, &s.start_time, nullptr);
		g_self = s; /* racing first calls compute the same value */
	}
	return s;
}

bool
is_self(const ProcId &id)
{
	ProcId s = self();
	return id.pid == s.pid && id.start_time == s.start_time;
}

/* ---- segments --------------------------------------------------------------------------------- */

int
segment_open_locked(const char *name, Segment *seg, uint64_t timeout_ns)
{
	if (seg == nullptr || !name_ok(name))
		return -EINVAL;
	*seg = Segment();
	snprintf(seg->name, sizeof(seg->name), "%s", name);
	const uint64_t deadline = mono_ns() + timeout_ns;
	for (int attempt = 0; attempt < 64; attempt++) {
		bool created = true;
		int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno == EEXIST) {
			created = false;
			fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
			if (fd < 0 && errno == ENOENT)
				continue; /* removed between the two calls: create it */
		}
		if (fd < 0) {
			int err = errno;
			if (err == EACCES || err == ELOOP)
				SHM_LOG(ERR,
					"refusing shared memory %s: %s (owned by another user?)",
					name, strerror(err));
			return err == ELOOP ? -EACCES : -err;
		}
		/* The mode of a new file is 0600 less the umask: still ours alone. An existing
		 * one must be ours alone, whoever made it. */
		int rc = created ? 0 : check_ours(fd, name);
		if (rc == 0) {
			uint64_t now = mono_ns();
			rc = flock_timed(fd, now < deadline ? deadline - now : 0);
			if (rc == -ETIMEDOUT)
				SHM_LOG(ERR,
					"shared memory %s: its init lock is held by another process for more than %" PRIu64
					" ms",
					name, timeout_ns / 1000000);
		}
		if (rc == 0) {
			/* A refused opener may have unlinked the file while we waited for its lock:
			 * initialising that orphan would make two devices of one name. */
			struct stat st;
			if (fstat(fd, &st) == -1) {
				rc = -errno;
			} else if (st.st_nlink == 0) {
				close(fd);
				continue;
			}
		}
		if (rc != 0) {
			close(fd);
			return rc;
		}
		seg->fd = fd;
		seg->created = created;
		return 0;
	}
	return -EAGAIN;
}

int
segment_file_size(const Segment *seg, size_t *size)
{
	struct stat st;
	if (seg == nullptr || seg->fd < 0 || size == nullptr)
		return -EINVAL;
	if (fstat(seg->fd, &st) == -1)
		return -errno;
	*size = size_t(st.st_size);
	return 0;
}

int
segment_map(Segment *seg, size_t size, bool reset)
{
	if (seg == nullptr || seg->fd < 0 || size == 0 || seg->addr != nullptr)
		return -EINVAL;
	if (reset) {
		if (ftruncate(seg->fd, 0) == -1 || ftruncate(seg->fd, off_t(size)) == -1)
			return -errno;
	} else {
		size_t have;
		int rc = segment_file_size(seg, &have);
		if (rc != 0)
			return rc;
		if (have != size)
			return -EPROTO;
	}
	void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	seg->addr = p;
	seg->size = size;
	return 0;
}

void
segment_unmap(Segment *seg)
{
	if (seg == nullptr || seg->addr == nullptr)
		return;
	munmap(seg->addr, seg->size);
	seg->addr = nullptr;
	seg->size = 0;
}

void
segment_unlock(Segment *seg)
{
	if (seg != nullptr && seg->fd >= 0)
		flock(seg->fd, LOCK_UN);
}

int
segment_lock(Segment *seg, uint64_t timeout_ns)
{
	if (seg == nullptr || seg->fd < 0)
		return -EINVAL;
	int rc = flock_timed(seg->fd, timeout_ns);
	if (rc == -ETIMEDOUT) {
		SHM_LOG(ERR,
			"shared memory %s: its init lock is held by another process for more than %" PRIu64
			" ms",
			seg->name, timeout_ns / 1000000);
		return rc;
	}
	if (rc != 0)
		return rc;
	struct stat st;
	if (fstat(seg->fd, &st) == -1) {
		rc = -errno;
		flock(seg->fd, LOCK_UN);
		return rc;
	}
	if (st.st_nlink == 0) {
		flock(seg->fd, LOCK_UN);
		return -ENOENT;
	}
	return 0;
}

int
segment_read(const Segment *seg, void *buf, size_t len, size_t off)
{
	if (seg == nullptr || seg->fd < 0 || (buf == nullptr && len != 0))
		return -EINVAL;
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(seg->fd, static_cast<char *>(buf) + done, len - done,
				  off_t(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPROTO;
		done += size_t(n);
	}
	return 0;
}

void
segment_close(Segment *seg, bool remove, bool force)
{
	if (seg == nullptr)
		return;
	if (remove && (seg->created || force) && seg->name[0] == '/')
		shm_unlink(seg->name); /* before the lock drops: a waiter then sees st_nlink == 0 */
	if (seg->addr != nullptr)
		munmap(seg->addr, seg->size);
	if (seg->fd >= 0)
		close(seg->fd); /* drops the flock too */
	*seg = Segment();
}

int
segment_unlink(const char *name)
{
	if (!name_ok(name))
		return -EINVAL;
	return shm_unlink(name) == 0 ? 0 : -errno;
}

/* ---- robust mutexes ------------------------------------------------------------------------- */

int
mutex_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t ma;
	int rc = pthread_mutexattr_init(&ma);
	if (rc != 0)
		return -rc;
	rc = pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	if (rc == 0)
		rc = pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	if (rc == 0)
		rc = pthread_mutex_init(m, &ma);
	pthread_mutexattr_destroy(&ma);
	return -rc;
}

/*
 * The kind word of a robust process-shared mutex as this glibc writes it. A mutex whose kind
 * differs was not made by mutex_init(): locking it would be undefined (a garbage kind can select
 * the priority-inheritance path, where glibc asserts), so it is refused before any lock call.
 */
static int
expected_kind()
{
	static const int kind = [] {
		pthread_mutex_t ref;
		if (mutex_init(&ref) != 0)
			return -1;
		int k = ref.__data.__kind;
		pthread_mutex_destroy(&ref);
		return k;
	}();
	return kind;
}

int
mutex_lock(pthread_mutex_t *m, uint64_t timeout_ns)
{
	/*
	 * The word is shared with other processes, which may be writing it (a hostile or half-made
	 * segment): read it atomically, as glibc's own lock paths do.
	 */
	if (m == nullptr ||
	    std::atomic_ref<int>(m->__data.__kind).load(std::memory_order_relaxed) !=
		    expected_kind())
		return -EIO;
	/*
	 * trylock in a loop with a growing pause rather than timedlock/clocklock: ThreadSanitizer
	 * models EOWNERDEAD only through lock and trylock, and the holders of these mutexes are
	 * slow paths (device commands), so a waiter polling at most every millisecond costs
	 * nothing that matters.
	 */
	const uint64_t deadline = mono_ns() + timeout_ns;
	uint64_t nap = 0;
	int rc;
	for (;;) {
		rc = pthread_mutex_trylock(m);
		if (rc != EBUSY)
			break;
		if (mono_ns() >= deadline) {
			rc = ETIMEDOUT;
			break;
		}
		if (nap == 0)
			sched_yield();
		else
			sleep_ns(nap);
		nap = nap == 0 ? 1000 : (nap < 1000000 ? nap * 2 : nap);
	}
	switch (rc) {
	case 0:
		return 0;
	case EOWNERDEAD:
		return 1;
	case ETIMEDOUT:
		return -ETIMEDOUT;
	default:
		/* ENOTRECOVERABLE, EINVAL (bytes that are no mutex), EDEADLK (a corrupted owner
		 * field naming us): the segment cannot be trusted. */
		return -EIO;
	}
}

} /* namespace qpn::shm */
