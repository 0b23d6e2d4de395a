/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Invariant 5 across process lifetimes, through the public API only: a QPN that a process let go
 * (released, held at close, held when it was SIGKILLed) is not handed out again by any process on
 * the device before the quarantine has passed since it was let go.
 *
 * The emulated device runs with fw_first_fit=1: like firmware may, it hands a destroyed range out
 * again at once (the dead process's ranges are reclaimed at the next create, as the kernel frees
 * them at once). Without the lease file these tests fail: the range comes straight back.
 *
 * Clock reads bracket the events so that a check can miss a violation but never invent one: a
 * QPN is "handed out" no later than its alloc call returned (t_after), and "let go" no earlier
 * than the close or kill call began (t_letgo). A failure of t_after >= t_letgo + Q is therefore a
 * real violation. No assertion depends on speed: waits have deadlines far beyond the quarantine.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mlx5_qpn.h"
#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_devargs.h"
#include "lease_proc_util.h"
#include "sim/mlx5_qpn_sim.h"

using leasetest::Helper;
using leasetest::helper_path;

namespace {

constexpr uint64_t kQuarUs = 1000000; /* 1 s: the order of events is unambiguous */
constexpr uint64_t kQuarNs = kQuarUs * 1000;

/* A unique emulated device (and its lease file) removed at the end. */
struct LeaseSim {
	std::string name;
	uint64_t guid = 0;
	LeaseSim()
	{
		static int seq;
		name = "simlease" + std::to_string(getpid()) + "x" + std::to_string(seq++);
	}
	~LeaseSim()
	{
		mlx5_qpn_dev_purge(name.c_str());
		if (guid != 0) { /* mlx5_qpn_dev_purge() removes it too; a test owns its name */
			char ln[64];
			snprintf(ln, sizeof(ln), "/mlx5_qpn_lease_%016" PRIx64, guid);
			shm_unlink(ln);
		}
	}
	void note(mlx5_qpn_dev *d)
	{
		mlx5_qpn_dev_info in;
		if (mlx5_qpn_dev_info_get(d, &in) == 0)
			guid = in.node_guid;
	}
	std::string args(unsigned max_qpns, uint64_t quar_us = kQuarUs) const
	{
		return name + ",quarantine_us=" + std::to_string(quar_us) +
		       ",log_max_alloc=6,log_range=6,fw_first_fit=1,cache=8,low_water=0,max_qpns=" +
		       std::to_string(max_qpns);
	}
};

struct Seen {
	uint64_t t_after; /* the alloc call had returned */
};

/*
 * Allocate (and keep) QPNs from `dev` until every QPN of `want` was handed out or a deadline far
 * beyond the quarantine passed. Returns, for each QPN of `want` seen, when its alloc returned.
 */
std::map<uint32_t, Seen>
collect(mlx5_qpn_dev *dev, const std::set<uint32_t> &want, std::vector<uint32_t> *kept,
	uint64_t quar_ns = kQuarNs)
{
	std::map<uint32_t, Seen> seen;
	const uint64_t deadline = mlx5_qpn_clock_ns() + quar_ns + 30000000000ull;
	while (seen.size() < want.size() && mlx5_qpn_clock_ns() < deadline) {
		uint32_t q;
		int rc = mlx5_qpn_reserved_alloc(dev, &q);
		uint64_t t = mlx5_qpn_clock_ns();
		if (rc == -EAGAIN || rc == -ENOSPC) {
			usleep(1000);
			continue;
		}
		if (rc != 0) {
			ADD_FAILURE() << "alloc failed: " << rc;
			break;
		}
		kept->push_back(q);
		if (want.count(q) != 0)
			seen.emplace(q, Seen{t});
	}
	return seen;
}

/* Every QPN of `want` came back, none earlier than letgo + quarantine. Returns the smallest delay. */
uint64_t
check_after(const std::map<uint32_t, Seen> &seen, const std::set<uint32_t> &want, uint64_t t_letgo,
	    const char *what, uint64_t quar_ns = kQuarNs)
{
	EXPECT_EQ(seen.size(), want.size()) << what << ": not every QPN let go came back "
					    << "(the device should hand the range out again)";
	uint64_t min_delay = UINT64_MAX;
	unsigned early = 0;
	for (auto &[q, s] : seen) {
		uint64_t d = s.t_after >= t_letgo ? s.t_after - t_letgo : 0;
		min_delay = std::min(min_delay, d);
		if (s.t_after < t_letgo + quar_ns && early++ < 4)
			ADD_FAILURE()
				<< what << ": QPN 0x" << std::hex << q << std::dec
				<< " handed out again " << d / 1000 << " us after it was let go"
				<< " (quarantine " << quar_ns / 1000 << " us)";
	}
	EXPECT_EQ(early, 0u) << what << ": QPNs handed out inside the quarantine";
	return min_delay;
}

void
release_all(mlx5_qpn_dev *dev, const std::vector<uint32_t> &q)
{
	for (uint32_t x : q)
		mlx5_qpn_reserved_dealloc(dev, x);
}

} // namespace

