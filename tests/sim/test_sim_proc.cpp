/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device across processes: fork()ed children (no EAL use, plain shm) open the same
 * device, get disjoint QPNs, and a killed child's ranges come back.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim_test_util.h"

using namespace sim_test;

namespace {

const mlx5_qpn_dev_ops &ops = mlx5_qpn_sim_ops;

struct Item {
	uint32_t first;
	uint32_t count;
};

bool
write_all(int fd, const void *buf, size_t len)
{
	const char *p = static_cast<const char *>(buf);
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= size_t(n);
	}
	return true;
}

bool
read_all(int fd, void *buf, size_t len)
{
	char *p = static_cast<char *>(buf);
	while (len) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= size_t(n);
	}
	return true;
}

/*
 * Child body: open the device, reserve nb ranges of 2^g and nb QPs, send them (count first,
 * -errno on failure) to wfd, then wait for a byte on rfd (or forever if rfd < 0) and close.
 * Only async-signal-safe-ish calls and the sim backend: no EAL, no gtest.
 */
[[noreturn]] void
child(const mlx5_qpn_devargs &da, int nb, uint32_t g, int wfd, int rfd)
{
	mlx5_qpn_backend *be = nullptr;
	int32_t rc = ops.open(&da, &be);
	std::vector<Item> items;
	for (int i = 0; rc == 0 && i < nb; i++) {
		mlx5_qpn_range_obj o;
		rc = ops.range_reserve(be, g, &o);
		if (rc == 0)
			items.push_back({o.first_qpn, 1u << g});
		uint32_t q;
		if (rc == 0 && sim_args(da).log_max_qp)
			rc = ops.qp_create(be, &q);
		if (rc == 0 && sim_args(da).log_max_qp)
			items.push_back({q, 1});
	}
	int32_t n = rc ? rc : int32_t(items.size());
	write_all(wfd, &n, sizeof(n));
	if (rc == 0)
		write_all(wfd, items.data(), items.size() * sizeof(Item));
	if (rfd >= 0) {
		char c;
		read_all(rfd, &c, 1);
	} else {
		for (;;)
			pause();
	}
	if (be)
		ops.close(be);
	_exit(0);
}

bool
disjoint(std::vector<Item> v)
{
	std::sort(v.begin(), v.end(),
		  [](const Item &a, const Item &b) { return a.first < b.first; });
	for (size_t i = 1; i < v.size(); i++)
		if (v[i - 1].first + v[i - 1].count > v[i].first)
			return false;
	return true;
}

TEST(SimProc, ForkedProcessesGetDisjointQpns)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	mlx5_qpn_backend *be = nullptr;
	ASSERT_EQ(ops.open(&da, &be), 0);
	std::vector<Item> all;
	for (int i = 0; i < 8; i++) {
		mlx5_qpn_range_obj o;
		ASSERT_EQ(ops.range_reserve(be, 3, &o), 0);
		all.push_back({o.first_qpn, 8});
	}

	constexpr int NCHILD = 3;
	pid_t pids[NCHILD];
	int up[NCHILD][2], down[NCHILD][2];
	for (int c = 0; c < NCHILD; c++) {
		ASSERT_EQ(pipe(up[c]), 0);
		ASSERT_EQ(pipe(down[c]), 0);
		pids[c] = fork();
		ASSERT_GE(pids[c], 0);
		if (pids[c] == 0) {
			close(up[c][0]);
			close(down[c][1]);
			child(da, 16, uint32_t(c + 2), up[c][1], down[c][0]);
		}
		close(up[c][1]);
		close(down[c][0]);
	}
	for (int c = 0; c < NCHILD; c++) {
		int32_t cnt = 0;
		ASSERT_TRUE(read_all(up[c][0], &cnt, sizeof(cnt)));
		ASSERT_EQ(cnt, 32) << "child " << c << " failed with " << cnt;
		std::vector<Item> got(static_cast<size_t>(cnt));
		ASSERT_TRUE(read_all(up[c][0], got.data(), got.size() * sizeof(Item)));
		all.insert(all.end(), got.begin(), got.end());
	}
	/* Every child's objects and QPs are alive now: one QPN space for all. */
	EXPECT_TRUE(disjoint(all));
	mlx5_qpn_sim_stats st;
	ASSERT_EQ(mlx5_qpn_sim_stats_get(be, &st), 0);
	EXPECT_EQ(st.owners_live, uint64_t(NCHILD + 1));
	EXPECT_EQ(st.objs_live, uint64_t(8 + 16 * NCHILD));
	EXPECT_EQ(st.qps_live, uint64_t(16 * NCHILD));
	for (int c = 0; c < NCHILD; c++) {
		char go = 1;
		EXPECT_TRUE(write_all(down[c][1], &go, 1));
		int status = 0;
		EXPECT_EQ(waitpid(pids[c], &status, 0), pids[c]);
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		close(up[c][0]);
		close(down[c][1]);
	}
	ASSERT_EQ(mlx5_qpn_sim_stats_get(be, &st), 0);
	EXPECT_EQ(st.owners_live, 1u);
	EXPECT_EQ(st.objs_live, 8u);
	EXPECT_EQ(st.qps_live, 0u);
	EXPECT_EQ(st.reclaimed_objs, 0u); /* they closed: nothing to reclaim */
	ops.close(be);
}

