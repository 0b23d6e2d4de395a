/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared-memory CM fabric against hostile and broken segments: a trap file, an
 * unprivileged user, corrupted header fields, ring indices and random bytes while a user lives,
 * a sender killed between taking a queue position and publishing it, a reused pid, and the
 * last close. Second openers run in fork()ed children with an alarm, so a hang or a crash shows
 * as such.
 */
#include "cm_test_util.h"
#include "cm_internal.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace cmtest;

namespace {

constexpr uint64_t kA = 0xA1, kB = 0xB2, kC = 0xC3;

uint64_t
mono_ns()
{
	return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
				std::chrono::steady_clock::now().time_since_epoch())
				.count());
}

struct Fab {
	std::string name;
	mlx5_qpn_cm_shm_fabric *f = nullptr;
	int rc;
	Fab(const char *tag, unsigned nodes = 4, unsigned slots = 8)
	    : name(std::string("cmh") + std::to_string(getpid()) + "_" + tag)
	{
		mlx5_qpn_cm_shm_fabric_unlink(name.c_str());
		rc = mlx5_qpn_cm_shm_fabric_open(name.c_str(), nodes, slots, &f);
	}
	~Fab()
	{
		mlx5_qpn_cm_shm_fabric_close(f);
		mlx5_qpn_cm_shm_fabric_unlink(name.c_str());
	}
	std::string file() const { return "/dev/shm/mlx5_qpn_cmfab_" + name; }
	operator mlx5_qpn_cm_shm_fabric *() const { return f; }
};

bool
exists(const std::string &path)
{
	struct stat st;
	return lstat(path.c_str(), &st) == 0;
}

struct Raw {
	uint8_t *p = nullptr;
	size_t len = 0;
	explicit Raw(const std::string &path)
	{
		int fd = open(path.c_str(), O_RDWR);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) != 0)
			return;
		len = size_t(st.st_size);
		void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (m != MAP_FAILED)
			p = static_cast<uint8_t *>(m);
	}
	~Raw()
	{
		if (p)
			munmap(p, len);
	}
	size_t find64(uint64_t v) const
	{
		for (size_t off = 0; off + 8 <= len; off += 8)
			if (std::memcmp(p + off, &v, 8) == 0)
				return off;
		return SIZE_MAX;
	}
};

template <typename F>
int
in_child(F fn, unsigned alarm_s = 30)
{
	fflush(nullptr);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(alarm_s);
		_exit(fn() + 128);
	}
	int st = 0;
	if (waitpid(pid, &st, 0) != pid)
		return 2000;
	if (WIFSIGNALED(st))
		return 1000 + WTERMSIG(st);
	return WEXITSTATUS(st) - 128;
}

int
open_close(const std::string &name)
{
	mlx5_qpn_cm_shm_fabric *f = nullptr;
	int rc = mlx5_qpn_cm_shm_fabric_open(name.c_str(), 4, 8, &f);
	if (rc == 0) {
		mlx5_qpn_cm_transport tp;
		rc = mlx5_qpn_cm_shm_fabric_attach(f, 0x77, &tp);
		if (rc == 0) {
			mlx5_qpn_cm_frame fr[4];
			rc = tp.recv_burst(tp.ctx, fr, 4) < 0 ? -EIO : 0;
		}
		mlx5_qpn_cm_shm_fabric_close(f);
	}
	return rc;
}

/* Receive on tp until a frame from `src` arrives or 30 s pass (never a timing assertion: the
 * bound only keeps a broken build from hanging the suite). */
bool
recv_from(mlx5_qpn_cm_transport &tp, uint64_t src)
{
	const uint64_t deadline = mono_ns() + 30'000'000'000ull;
	while (mono_ns() < deadline) {
		mlx5_qpn_cm_frame fr[8];
		int n = tp.recv_burst(tp.ctx, fr, 8);
		for (int i = 0; i < n; i++)
			if (fr[i].src_guid == src)
				return true;
		usleep(1000);
	}
	return false;
}