/* (a) Orderly close with QPNs in use and in quarantine; the same process probes again. */
TEST(LeaseClose, ReprobeSameProcess)
{
	LeaseSim sim;
	mlx5_qpn_dev *d = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(sim.args(256).c_str(), &d), 0);
	sim.note(d);
	std::vector<uint32_t> q(64);
	for (auto &x : q)
		ASSERT_EQ(mlx5_qpn_reserved_alloc(d, &x), 0);
	for (int i = 0; i < 32; i++)
		ASSERT_EQ(mlx5_qpn_reserved_dealloc(d, q[i]), 0);
	std::set<uint32_t> want(q.begin(), q.end());
	uint64_t t_close = mlx5_qpn_clock_ns();
	mlx5_qpn_dev_close(d);

	ASSERT_EQ(mlx5_qpn_dev_probe(sim.args(256).c_str(), &d), 0);
	sim.note(d);
	std::vector<uint32_t> kept;
	auto seen = collect(d, want, &kept);
	uint64_t min_d = check_after(seen, want, t_close, "re-probe in the closing process");
	printf("[ close/re-probe ] %zu QPNs of the closed range handed out again, the first %" PRIu64
	       " ms after close (quarantine %" PRIu64 " ms)\n",
	       seen.size(), min_d / 1000000, kQuarUs / 1000);
	release_all(d, kept);
	mlx5_qpn_dev_close(d);
}

/* (a) Orderly close in another process; this one probes after it. */
TEST(LeaseClose, OtherProcessAfterClose)
{
	LeaseSim sim;
	Helper h;
	ASSERT_TRUE(h.start(sim.args(256), 64, 32))
		<< "lease_helper did not start: " << helper_path();
	std::set<uint32_t> want(h.held.begin(), h.held.end());
	want.insert(h.released.begin(), h.released.end());
	ASSERT_EQ(want.size(), 64u);
	uint64_t t_close = mlx5_qpn_clock_ns();
	ASSERT_TRUE(h.close_dev());

	mlx5_qpn_dev *d = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(sim.args(256).c_str(), &d), 0);
	sim.note(d);
	std::vector<uint32_t> kept;
	auto seen = collect(d, want, &kept);
	uint64_t min_d = check_after(seen, want, t_close, "probe after another process closed");
	printf("[ close/other ] %zu QPNs of the closed process handed out again, the first %" PRIu64
	       " ms after its close (quarantine %" PRIu64 " ms)\n",
	       seen.size(), min_d / 1000000, kQuarUs / 1000);
	release_all(d, kept);
	mlx5_qpn_dev_close(d);
}