/* Start a child that fills the device and then sleeps; return its pid once it reported. */
pid_t
start_hog(const mlx5_qpn_devargs &da, int nb, uint32_t g, std::vector<Item> *items)
{
	int up[2];
	if (pipe(up) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(up[0]);
		child(da, nb, g, up[1], -1);
	}
	close(up[1]);
	int32_t cnt = -1;
	if (pid > 0 && read_all(up[0], &cnt, sizeof(cnt)) && cnt > 0) {
		items->resize(size_t(cnt));
		read_all(up[0], items->data(), items->size() * sizeof(Item));
	}
	close(up[0]);
	/* Objects, plus as many QPs when the devargs allow QPs. */
	if (pid > 0 && cnt != nb && cnt != 2 * nb) {
		kill(pid, SIGKILL); /* never leave a sleeping child behind */
		waitpid(pid, nullptr, 0);
		return -1;
	}
	return pid;
}

TEST(SimProc, KilledProcessRangesComeBackOnReserve)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).limit = 64;
	sim_args(da).log_max_alloc = 4;
	sim_args(da).log_max_qp = 0; /* the child reserves ranges only */
	mlx5_qpn_backend *be = nullptr;
	ASSERT_EQ(ops.open(&da, &be), 0);
	std::vector<Item> items;
	pid_t pid = start_hog(da, 4, 4, &items); /* 4 x 16 = the whole limit */
	ASSERT_GT(pid, 0);

	mlx5_qpn_range_obj o;
	EXPECT_EQ(ops.range_reserve(be, 4, &o), -ENOMEM); /* the child is alive: no room */

	ASSERT_EQ(kill(pid, SIGKILL), 0);
	/* Wait for its death but leave it a zombie: a zombie holds nothing. */
	siginfo_t si;
	ASSERT_EQ(waitid(P_PID, id_t(pid), &si, WEXITED | WNOWAIT), 0);

	ASSERT_EQ(ops.range_reserve(be, 4, &o), 0); /* no room -> reclaim dead -> retry */
	mlx5_qpn_sim_stats st;
	ASSERT_EQ(mlx5_qpn_sim_stats_get(be, &st), 0);
	EXPECT_EQ(st.reclaimed_objs, 4u);
	EXPECT_EQ(st.objs_live, 1u);
	EXPECT_EQ(st.qpns_reserved, 16u);
	EXPECT_EQ(st.owners_live, 1u);
	EXPECT_EQ(waitpid(pid, nullptr, 0), pid);
	ops.close(be);
}

