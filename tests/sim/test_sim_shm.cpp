/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's shared memory against hostile and broken segments: a trap file
 * another user pre-created, an unprivileged user next to a live device, fields corrupted and
 * random bytes written while a holder lives, a holder that hangs with the device mutex, a
 * refused probe and the last close (nothing left in /dev/shm), QPN 0xFFFFFF (multicast).
 *
 * The corruption tests find fields by value (a distinctive GUID, reserved-range start, the magic)
 * rather than by offsets into the private layout; the second opener runs in a fork()ed child with
 * an alarm, so that a hang or a crash is reported as such instead of stalling the suite.
 */
#include <gtest/gtest.h>

#include <cerrno>
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

#include "mlx5_qpn.h"
#include "common/test_helpers.h"
#include "sim_test_util.h"

using namespace sim_test;

namespace {

const mlx5_qpn_dev_ops &ops = mlx5_qpn_sim_ops;

std::string
shm_file(const std::string &dev)
{
	return "/dev/shm/mlx5_qpn_" + dev;
}

bool
exists(const std::string &path)
{
	struct stat st;
	return lstat(path.c_str(), &st) == 0;
}

/* A mapping of the whole device file, as another process of this user could make. */
struct Raw {
	uint8_t *p = nullptr;
	size_t len = 0;
	explicit Raw(const std::string &dev)
	{
		int fd = open(shm_file(dev).c_str(), O_RDWR);
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
	/* Offset of the n-th occurrence (from 0) of a 32/64-bit value, aligned to its size. */
	template <typename T> size_t find(T v, int nth = 0, size_t limit = 1 << 20) const
	{
		for (size_t off = 0; off + sizeof(T) <= std::min(len, limit); off += sizeof(T)) {
			T x;
			std::memcpy(&x, p + off, sizeof(T));
			if (x == v && nth-- == 0)
				return off;
		}
		return SIZE_MAX;
	}
	template <typename T> T get(size_t off) const
	{
		T x;
		std::memcpy(&x, p + off, sizeof(T));
		return x;
	}
	template <typename T> void put(size_t off, T v) { std::memcpy(p + off, &v, sizeof(T)); }
};

/*
 * Run fn() in a fork()ed child with an alarm; its int result comes back through the exit code
 * (result + 128, so -EPROTO etc. fit). Returns the result, or 1000 + signal for a crash or hang.
 */
template <typename F>
int
in_child(F fn, unsigned alarm_s = 30)
{
	fflush(nullptr);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(alarm_s);
		int rc = fn();
		_exit(rc + 128);
	}
	int st = 0;
	if (waitpid(pid, &st, 0) != pid)
		return 2000;
	if (WIFSIGNALED(st))
		return 1000 + WTERMSIG(st);
	return WEXITSTATUS(st) - 128;
}

int
open_close(const mlx5_qpn_devargs &da)
{
	mlx5_qpn_backend *be = nullptr;
	int rc = ops.open(&da, &be);
	if (rc == 0) {
		mlx5_qpn_caps caps;
		rc = ops.query_caps(be, &caps);
		ops.close(be);
	}
	return rc;
}

mlx5_qpn_devargs
marked_devargs(const std::string &name)
{
	auto da = default_devargs(name);
	sim_args(da).guid =
		0x0002c9a1b2c3d4e5ULL;        /* distinctive: finds the parameters in the segment */
	sim_args(da).rsvd_first = 0x00abcde0; /* finds the QPN table's parameters (twice) */
	sim_args(da).rsvd_count = 16;
	return da;
}

/* A pre-created trap file under the device's name is refused and left as it was. */
void
expect_trap_refused(bool other_user)
{
	ScopedName n;
	std::string path = shm_file(n.name);
	int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(fchmod(fd, other_user ? 0600 : 0666), 0);
	if (other_user) {
		ASSERT_EQ(fchown(fd, 65534, 65534), 0);
	}
	ASSERT_EQ(ftruncate(fd, 4096), 0);
	ASSERT_EQ(pwrite(fd, "trap", 4, 0), 4);
	auto da = default_devargs(n.name);
	mlx5_qpn_backend *be = nullptr;
	EXPECT_EQ(ops.open(&da, &be), -EACCES);
	struct stat st;
	ASSERT_EQ(fstat(fd, &st), 0);
	EXPECT_EQ(st.st_size, 4096) << "the trap was resized";
	EXPECT_EQ(st.st_mode & 07777, other_user ? 0600u : 0666u);
	EXPECT_EQ(st.st_uid, other_user ? 65534u : geteuid());
	char buf[4];
	ASSERT_EQ(pread(fd, buf, 4, 0), 4);
	EXPECT_EQ(std::memcmp(buf, "trap", 4), 0) << "the trap was written";
	EXPECT_TRUE(exists(path)) << "another user's file is not ours to remove";
	close(fd);
}

} // namespace