int g_hook_stage;
int g_hook_fd = -1;

void
stop_here(int stage)
{
	if (stage != g_hook_stage)
		return;
	char c = 's';
	if (write(g_hook_fd, &c, 1) != 1)
		_exit(1);
	for (;;)
		pause(); /* killed here */
}

/* A sender killed at `stage` of a send to kA; the queue must not stall: a later frame from kC
 * arrives and the dead sender's position is counted as a drop. */
void
dead_sender(int stage)
{
	Fab fab(stage == 1 ? "dead1" : "dead2", 4, 4);
	ASSERT_EQ(fab.rc, 0);
	uint64_t grace = cm_impl::shm_stall_grace_ns;
	cm_impl::shm_stall_grace_ns = 20'000'000; /* 20 ms: the test need not wait the default */
	mlx5_qpn_cm_transport ta, tc;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kA, &ta), 0);
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kC, &tc), 0);
	int pfd[2];
	ASSERT_EQ(pipe(pfd), 0);
	fflush(nullptr);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		mlx5_qpn_cm_shm_fabric *f = nullptr;
		mlx5_qpn_cm_transport tb;
		if (mlx5_qpn_cm_shm_fabric_open(fab.name.c_str(), 4, 4, &f) != 0 ||
		    mlx5_qpn_cm_shm_fabric_attach(f, kB, &tb) != 0)
			_exit(2);
		g_hook_stage = stage;
		g_hook_fd = pfd[1];
		cm_impl::shm_send_test_hook = stop_here;
		uint8_t frame[8] = {9};
		tb.send(tb.ctx, kA, frame, 8, 1);
		_exit(3); /* not reached */
	}
	char c = 0;
	ASSERT_EQ(read(pfd[0], &c, 1), 1);
	ASSERT_EQ(c, 's');
	ASSERT_EQ(kill(pid, SIGKILL), 0);
	ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
	uint64_t drops = mlx5_qpn_cm_shm_fabric_drops(fab);
	uint8_t frame[8] = {7};
	ASSERT_EQ(tc.send(tc.ctx, kA, frame, 8, 1), 0);
	EXPECT_TRUE(recv_from(ta, kC)) << "the queue stalled behind the dead sender";
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_drops(fab), drops + 1);
	/* And it keeps working: the ring wraps over the skipped slot. */
	for (int i = 0; i < 10; i++) {
		ASSERT_EQ(tc.send(tc.ctx, kA, frame, 8, 1), 0);
		ASSERT_TRUE(recv_from(ta, kC));
	}
	cm_impl::shm_stall_grace_ns = grace;
	close(pfd[0]);
	close(pfd[1]);
}

} // namespace

TEST(CmShmHostile, TrapFileRefusedAndLeftAlone)
{
	std::string name = "cmh" + std::to_string(getpid()) + "_trap";
	std::string path = "/dev/shm/mlx5_qpn_cmfab_" + name;
	int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(fchmod(fd, 0666), 0);
	ASSERT_EQ(ftruncate(fd, 8192), 0);
	ASSERT_EQ(pwrite(fd, "trap", 4, 0), 4);
	mlx5_qpn_cm_shm_fabric *f = nullptr;
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_open(name.c_str(), 2, 8, &f), -EACCES);
	if (geteuid() == 0) {
		ASSERT_EQ(fchmod(fd, 0600), 0);
		ASSERT_EQ(fchown(fd, 65534, 65534), 0);
		EXPECT_EQ(mlx5_qpn_cm_shm_fabric_open(name.c_str(), 2, 8, &f), -EACCES);
	}
	struct stat st;
	ASSERT_EQ(fstat(fd, &st), 0);
	EXPECT_EQ(st.st_size, 8192);
	char buf[4];
	ASSERT_EQ(pread(fd, buf, 4, 0), 4);
	EXPECT_EQ(std::memcmp(buf, "trap", 4), 0);
	close(fd);
	unlink(path.c_str());
}