TEST(SimProc, KilledProcessReclaimedAtOpen)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	mlx5_qpn_backend *be = nullptr;
	ASSERT_EQ(ops.open(&da, &be), 0);
	std::vector<Item> items;
	pid_t pid = start_hog(da, 5, 6, &items);
	ASSERT_GT(pid, 0);
	ASSERT_EQ(kill(pid, SIGKILL), 0);
	ASSERT_EQ(waitpid(pid, nullptr, 0), pid);

	mlx5_qpn_sim_stats st;
	ASSERT_EQ(mlx5_qpn_sim_stats_get(be, &st), 0);
	EXPECT_EQ(st.objs_live, 5u); /* nobody looked yet */
	EXPECT_EQ(st.qps_live, 5u);

	mlx5_qpn_backend *be2 = nullptr;
	ASSERT_EQ(ops.open(&da, &be2), 0); /* open reclaims */
	ASSERT_EQ(mlx5_qpn_sim_stats_get(be, &st), 0);
	EXPECT_EQ(st.objs_live, 0u);
	EXPECT_EQ(st.qps_live, 0u);
	EXPECT_EQ(st.reclaimed_objs, 5u);
	EXPECT_EQ(st.reclaimed_qps, 5u);
	EXPECT_EQ(st.qpns_used, 2u);
	EXPECT_EQ(st.owners_live, 2u);
	/* And the QPNs it held can be handed out again. */
	mlx5_qpn_range_obj o;
	EXPECT_EQ(ops.range_reserve(be2, 6, &o), 0);
	EXPECT_EQ(mlx5_qpn_sim_reclaim(be2), 0); /* nothing left to reclaim */
	ops.close(be2);
	ops.close(be);
}

/* True once the process sleeps in clock_nanosleep (the slow command, device mutex held). */
bool
in_nanosleep(pid_t pid)
{
	char path[64], buf[128] = {};
	snprintf(path, sizeof(path), "/proc/%d/syscall", int(pid));
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && (atol(buf) == SYS_clock_nanosleep || atol(buf) == SYS_nanosleep);
}

TEST(SimProc, DeathInsideCommandIsRepaired)
{
	ScopedName n;
	auto da = default_devargs(n.name);
	sim_args(da).slow_cmd_us = 200000; /* every command sleeps inside the device mutex */
	mlx5_qpn_backend *be = nullptr;
	ASSERT_EQ(ops.open(&da, &be), 0);
	mlx5_qpn_range_obj mine;
	ASSERT_EQ(ops.range_reserve(be, 3, &mine), 0);

	int up[2];
	ASSERT_EQ(pipe(up), 0);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(up[0]);
		mlx5_qpn_backend *cb = nullptr;
		mlx5_qpn_range_obj o;
		char c = 0;
		if (ops.open(&da, &cb) == 0 && ops.range_reserve(cb, 2, &o) == 0)
			c = 1;
		write_all(up[1], &c, 1);
		ops.range_reserve(cb, 2, &o); /* killed in here, holding the mutex */
		_exit(0);
	}
	close(up[1]);
	char c = 0;
	ASSERT_TRUE(read_all(up[0], &c, 1));
	close(up[0]);
	ASSERT_EQ(c, 1);
	bool sleeping = false;
	for (int i = 0; i < 5000 && !(sleeping = in_nanosleep(pid)); i++)
		usleep(1000);
	if (!sleeping) {
		kill(pid, SIGKILL);
		waitpid(pid, nullptr, 0);
		GTEST_SKIP() << "/proc/<pid>/syscall not readable here";
	}
	ASSERT_EQ(kill(pid, SIGKILL), 0);
	ASSERT_EQ(waitpid(pid, nullptr, 0), pid);

	mlx5_qpn_sim_stats st;
	ASSERT_EQ(mlx5_qpn_sim_stats_get(be, &st), 0); /* EOWNERDEAD: repair, then reclaim */
	EXPECT_EQ(st.repairs, 1u);
	EXPECT_EQ(st.reclaimed_objs, 1u);
	EXPECT_EQ(st.objs_live, 1u);
	EXPECT_EQ(st.qpns_reserved, 8u);
	EXPECT_EQ(st.qpns_used, 2u + 8u);
	EXPECT_EQ(st.owners_live, 1u);
	EXPECT_EQ(ops.range_release(be, &mine), 0); /* the device still works */
	ops.close(be);
}

} // namespace