TEST(SimShm, TrapFileMode0666Refused) { expect_trap_refused(false); }

TEST(SimShm, TrapFileOfAnotherUserRefused)
{
	if (geteuid() != 0)
		GTEST_SKIP() << "needs root to make a file of another user";
	expect_trap_refused(true);
}

TEST(SimShm, UnprivilegedUserCannotTouchALiveDevice)
{
	if (geteuid() != 0)
		GTEST_SKIP() << "needs root to switch to an unprivileged user";
	ScopedName n;
	auto da = default_devargs(n.name);
	mlx5_qpn_backend *be = nullptr;
	ASSERT_EQ(ops.open(&da, &be), 0);
	struct stat st;
	ASSERT_EQ(stat(shm_file(n.name).c_str(), &st), 0);
	EXPECT_EQ(st.st_mode & 077, 0u);
	int rc = in_child([&] {
		if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
			return 10;
		mlx5_qpn_backend *b = nullptr;
		mlx5_qpn_sim_set_lock_timeout_ns(100000000);
		if (ops.open(&da, &b) != -EACCES)
			return 11; /* cannot open (nor lock: the init lock needs the file open) */
		if (open(shm_file(n.name).c_str(), O_RDONLY) >= 0)
			return 12; /* cannot read nor map */
		if (mlx5_qpn_sim_destroy(n.name.c_str()) == 0)
			return 13; /* cannot remove it (sticky /dev/shm) */
		return 0;
	});
	EXPECT_EQ(rc, 0);
	mlx5_qpn_range_obj o;
	EXPECT_EQ(ops.range_reserve(be, 2, &o), 0) << "the device still works";
	ops.close(be);
}

/* Fields corrupted while a holder lives: a second opener gets -EPROTO and one line; the
 * holder's own commands are refused too (never a shift by a corrupted cap); once the bytes are
 * restored everything works. */