/* (b) A process holding live and quarantined QPNs is SIGKILLed while a survivor runs. */
TEST(LeaseKill, SurvivorNeverGetsDeadQpnsEarly)
{
	LeaseSim sim;
	mlx5_qpn_dev *d = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(sim.args(256).c_str(), &d), 0);
	sim.note(d);
	std::vector<uint32_t> kept(64);
	for (auto &x : kept) /* the survivor's first range, all in use */
		ASSERT_EQ(mlx5_qpn_reserved_alloc(d, &x), 0);

	Helper h;
	ASSERT_TRUE(h.start(sim.args(256), 128, 64)) << "lease_helper did not start";
	std::set<uint32_t> want(h.held.begin(), h.held.end());
	want.insert(h.released.begin(), h.released.end());
	ASSERT_EQ(want.size(), 128u);
	pid_t pid = h.pid;
	uint64_t t_kill = mlx5_qpn_clock_ns();
	ASSERT_TRUE(h.kill9());

	auto seen = collect(d, want, &kept);
	uint64_t min_d = check_after(seen, want, t_kill, "survivor after SIGKILL");
	printf("[ kill/survivor ] killed pid %d holding %zu QPNs (%zu in quarantine): %zu handed out "
	       "again, the first %" PRIu64 " ms after the kill (quarantine %" PRIu64 " ms)\n",
	       int(pid), want.size(), h.released.size(), seen.size(), min_d / 1000000,
	       kQuarUs / 1000);
	release_all(d, kept);
	mlx5_qpn_dev_close(d);
}

/* (b) The survivor probes only after the kill (the emulated device is reset then, as a device
 * nobody holds: the dead process's ranges are the first it hands out). */
TEST(LeaseKill, ProbeAfterKill)
{
	LeaseSim sim;
	Helper h;
	ASSERT_TRUE(h.start(sim.args(256), 128, 64)) << "lease_helper did not start";
	std::set<uint32_t> want(h.held.begin(), h.held.end());
	want.insert(h.released.begin(), h.released.end());
	ASSERT_EQ(want.size(), 128u);
	pid_t pid = h.pid;
	uint64_t t_kill = mlx5_qpn_clock_ns();
	ASSERT_TRUE(h.kill9());

	mlx5_qpn_dev *d = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(sim.args(256).c_str(), &d), 0);
	sim.note(d);
	std::vector<uint32_t> kept;
	auto seen = collect(d, want, &kept);
	uint64_t min_d = check_after(seen, want, t_kill, "probe after SIGKILL");
	printf("[ kill/probe ] killed pid %d holding %zu QPNs (%zu in quarantine): %zu handed out "
	       "again, the first %" PRIu64 " ms after the kill (quarantine %" PRIu64 " ms)\n",
	       int(pid), want.size(), h.released.size(), seen.size(), min_d / 1000000,
	       kQuarUs / 1000);
	release_all(d, kept);
	mlx5_qpn_dev_close(d);
}

/* (c) through the driver: a corrupted lease file makes the probe fail with one line, no crash,
 * and the device is not touched (the lease is opened before the first reservation). */
TEST(LeaseClose, CorruptedLeaseRefusesProbe)
{
	LeaseSim sim;
	mlx5_qpn_dev *d = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(sim.args(256).c_str(), &d), 0);
	sim.note(d);
	mlx5_qpn_dev_close(d);
	char ln[64];
	snprintf(ln, sizeof(ln), "/mlx5_qpn_lease_%016" PRIx64, sim.guid);
	shm_unlink(ln);
	int fd = shm_open(ln, O_RDWR | O_CREAT | O_EXCL, 0600);
	ASSERT_GE(fd, 0);
	char junk[4096];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = char(i * 131 + 7);
	ASSERT_EQ(write(fd, junk, sizeof(junk)), ssize_t(sizeof(junk)));
	close(fd);
	EXPECT_EQ(mlx5_qpn_dev_probe(sim.args(256).c_str(), &d), -EPROTO);
	shm_unlink(ln);
	ASSERT_EQ(mlx5_qpn_dev_probe(sim.args(256).c_str(), &d), 0); /* removed: works again */
	mlx5_qpn_dev_stats st;
	ASSERT_EQ(mlx5_qpn_dev_stats_get(d, &st), 0);
	EXPECT_EQ(st.lease_errors, 0u);
	mlx5_qpn_dev_close(d);
}

/* A lease file of the device, as a crashed process leaves it (the content does not matter to
 * a purge, which removes it by name). */
void
leave_lease_file(uint64_t guid)
{
	char ln[64];
	snprintf(ln, sizeof(ln), "/mlx5_qpn_lease_%016" PRIx64, guid);
	int fd = shm_open(ln, O_RDWR | O_CREAT, 0600);
	ASSERT_GE(fd, 0);
	close(fd);
}