TEST(CmShmHostile, UnprivilegedUserCannotTouchALiveFabric)
{
	if (geteuid() != 0)
		GTEST_SKIP() << "needs root to switch to an unprivileged user";
	Fab fab("nobody");
	ASSERT_EQ(fab.rc, 0);
	mlx5_qpn_cm_transport ta;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kA, &ta), 0);
	std::string file = fab.file();
	int rc = in_child([&] {
		if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
			return 10;
		mlx5_qpn_cm_shm_fabric *f = nullptr;
		if (mlx5_qpn_cm_shm_fabric_open(fab.name.c_str(), 4, 8, &f) != -EACCES)
			return 11;
		if (open(file.c_str(), O_RDONLY) >= 0)
			return 12;
		if (mlx5_qpn_cm_shm_fabric_unlink(fab.name.c_str()) == 0)
			return 13;
		return 0;
	});
	EXPECT_EQ(rc, 0);
	EXPECT_TRUE(exists(file));
}

TEST(CmShmHostile, CorruptedHeaderAndRingIndices)
{
	Fab fab("corrupt");
	ASSERT_EQ(fab.rc, 0);
	mlx5_qpn_cm_transport ta, tb;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kA, &ta), 0);
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kB, &tb), 0);
	Raw raw(fab.file());
	ASSERT_NE(raw.p, nullptr);
	/* magic, version, max_nodes, slots at 0, 4, 8, 12; size at 16. */
	const std::vector<std::pair<size_t, uint32_t>> cases = {
		{0, 0xdeadbeef}, {4, 99}, {8, 1000}, {8, 0}, {12, 3}, {12, 1u << 30}, {16, 12345},
	};
	for (auto &c : cases) {
		uint32_t saved;
		std::memcpy(&saved, raw.p + c.first, 4);
		std::memcpy(raw.p + c.first, &c.second, 4);
		EXPECT_EQ(in_child([&] { return open_close(fab.name); }), -EPROTO)
			<< "offset " << c.first << " value " << c.second;
		/* The live user cached its geometry at open: it keeps working. */
		uint8_t fr[4] = {1};
		EXPECT_EQ(ta.send(ta.ctx, kB, fr, 4, 1), 0);
		EXPECT_TRUE(recv_from(tb, kA));
		std::memcpy(raw.p + c.first, &saved, 4);
	}
	/* Ring indices: node kB's head far ahead of its tail (a corrupted producer index). */
	size_t g = raw.find64(kB);
	ASSERT_NE(g, SIZE_MAX);
	size_t node = g & ~size_t(63); /* NodeHdr is 64-aligned; head is the next line */
	uint64_t head;
	std::memcpy(&head, raw.p + node + 64, 8);
	uint64_t bad = head + 1000000;
	std::memcpy(raw.p + node + 64, &bad, 8);
	uint64_t grace = cm_impl::shm_stall_grace_ns;
	cm_impl::shm_stall_grace_ns = 1'000'000;
	mlx5_qpn_cm_frame fr[8];
	for (int i = 0; i < 50; i++)
		EXPECT_GE(tb.recv_burst(tb.ctx, fr, 8), 0); /* returns: never spins on it */
	uint8_t f4[4] = {1};
	int s = ta.send(ta.ctx, kB, f4, 4, 1);
	EXPECT_TRUE(s == 0 || s == -ENOBUFS || s == -EIO) << s;
	cm_impl::shm_stall_grace_ns = grace;
	std::memcpy(raw.p + node + 64, &head, 8);
}