TEST(SimShm, CorruptedFieldsRefusedWhileHolderLives)
{
	ScopedName n;
	auto da = marked_devargs(n.name);
	mlx5_qpn_backend *be = nullptr;
	ASSERT_EQ(ops.open(&da, &be), 0);
	mlx5_qpn_range_obj obj;
	ASSERT_EQ(ops.range_reserve(be, 3, &obj), 0);
	Raw raw(n.name);
	ASSERT_NE(raw.p, nullptr);
	const size_t guid = raw.find<uint64_t>(sim_args(da).guid);
	const size_t res_cfg = raw.find<uint32_t>(sim_args(da).rsvd_first, 0);
	const size_t res_tab = raw.find<uint32_t>(sim_args(da).rsvd_first, 1);
	ASSERT_NE(guid, SIZE_MAX);
	ASSERT_NE(res_cfg, SIZE_MAX);
	ASSERT_NE(res_tab, SIZE_MAX);
	/* SimCfg: guid, nb_ports, cap_reserved_qpn, log_gran, log_max_alloc, log_max_num,
	 * log_max_qp, ...; QpnTableCfg: qpn_start, qpn_inc, qos_shift, res_start, ... */
	struct Case {
		const char *what;
		size_t off;
		uint32_t bad;
	};
	const std::vector<Case> cases = {
		{"version", 8, 77},
		{"state", 12, 0x12345678},
		{"size", 16, 4096},
		{"nb_ports", guid + 8, 9},
		{"cap_reserved_qpn", guid + 12, 5},
		{"log_gran", guid + 16, 200},
		{"log_max_alloc", guid + 20, 64},
		{"log_max_num", guid + 24, 40},
		{"log_max_qp", guid + 28, 99},
		{"cfg qpn_inc", res_cfg - 8, 0},
		{"cfg qos_shift", res_cfg - 4, 31},
		{"cfg res_count", res_cfg + 4, 0xffffffff},
		{"table qpn_inc", res_tab - 8, 0x20000},
		{"table res_start", res_tab, 0x1000000},
	};
	for (const Case &c : cases) {
		uint32_t saved = raw.get<uint32_t>(c.off);
		raw.put<uint32_t>(c.off, c.bad);
		int rc = in_child([&] { return open_close(da); });
		EXPECT_EQ(rc, -EPROTO) << c.what;
		mlx5_qpn_caps caps;
		if (c.off >= guid) {
			EXPECT_EQ(ops.query_caps(be, &caps), -EPROTO) << c.what;
			uint32_t q;
			EXPECT_EQ(ops.qpn_reserve_one(be, &q) < 0, true) << c.what;
		}
		raw.put<uint32_t>(c.off, saved);
		EXPECT_EQ(ops.query_caps(be, &caps), 0) << c.what << ": restored";
	}
	/* A record: find it by its key (first QPN + 1) and corrupt its size, kind, owner. */
	size_t rec = SIZE_MAX;
	for (int k = 0; rec == SIZE_MAX && k < 64; k++) {
		size_t off = raw.find<uint32_t>(obj.first_qpn + 1, k, raw.len);
		if (off == SIZE_MAX)
			break;
		if (raw.p[off + 6] == 1 && raw.p[off + 7] == 3) /* kind REC_OBJ, log_size 3 */
			rec = off;
	}
	ASSERT_NE(rec, SIZE_MAX);
	const std::vector<std::pair<size_t, uint8_t>> rcases = {
		{rec + 7, 60}, /* log_size */
		{rec + 6, 9},  /* kind */
		{rec + 5, 7},  /* owner slot (high byte) */
	};
	for (auto &c : rcases) {
		uint8_t saved = raw.p[c.first];
		raw.p[c.first] = c.second;
		EXPECT_EQ(in_child([&] { return open_close(da); }), -EPROTO)
			<< "record byte " << c.first - rec;
		raw.p[c.first] = saved;
	}
	uint32_t saved_key = raw.get<uint32_t>(rec);
	raw.put<uint32_t>(rec, 0x7fffffff); /* key far outside the QPN space */
	EXPECT_EQ(in_child([&] { return open_close(da); }), -EPROTO) << "record key";
	raw.put<uint32_t>(rec, saved_key);
	EXPECT_EQ(in_child([&] { return open_close(da); }), 0) << "all restored";
	EXPECT_EQ(ops.range_release(be, &obj), 0);
	ops.close(be);
}

/* Random bytes over the segment, several seeds, while a holder lives: the second opener gets a
 * clear error or a working device; never a hang, never a crash. Three windows: everything from
 * the start (magic included), everything after the header and owner table (so the deep checks
 * run: mutex, parameters, counters, UAR table), and the records around a live one. */
