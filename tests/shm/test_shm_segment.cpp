/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared segments (lib/shm): exclusive creation, refusal of objects another user could touch,
 * bounded lock waits, the liveness rule (pid + start time).
 */
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/test_helpers.h"
#include "qpn_shm.h"

using namespace qpn::shm;

namespace {

std::string
unique_name(const char *tag)
{
	static std::atomic<int> seq{0};
	return "/qpn_shmtest_" + std::to_string(getpid()) + "_" + tag + "_" +
	       std::to_string(seq.fetch_add(1));
}

struct Unlinker {
	std::string name;
	~Unlinker() { shm_unlink(name.c_str()); }
};

/* A child that runs `fn` and then sleeps until killed; returns its pid. */
template <typename F>
pid_t
child_holding(F fn, int ready_fd)
{
	pid_t pid = fork();
	if (pid == 0) {
		fn();
		char c = 1;
		if (write(ready_fd, &c, 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	return pid;
}

/* Bounded: a child that died before it wrote (an assertion, a sanitizer) fails the test
 * instead of holding it until meson's timeout. */
void
wait_byte(int fd)
{
	struct pollfd p = {fd, POLLIN, 0};
	ASSERT_EQ(poll(&p, 1, 30000), 1) << "the child never said it was ready";
	char c;
	ASSERT_EQ(read(fd, &c, 1), 1);
}

void
reap(pid_t pid)
{
	kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
}

} /* namespace */

TEST(ShmSegment, CreatesExclusivelyThenAttaches)
{
	Unlinker u{unique_name("create")};
	Segment a;
	ASSERT_EQ(segment_open_locked(u.name.c_str(), &a), 0);
	EXPECT_TRUE(a.created);
	struct stat st;
	ASSERT_EQ(fstat(a.fd, &st), 0);
	EXPECT_EQ(st.st_mode & 077, 0u) << "a new segment is the creator's alone";
	ASSERT_EQ(segment_map(&a, 8192, true), 0);
	static_cast<uint8_t *>(a.addr)[100] = 42;
	segment_unlock(&a);

	Segment b;
	ASSERT_EQ(segment_open_locked(u.name.c_str(), &b), 0);
	EXPECT_FALSE(b.created);
	EXPECT_EQ(segment_map(&b, 4096, false), -EPROTO) << "another layout's size is refused";
	ASSERT_EQ(segment_map(&b, 8192, false), 0);
	EXPECT_EQ(static_cast<uint8_t *>(b.addr)[100], 42);
	segment_close(&b, true); /* not the creator: must not remove */
	EXPECT_EQ(access(("/dev/shm" + u.name).c_str(), F_OK), 0);
	segment_close(&a, true);
	EXPECT_NE(access(("/dev/shm" + u.name).c_str(), F_OK), 0);
}

TEST(ShmSegment, RefusesBadNames)
{
	Segment s;
	EXPECT_EQ(segment_open_locked("noslash", &s), -EINVAL);
	EXPECT_EQ(segment_open_locked("/a/b", &s), -EINVAL);
	EXPECT_EQ(segment_open_locked("/", &s), -EINVAL);
	EXPECT_EQ(segment_open_locked("/sp ace", &s), -EINVAL);
	EXPECT_EQ(segment_open_locked(std::string(80, 'x').insert(0, "/").c_str(), &s), -EINVAL);
	EXPECT_EQ(segment_open_locked(nullptr, &s), -EINVAL);
}

TEST(ShmSegment, RefusesAnObjectOthersCanReachAndLeavesItAlone)
{
	Unlinker u{unique_name("mode")};
	int fd = shm_open(u.name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(fchmod(fd, 0666), 0); /* what another user's pre-created trap looks like */
	ASSERT_EQ(ftruncate(fd, 4096), 0);
	ASSERT_EQ(pwrite(fd, "trap", 4, 0), 4);
	Segment s;
	EXPECT_EQ(segment_open_locked(u.name.c_str(), &s), -EACCES);
	EXPECT_EQ(s.fd, -1);
	ASSERT_EQ(fchmod(fd, 0640), 0);
	EXPECT_EQ(segment_open_locked(u.name.c_str(), &s), -EACCES) << "group bits too";
	char buf[4];
	ASSERT_EQ(pread(fd, buf, 4, 0), 4);
	EXPECT_EQ(memcmp(buf, "trap", 4), 0) << "a refused object is not modified";
	struct stat st;
	ASSERT_EQ(fstat(fd, &st), 0);
	EXPECT_EQ(st.st_size, 4096);
	close(fd);
}

TEST(ShmSegment, RefusesAnObjectOwnedByAnotherUser)
{
	if (geteuid() != 0)
		GTEST_SKIP() << "needs root to make a file of another user";
	Unlinker u{unique_name("owner")};
	int fd = shm_open(u.name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(fchown(fd, 65534, 65534), 0); /* nobody: 0600, but not ours */
	Segment s;
	EXPECT_EQ(segment_open_locked(u.name.c_str(), &s), -EACCES);
	close(fd);
}

TEST(ShmSegment, RefusesASymlink)
{
	Unlinker u{unique_name("link")};
	std::string target = "/dev/shm" + u.name + "_target";
	std::string link = "/dev/shm" + u.name;
	int fd = open(target.c_str(), O_CREAT | O_RDWR, 0600);
	ASSERT_GE(fd, 0);
	close(fd);
	ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
	Segment s;
	EXPECT_EQ(segment_open_locked(u.name.c_str(), &s), -EACCES);
	unlink(target.c_str());
}

TEST(ShmSegment, AnUnprivilegedUserCannotOpenOurs)
{
	if (geteuid() != 0)
		GTEST_SKIP() << "needs root to switch to an unprivileged user";
	Unlinker u{unique_name("nobody")};
	Segment s;
	ASSERT_EQ(segment_open_locked(u.name.c_str(), &s), 0);
	ASSERT_EQ(segment_map(&s, 4096, true), 0);
	segment_unlock(&s);
	pid_t pid = fork();
	if (pid == 0) {
		if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
			_exit(10);
		/* Neither open, nor lock, nor map for reading. */
		Segment t;
		int rc = segment_open_locked(u.name.c_str(), &t, 100000000);
		int fd = shm_open(u.name.c_str(), O_RDONLY, 0);
		_exit(rc == -EACCES && fd < 0 ? 0 : 11);
	}
	int st = 0;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(WEXITSTATUS(st), 0);
	segment_close(&s, true);
}

TEST(ShmSegment, InitLockWaitIsBounded)
{
	Unlinker u{unique_name("lock")};
	Segment s;
	ASSERT_EQ(segment_open_locked(u.name.c_str(), &s), 0);
	segment_unlock(&s);
	int pfd[2];
	ASSERT_EQ(pipe(pfd), 0);
	/* A hung holder of the init lock (another process of ours). */
	pid_t pid = child_holding(
		[&] {
			flock(s.fd, LOCK_UN);
			int fd = shm_open(u.name.c_str(), O_RDWR, 0);
			if (fd < 0 || flock(fd, LOCK_EX) != 0)
				_exit(4);
		},
		pfd[1]);
	wait_byte(pfd[0]);
	Segment t;
	EXPECT_EQ(segment_open_locked(u.name.c_str(), &t, 50000000), -ETIMEDOUT);
	EXPECT_EQ(t.fd, -1);
	reap(pid);
	/* Its death drops the lock. */
	EXPECT_EQ(segment_open_locked(u.name.c_str(), &t, 5000000000ull), 0);
	segment_close(&t);
	segment_close(&s);
	close(pfd[0]);
	close(pfd[1]);
}

TEST(ShmSegment, AWaiterDoesNotAdoptAnOrphanUnlinkedByARefusedCreator)
{
	Unlinker u{unique_name("orphan")};
	Segment a;
	ASSERT_EQ(segment_open_locked(u.name.c_str(), &a), 0);
	ASSERT_TRUE(a.created);
	std::atomic<int> rc{1};
	Segment b;
	std::thread waiter([&] { rc = segment_open_locked(u.name.c_str(), &b, 10000000000ull); });
	/* The waiter is blocked on a's lock (flock is per open file, so it conflicts in-process). */
	usleep(20000);
	segment_close(&a, true); /* a refused probe removes what it created */
	waiter.join();
	ASSERT_EQ(rc.load(), 0);
	struct stat st;
	ASSERT_EQ(fstat(b.fd, &st), 0);
	EXPECT_EQ(st.st_nlink, 1u) << "the waiter holds a file that others can open";
	EXPECT_TRUE(b.created);
	segment_close(&b, true);
}

TEST(ShmProc, SelfIsAlive)
{
	ProcId me = self();
	EXPECT_EQ(me.pid, getpid());
	EXPECT_NE(me.start_time, 0u);
	EXPECT_TRUE(alive(me));
	EXPECT_TRUE(is_self(me));
	EXPECT_FALSE(alive(ProcId{0, 0, 0}));
	EXPECT_FALSE(alive(ProcId{-5, 0, 0}));
}

TEST(ShmProc, AReusedPidIsNotTheOwner)
{
	ProcId me = self();
	ProcId other = me;
	other.start_time = me.start_time + 1; /* same pid, another process's start */
	EXPECT_FALSE(alive(other));
	EXPECT_FALSE(is_self(other));
}

TEST(ShmProc, DeadAndZombieChildrenAreDead)
{
	int pfd[2];
	ASSERT_EQ(pipe(pfd), 0);
	pid_t pid = child_holding([] {}, pfd[1]);
	wait_byte(pfd[0]);
	ProcId id{int32_t(pid), 0, 0};
	ASSERT_TRUE(start_time_of(pid, &id.start_time, nullptr));
	EXPECT_TRUE(alive(id));
	ProcId forked_view = id;
	kill(pid, SIGKILL);
	/* Killed, not yet reaped: a zombie holds nothing. Wait until the kernel says so. */
	char st = 0;
	uint64_t start;
	for (int i = 0; i < 100000 && start_time_of(pid, &start, &st) && st != 'Z'; i++)
		usleep(100);
	EXPECT_FALSE(alive(id));
	int ws;
	waitpid(pid, &ws, 0);
	EXPECT_FALSE(alive(forked_view));
	close(pfd[0]);
	close(pfd[1]);
}

/* A process whose main thread has exited while another thread runs is alive (it still holds its
 * memory and may still call the pool); /proc shows its leader as a zombie ('Z'), which the
 * /proc-only check took for death. The pidfd says "exited" only once every thread has. */
TEST(ShmProc, AProcessWhoseMainThreadExitedIsStillAlive)
{
	if (test_helpers::kTsan)
		GTEST_SKIP()
			<< "ThreadSanitizer ends a fork()ed child of a multi-threaded process that "
			   "starts a thread (die_after_fork); the release and ASan builds run it";
	int pfd[2];
	ASSERT_EQ(pipe(pfd), 0);
	pid_t pid = fork();
	if (pid == 0) {
		std::thread([w = pfd[1]] {
			usleep(100000); /* the leader has exited by now */
			char c = 1;
			if (write(w, &c, 1) != 1)
				_exit(3);
			for (;;)
				pause();
		}).detach();
		/* The main thread alone, without unwinding (pthread_exit() would unwind through
		 * gtest's catch-all and abort the child). */
		syscall(SYS_exit, 0);
	}
	ASSERT_GT(pid, 0);
	wait_byte(pfd[0]);
	ProcId id{int32_t(pid), 0, 0};
	ASSERT_TRUE(start_time_of(pid, &id.start_time, nullptr));
	char st = 0;
	uint64_t start;
	ASSERT_TRUE(start_time_of(pid, &start, &st));
	EXPECT_EQ(st, 'Z') << "the leader has not exited: the test proves nothing";
	EXPECT_TRUE(alive(id));
	reap(pid);
	EXPECT_FALSE(alive(id));
	close(pfd[0]);
	close(pfd[1]);
}

/* More peers than the watch table holds (64): each answer stays right as entries make room. */
TEST(ShmProc, ManyPeersEachAnsweredRight)
{
	int pfd[2];
	ASSERT_EQ(pipe(pfd), 0);
	std::vector<ProcId> ids;
	for (int i = 0; i < 80; i++) {
		pid_t pid = child_holding([] {}, pfd[1]);
		ASSERT_GT(pid, 0);
		wait_byte(pfd[0]);
		ProcId id{int32_t(pid), 0, 0};
		ASSERT_TRUE(start_time_of(pid, &id.start_time, nullptr));
		ids.push_back(id);
	}
	for (const ProcId &id : ids)
		EXPECT_TRUE(alive(id)) << id.pid;
	for (size_t i = 0; i < ids.size(); i += 2)
		reap(ids[i].pid);
	for (size_t i = 0; i < ids.size(); i++)
		EXPECT_EQ(alive(ids[i]), i % 2 == 1) << ids[i].pid;
	for (size_t i = 1; i < ids.size(); i += 2)
		reap(ids[i].pid);
	for (const ProcId &id : ids)
		EXPECT_FALSE(alive(id)) << id.pid;
	close(pfd[0]);
	close(pfd[1]);
}

TEST(ShmMutex, OwnerDeathIsReportedAndHeldLockTimesOut)
{
	auto *m = static_cast<pthread_mutex_t *>(
		mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
	ASSERT_NE(m, MAP_FAILED);
	ASSERT_EQ(mutex_init(m), 0);
	int pfd[2];
	ASSERT_EQ(pipe(pfd), 0);
	pid_t pid = child_holding(
		[&] {
			if (pthread_mutex_lock(m) != 0)
				_exit(5);
		},
		pfd[1]);
	wait_byte(pfd[0]);
	EXPECT_EQ(mutex_lock(m, 30000000), -ETIMEDOUT) << "a live holder: bounded wait";
	reap(pid);
	EXPECT_EQ(mutex_lock(m), 1) << "its death is reported so the caller repairs";
	EXPECT_EQ(pthread_mutex_consistent(m), 0);
	pthread_mutex_unlock(m);
	EXPECT_EQ(mutex_lock(m), 0);
	pthread_mutex_unlock(m);
	close(pfd[0]);
	close(pfd[1]);
	munmap(m, 4096);
}

TEST(ShmMutex, GarbageBytesNeverHang)
{
	auto *m = static_cast<pthread_mutex_t *>(
		mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
	ASSERT_NE(m, MAP_FAILED);
	ASSERT_EQ(mutex_init(m), 0);
	const int kind = m->__data.__kind;
	uint32_t x = 12345;
	int refused = 0;
	for (int round = 0; round < 64; round++) {
		auto *b = reinterpret_cast<uint8_t *>(m);
		for (size_t i = 0; i < sizeof(*m); i++) {
			x = x * 1103515245u + 12345u;
			b[i] = uint8_t(x >> 16);
		}
		/* Half the rounds keep a valid kind: then only the lock word and the rest are
		 * garbage, and the wait must still end. */
		if (round & 1)
			m->__data.__kind = kind;
		int rc = mutex_lock(m, 2000000);
		EXPECT_TRUE(rc == 0 || rc == 1 || rc == -ETIMEDOUT || rc == -EIO) << rc;
		if ((round & 1) == 0) {
			EXPECT_EQ(rc, -EIO) << "a mutex of another kind is never locked";
		}
		refused += rc == -EIO;
		if (rc == 1)
			pthread_mutex_consistent(m);
		if (rc >= 0)
			pthread_mutex_unlock(m); /* off this thread's robust list before unmap */
	}
	EXPECT_GE(refused, 32);
	munmap(m, 4096);
}