bool
lease_file_exists(uint64_t guid)
{
	char ln[64];
	snprintf(ln, sizeof(ln), "/mlx5_qpn_lease_%016" PRIx64, guid);
	int fd = shm_open(ln, O_RDONLY, 0);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* The lease file is the generic layer's: the emulator's destroy removes its own segment only,
 * and the generic purge removes the lease file of the GUID the emulator reports (the name's
 * GUID once the segment is gone, the created one while it exists). */
TEST(LeaseClose, PurgeRemovesTheLeaseFileSimDestroyDoesNot)
{
	LeaseSim sim;
	mlx5_qpn_dev *d = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(sim.args(256).c_str(), &d), 0);
	sim.note(d);
	ASSERT_NE(sim.guid, 0u);
	mlx5_qpn_dev_close(d); /* the last close removes the segment */
	leave_lease_file(sim.guid);
	EXPECT_EQ(mlx5_qpn_sim_destroy(sim.name.c_str()), -ENOENT);
	EXPECT_TRUE(lease_file_exists(sim.guid));
	EXPECT_EQ(mlx5_qpn_dev_purge(sim.name.c_str()), 0); /* the lease file was there */
	EXPECT_FALSE(lease_file_exists(sim.guid));
	EXPECT_EQ(mlx5_qpn_dev_purge(sim.name.c_str()), -ENOENT);

	/* A GUID set by devargs: the segment's, which a process that died with its handle open
	 * left (a live handle would make the purge refuse: LeaseReturn.Purge*). */
	constexpr uint64_t kGuid = 0x0002c9feedf00d01ull;
	std::string args = sim.name + ",guid=0x0002c9feedf00d01";
	mlx5_qpn_devargs da;
	ASSERT_EQ(mlx5_qpn_devargs_parse(args.c_str(), &da), 0);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		mlx5_qpn_backend *be = nullptr;
		_exit(da.backend->ops->open(&da, &be) == 0 ? 0 : 1);
	}
	int st = 0;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	leave_lease_file(kGuid);
	EXPECT_EQ(mlx5_qpn_dev_purge(sim.name.c_str()), 0);
	EXPECT_FALSE(lease_file_exists(kGuid));
}

/* (b) The reported case: 2048 QPNs (half released into quarantine), a 3 s quarantine, SIGKILL. */
TEST(LeaseKill, Reported2048Qpns3sQuarantine)
{
	constexpr uint64_t q_us = 3000000;
	LeaseSim sim;
	mlx5_qpn_dev *d = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(sim.args(4096, q_us).c_str(), &d), 0);
	sim.note(d);
	std::vector<uint32_t> kept(64);
	for (auto &x : kept)
		ASSERT_EQ(mlx5_qpn_reserved_alloc(d, &x), 0);
	Helper h;
	ASSERT_TRUE(h.start(sim.args(4096, q_us), 2048, 1024)) << "lease_helper did not start";
	std::set<uint32_t> want(h.held.begin(), h.held.end());
	want.insert(h.released.begin(), h.released.end());
	ASSERT_EQ(want.size(), 2048u);
	pid_t pid = h.pid;
	uint64_t t_kill = mlx5_qpn_clock_ns();
	ASSERT_TRUE(h.kill9());
	auto seen = collect(d, want, &kept, q_us * 1000);
	uint64_t min_d = check_after(seen, want, t_kill, "survivor after SIGKILL (2048 QPNs)",
				     q_us * 1000);
	mlx5_qpn_dev_stats st;
	ASSERT_EQ(mlx5_qpn_dev_stats_get(d, &st), 0);
	EXPECT_GT(st.cooled_ranges, 0u);
	printf("[ kill/2048 ] killed pid %d holding %zu QPNs (%zu in quarantine): %zu handed out "
	       "again, the first %" PRIu64 " ms after the kill (quarantine %" PRIu64
	       " ms); %" PRIu64 " ranges cooled\n",
	       int(pid), want.size(), h.released.size(), seen.size(), min_d / 1000000, q_us / 1000,
	       st.cooled_ranges);
	release_all(d, kept);
	mlx5_qpn_dev_close(d);
}