TEST(SimShm, RandomBytesNeverHangOrCrash)
{
	/* Robustness against bytes is what the plain and ASan builds look at (all 6 seeds); under
	 * ThreadSanitizer each forked opener is ~10x slower (~4.5 s for the 18 runs) and what TSan
	 * can add (a race in the open path) shows with the first seeds: 2 of them. */
	const unsigned seeds = test_helpers::sanitizer_scaled(6, 3);
	for (unsigned seed = 1; seed <= seeds; seed++) {
		for (int window = 0; window < 3; window++) {
			ScopedName n;
			auto da = marked_devargs(n.name);
			mlx5_qpn_backend *be = nullptr;
			ASSERT_EQ(ops.open(&da, &be), 0);
			mlx5_qpn_range_obj obj;
			ASSERT_EQ(ops.range_reserve(be, 2, &obj), 0);
			Raw raw(n.name);
			ASSERT_NE(raw.p, nullptr);
			size_t from = 0, len = 65536;
			if (window == 1) {
				from = 24 +
				       64 * 24; /* magic..size, then 64 owner records of 24 bytes */
			} else if (window == 2) {
				size_t rec = raw.find<uint32_t>(obj.first_qpn + 1, 0, raw.len);
				ASSERT_NE(rec, SIZE_MAX);
				from = rec > 32768 ? rec - 32768 : 0;
			}
			std::vector<uint8_t> saved(raw.p + from, raw.p + from + len);
			std::mt19937 rng(seed * 7919 + unsigned(window));
			for (size_t i = 0; i < len; i++)
				raw.p[from + i] = uint8_t(rng());
			int rc = in_child([&] {
				mlx5_qpn_sim_set_lock_timeout_ns(200000000);
				return open_close(da);
			});
			EXPECT_TRUE(rc == 0 || rc == -EPROTO || rc == -EIO || rc == -ETIMEDOUT)
				<< "seed " << seed << " window " << window << ": " << rc
				<< (rc >= 1000 ? " (killed by a signal: crash or hang)" : "");
			if (window < 2) {
				EXPECT_NE(rc, 0) << "seed " << seed << " window " << window;
			}
			std::memcpy(raw.p + from, saved.data(), len);
			ops.close(be);
		}
	}
}

/* A holder hung with the device mutex (stopped with SIGSTOP) makes every other command and
 * opener fail after a bounded wait; once it is killed the device recovers. */
TEST(SimShm, HungMutexHolderIsBoundedThenRecovered)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	mlx5_qpn_backend *be = nullptr;
	ASSERT_EQ(ops.open(&da, &be), 0);
	mlx5_qpn_range_obj mine;
	ASSERT_EQ(ops.range_reserve(be, 3, &mine), 0);
	int pfd[2];
	ASSERT_EQ(pipe(pfd), 0);
	fflush(nullptr);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		mlx5_qpn_backend *cb = nullptr;
		mlx5_qpn_range_obj o;
		char c = 'x';
		if (ops.open(&da, &cb) == 0 && ops.range_reserve(cb, 2, &o) == 0 &&
		    mlx5_qpn_sim_test_hold_mutex(cb) == 0)
			c = 'r';
		if (write(pfd[1], &c, 1) != 1)
			_exit(1);
		raise(SIGSTOP);
		for (;;)
			pause();
	}
	char c = 0;
	ASSERT_EQ(read(pfd[0], &c, 1), 1);
	ASSERT_EQ(c, 'r');
	siginfo_t si;
	ASSERT_EQ(waitid(P_PID, id_t(pid), &si, WSTOPPED), 0);
	uint64_t old = mlx5_qpn_sim_set_lock_timeout_ns(100000000);
	mlx5_qpn_caps caps;
	EXPECT_EQ(ops.query_caps(be, &caps), -ETIMEDOUT);
	mlx5_qpn_backend *b2 = nullptr;
	EXPECT_EQ(ops.open(&da, &b2), -ETIMEDOUT);
	EXPECT_TRUE(exists(shm_file(n.name))) << "a failed attach does not remove a live device";
	kill(pid, SIGKILL);
	ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
	mlx5_qpn_sim_set_lock_timeout_ns(old);
	mlx5_qpn_sim_stats st;
	ASSERT_EQ(mlx5_qpn_sim_stats_get(be, &st), 0);
	EXPECT_EQ(st.repairs, 1u);
	EXPECT_EQ(st.reclaimed_objs, 1u);
	EXPECT_EQ(st.objs_live, 1u);
	EXPECT_EQ(st.owners_live, 1u);
	ASSERT_EQ(ops.open(&da, &b2), 0);
	ops.close(b2);
	EXPECT_EQ(ops.range_release(be, &mine), 0);
	ops.close(be);
	close(pfd[0]);
	close(pfd[1]);
}