TEST(CmShmHostile, RandomBytesNeverHangOrCrash)
{
	for (unsigned seed = 1; seed <= 8; seed++) {
		Fab fab(("rnd" + std::to_string(seed)).c_str());
		ASSERT_EQ(fab.rc, 0);
		mlx5_qpn_cm_transport ta;
		ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kA, &ta), 0);
		Raw raw(fab.file());
		ASSERT_NE(raw.p, nullptr);
		std::mt19937 rng(seed);
		/* Odd seeds keep the fixed header (so the tables behind it are what is random). */
		size_t from = (seed & 1) ? 64 : 0;
		for (size_t i = from; i < raw.len; i++)
			raw.p[i] = uint8_t(rng());
		int rc = in_child([&] { return open_close(fab.name); });
		EXPECT_TRUE(rc == 0 || rc == -EPROTO || rc == -ENOSPC || rc == -EEXIST)
			<< "seed " << seed << ": " << rc << (rc >= 1000 ? " (crash or hang)" : "");
		if ((seed & 1) == 0) {
			EXPECT_EQ(rc, -EPROTO) << "seed " << seed;
		}
		/* The live user's own calls stay bounded and memory-safe too. */
		mlx5_qpn_cm_frame fr[8];
		EXPECT_GE(ta.recv_burst(ta.ctx, fr, 8), 0);
		uint8_t f4[4] = {1};
		ta.send(ta.ctx, kA, f4, 4, 1);
		mlx5_qpn_cm_shm_service out[4];
		EXPECT_GE(mlx5_qpn_cm_shm_fabric_lookup(fab, 1, out, 4), 0);
	}
}

TEST(CmShmHostile, SenderKilledBeforeClaimDoesNotStall) { dead_sender(1); }

TEST(CmShmHostile, SenderKilledMidCopyDoesNotStall) { dead_sender(2); }

/* A node record with our pid but another start time is a dead owner's (pid reuse). */
TEST(CmShmHostile, ReusedPidIsDead)
{
	Fab fab("reuse");
	ASSERT_EQ(fab.rc, 0);
	mlx5_qpn_cm_transport ta, ta2;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kA, &ta), 0);
	mlx5_qpn_cm_shm_fabric *f2 = nullptr;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_open(fab.name.c_str(), 4, 8, &f2), 0);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_attach(f2, kA, &ta2), -EEXIST) << "its owner is alive";
	Raw raw(fab.file());
	ASSERT_NE(raw.p, nullptr);
	size_t g = raw.find64(kA);
	ASSERT_NE(g, SIZE_MAX);
	/* NodeHdr: state, rsvd, guid, then the owner {pid, rsvd, start}: start at guid + 16. */
	int32_t pid;
	std::memcpy(&pid, raw.p + g + 8, 4);
	EXPECT_EQ(pid, getpid());
	uint64_t start;
	std::memcpy(&start, raw.p + g + 16, 8);
	uint64_t other = start + 12345;
	std::memcpy(raw.p + g + 16, &other, 8);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_attach(f2, kA, &ta2), 0)
		<< "same pid, other start time: dead";
	mlx5_qpn_cm_shm_fabric_close(f2);
}

TEST(CmShmHostile, LastCloseRemovesTheSegment)
{
	std::string name = "cmh" + std::to_string(getpid()) + "_last";
	std::string path = "/dev/shm/mlx5_qpn_cmfab_" + name;
	mlx5_qpn_cm_shm_fabric *a = nullptr, *b = nullptr;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_open(name.c_str(), 2, 8, &a), 0);
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_open(name.c_str(), 2, 8, &b), 0);
	/* A child user that dies without closing. */
	int rc = in_child([&] {
		mlx5_qpn_cm_shm_fabric *f = nullptr;
		if (mlx5_qpn_cm_shm_fabric_open(name.c_str(), 2, 8, &f) != 0)
			return 1;
		raise(SIGKILL);
		return 2;
	});
	EXPECT_EQ(rc, 1000 + SIGKILL);
	mlx5_qpn_cm_shm_fabric_close(a);
	EXPECT_TRUE(exists(path)) << "a user is left";
	mlx5_qpn_cm_shm_fabric_close(b);
	EXPECT_FALSE(exists(path)) << "the last live user removes it";
	mlx5_qpn_cm_shm_fabric_unlink(name.c_str());
}