/* A probe the device refuses after its segment was made leaves nothing in /dev/shm. */
TEST(SimShm, RefusedProbeLeavesNothing)
{
	ScopedName n;
	std::string args = n.name + ",reserved_qpn=yes,cap_reserved_qpn=0";
	mlx5_qpn_dev *dev = nullptr;
	EXPECT_LT(mlx5_qpn_dev_probe(args.c_str(), &dev), 0);
	EXPECT_FALSE(exists(shm_file(n.name)));
	/* Refused by the device's own checks (qpn_inc << qos_shift wraps to 0): nothing either. */
	auto da = default_devargs(n.name);
	sim_args(da).qpn_inc = 0x20000;
	sim_args(da).qos_shift = 15;
	mlx5_qpn_backend *be = nullptr;
	EXPECT_EQ(ops.open(&da, &be), -EINVAL);
	EXPECT_FALSE(exists(shm_file(n.name)));
}

/* The last live owner's close removes the segment; a dead owner does not keep it. */
TEST(SimShm, LastCloseRemovesTheSegment)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	mlx5_qpn_backend *a = nullptr, *b = nullptr;
	ASSERT_EQ(ops.open(&da, &a), 0);
	ASSERT_EQ(ops.open(&da, &b), 0);
	ops.close(a);
	EXPECT_TRUE(exists(shm_file(n.name)));
	/* A child that dies holding a handle. */
	int pfd[2];
	ASSERT_EQ(pipe(pfd), 0);
	fflush(nullptr);
	pid_t pid = fork();
	if (pid == 0) {
		mlx5_qpn_backend *cb = nullptr;
		char c = ops.open(&da, &cb) == 0 ? 'r' : 'x';
		if (write(pfd[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	char c = 0;
	ASSERT_EQ(read(pfd[0], &c, 1), 1);
	ASSERT_EQ(c, 'r');
	kill(pid, SIGKILL);
	ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
	ops.close(b);
	EXPECT_FALSE(exists(shm_file(n.name))) << "the last live owner removes it";
	close(pfd[0]);
	close(pfd[1]);
}

/* Through the device: a full-space reservation never includes QPN 0xFFFFFF (multicast). */
TEST(SimShm, FullSpaceReservationSkipsMulticastQpn)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).log_max_alloc = 20;
	sim_args(da).log_max_num = 24;
	sim_args(da).log_max_qp = 24;
	mlx5_qpn_backend *be = nullptr;
	ASSERT_EQ(ops.open(&da, &be), 0);
	std::vector<mlx5_qpn_range_obj> objs;
	for (;;) {
		mlx5_qpn_range_obj o;
		int rc = ops.range_reserve(be, 20, &o);
		if (rc != 0) {
			EXPECT_EQ(rc, -ENOMEM);
			break;
		}
		objs.push_back(o);
	}
	/* 16 blocks of 2^20: the first holds QP0/QP1, the last 0xFFFFFF. */
	EXPECT_EQ(objs.size(), 14u);
	for (auto &o : objs)
		EXPECT_FALSE(o.first_qpn <= 0xffffffu && 0xffffffu - o.first_qpn < (1u << 20))
			<< std::hex << o.first_qpn;
	/* QPs and single-QPN ranges cannot reach it either: the table tests (SimTable.Multicast*)
	 * walk the top block one QPN at a time (the device's record table holds 2^17 entries). */
	ops.close(be);
}
