/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DPDK multi-process: a primary and secondaries (qpn_mp_proc, fork + exec, one DPDK instance per
 * test: its own --file-prefix and its own emulated device) share one device and pool. The tests
 * need hugepages (DPDK secondaries cannot attach to --no-huge memory): as root they reserve and
 * mount them, otherwise they skip and say why.
 */
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "mlx5_qpn_pool.h"
#include "mp_test_util.h"
#include "mlx5_qpn.h"

using namespace mp_test;

namespace {

/* Concatenation by append: g++ 12 at -O3 warns (-Wrestrict, a false positive) on some
 * `"literal" + std::string` expressions. */
template <typename... T>
std::string
cat(const T &...parts)
{
	std::string s;
	(s.append(parts), ...);
	return s;
}

struct Stats {
	uint64_t capacity = 0, in_use = 0, in_quarantine = 0, free = 0;
	uint64_t grow_requests = 0, ipc_grows = 0, dead_reclaimed = 0, ranges_reserved = 0;
	int secondary = -1;
	bool ok = false;
};

Stats
parse_stats(const std::string &r)
{
	Stats s;
	std::istringstream is(r);
	std::string tag;
	is >> tag >> s.capacity >> s.in_use >> s.in_quarantine >> s.free >> s.grow_requests >>
		s.ipc_grows >> s.dead_reclaimed >> s.ranges_reserved >> s.secondary;
	s.ok = tag == "STATS" && !is.fail();
	return s;
}

class MpTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		std::string why = hugepages_ready();
		if (!why.empty())
			GTEST_SKIP() << why;
		helper_ = helper_path();
		ASSERT_EQ(access(helper_.c_str(), X_OK), 0)
			<< "qpn_mp_proc not built at " << helper_;
		static unsigned n;
		id_ = cat(std::to_string(getpid()), "_", std::to_string(n++));
		prefix_ = cat("qpn_mp_", id_);
		dev_ = cat("simmp", id_);
	}

	void TearDown() override
	{
		procs_.clear(); /* kills what is left */
		if (!prefix_.empty()) {
			remove_instance(prefix_);
			mlx5_qpn_dev_purge(dev_.c_str());
			for (auto &l : logs_)
				std::remove(l.c_str());
		}
	}

	std::string log_path(const std::string &who)
	{
		std::string p = cat(::testing::TempDir(), "qpn_mp_", id_, "_", who, ".log");
		std::remove(p.c_str());
		logs_.push_back(p);
		return p;
	}

	/* Start a helper: primary on lcore 0, secondaries on lcore 1 of this instance. */
	Proc *spawn(bool secondary, const std::string &devargs, const std::string &log = "",
		    uint64_t seed = 1)
	{
		std::vector<std::string> av = {helper_,
					       "-l",
					       secondary ? "1" : "0",
					       "--no-pci",
					       cat("--file-prefix=", prefix_),
					       "--log-level=lib.eal:error"};
		av.push_back(secondary ? "--proc-type=secondary" : kPrimaryBaseVa);
		av.push_back("--");
		av.push_back(cat("--dev=", devargs));
		av.push_back(cat("--seed=", std::to_string(seed)));
		if (!log.empty())
			av.push_back(cat("--log=", log));
		procs_.push_back(std::make_unique<Proc>());
		Proc *p = procs_.back().get();
		if (!p->start(av))
			return nullptr;
		return p;
	}

	/* A primary that answered READY. */
	Proc *primary(const std::string &keys, const std::string &log = "")
	{
		Proc *p = spawn(false, cat(dev_, keys), log);
		if (p == nullptr)
			return nullptr;
		std::string r = p->reply();
		if (r.rfind("READY", 0) != 0) {
			ADD_FAILURE() << "primary did not start: " << r << "\n" << p->output();
			return nullptr;
		}
		return p;
	}

	Proc *secondary(const std::string &keys, const std::string &log = "", uint64_t seed = 1)
	{
		Proc *p = spawn(true, cat(dev_, keys), log, seed);
		if (p == nullptr)
			return nullptr;
		std::string r = p->reply();
		if (r.rfind("READY", 0) != 0) {
			ADD_FAILURE() << "secondary did not attach: " << r << "\n" << p->output();
			return nullptr;
		}
		return p;
	}

	std::string helper_, id_, prefix_, dev_;
	std::vector<std::unique_ptr<Proc>> procs_;
	std::vector<std::string> logs_;
};

constexpr uint64_t kQuarantineUs = 100000;
const std::string kQ = cat(",quarantine_us=", std::to_string(kQuarantineUs));

/* (1) A secondary attaches and allocates from the primary's pool: no QPN is held twice across
 * the two processes (checked from both logs), and the secondary reserved nothing itself. */
TEST_F(MpTest, MpSecondaryAllocatesFromPrimaryPool)
{
	std::string lp = log_path("p"), ls = log_path("s");
	Proc *p = primary(cat(kQ, ",log_range=6,cache=8"), lp);
	ASSERT_NE(p, nullptr);
	Proc *s = secondary("", ls);
	ASSERT_NE(s, nullptr);
	for (int round = 0; round < 5; round++) {
		EXPECT_EQ(p->cmd("alloc 100"), "OK 100 0");
		EXPECT_EQ(s->cmd("alloc 100"), "OK 100 0");
		EXPECT_EQ(p->cmd("free 60"), "OK 60");
		EXPECT_EQ(s->cmd("free 60"), "OK 60");
	}
	Stats ss = parse_stats(s->cmd("stats"));
	Stats ps = parse_stats(p->cmd("stats"));
	ASSERT_TRUE(ss.ok && ps.ok);
	EXPECT_EQ(ss.secondary, 1);
	EXPECT_EQ(ps.secondary, 0);
	EXPECT_EQ(ss.ranges_reserved, 0u) << "a secondary must never reserve ranges";
	EXPECT_EQ(ss.capacity, ps.capacity) << "one pool";
	EXPECT_EQ(ps.in_use, 400u) << "both processes' holdings are in the one pool";
	EXPECT_EQ(s->cmd("quit"), "");
	EXPECT_EQ(s->wait(), 0) << s->output();
	EXPECT_EQ(p->cmd("quit"), "");
	EXPECT_EQ(p->wait(), 0) << p->output();
	CheckResult c = check_logs({{lp, 0}, {ls, 0}}, kQuarantineUs * 1000);
	EXPECT_EQ(c.allocs, 1000u);
	EXPECT_EQ(c.violations, 0u) << c.first;
}

/* (2) A secondary whose pool runs dry makes the primary grow it (IPC); the primary's control
 * thread does not reserve ahead here (low_water=0), so every range past the first is the answer
 * to a secondary's request. */
TEST_F(MpTest, MpSecondaryDryPoolMakesPrimaryGrow)
{
	Proc *p = primary(cat(kQ, ",log_range=4,low_water=0,cache=4,max_qpns=4096"));
	ASSERT_NE(p, nullptr);
	Stats p0 = parse_stats(p->cmd("stats"));
	ASSERT_TRUE(p0.ok);
	EXPECT_EQ(p0.capacity, 16u);
	Proc *s = secondary("");
	ASSERT_NE(s, nullptr);
	EXPECT_EQ(s->cmd("alloc 200"), "OK 200 0") << s->output();
	Stats ss = parse_stats(s->cmd("stats"));
	Stats ps = parse_stats(p->cmd("stats"));
	ASSERT_TRUE(ss.ok && ps.ok);
	EXPECT_GE(ps.capacity, 208u);
	EXPECT_GE(ps.ipc_grows, 12u);
	EXPECT_EQ(ps.ranges_reserved, 1 + ps.ipc_grows) << "only the primary reserves";
	EXPECT_GE(ss.grow_requests, ps.ipc_grows);
	EXPECT_EQ(ss.ranges_reserved, 0u);
	/* An explicit grow from the secondary is the primary's grow too. */
	EXPECT_EQ(s->cmd("grow"), "RC 0");
	Stats ps2 = parse_stats(p->cmd("stats"));
	EXPECT_EQ(ps2.capacity, ps.capacity + 16);
	EXPECT_EQ(s->cmd("quit"), "");
	EXPECT_EQ(s->wait(), 0);
	EXPECT_EQ(p->cmd("quit"), "");
	EXPECT_EQ(p->wait(), 0);
}

/* (3a) A secondary that asks for other settings than the primary's device has is refused in one
 * line naming the devarg; the bare name and agreeing keys attach. */
TEST_F(MpTest, MpSecondaryConflictingDevargsRefused)
{
	Proc *p = primary(cat(kQ, ",log_range=4"));
	ASSERT_NE(p, nullptr);
	Proc *bad = spawn(true, cat(dev_, ",log_range=5"));
	ASSERT_NE(bad, nullptr);
	EXPECT_EQ(bad->reply(), "PROBE -22");
	EXPECT_EQ(bad->wait(), 1);
	EXPECT_NE(bad->output().find("devarg log_range=5 differs from the primary's device"),
		  std::string::npos)
		<< bad->output();
	Proc *bad2 = spawn(true, cat(dev_, ",quarantine_us=5"));
	ASSERT_NE(bad2, nullptr);
	EXPECT_EQ(bad2->reply(), "PROBE -22");
	EXPECT_EQ(bad2->wait(), 1);
	/* Agreeing keys, including one the primary left at its default. */
	Proc *ok = secondary(cat(",log_range=4,cache=64", kQ));
	ASSERT_NE(ok, nullptr);
	EXPECT_EQ(ok->cmd("quit"), "");
	EXPECT_EQ(ok->wait(), 0);
	Proc *bare = secondary("");
	ASSERT_NE(bare, nullptr);
	EXPECT_EQ(bare->cmd("quit"), "");
	EXPECT_EQ(bare->wait(), 0);
	EXPECT_EQ(p->cmd("quit"), "");
	EXPECT_EQ(p->wait(), 0);
}

/* (3b) A secondary probing a device no primary probed: a clear error and a non-zero exit. */
TEST_F(MpTest, MpSecondaryWithoutPrimaryDeviceRefused)
{
	Proc *p = primary(kQ);
	ASSERT_NE(p, nullptr);
	Proc *s = spawn(true, cat(dev_, "x")); /* another device name */
	ASSERT_NE(s, nullptr);
	EXPECT_EQ(s->reply(), "PROBE -19");
	EXPECT_EQ(s->wait(), 1);
	EXPECT_NE(s->output().find("no primary process has probed this device"), std::string::npos)
		<< s->output();
	mlx5_qpn_dev_purge(cat(dev_, "x").c_str());
	EXPECT_EQ(p->cmd("quit"), "");
	EXPECT_EQ(p->wait(), 0);
}

/* (4) The primary is SIGKILLed: the secondary's next slow-path calls fail with -ENODEV and one
 * clear line, nothing hangs, and a secondary started afterwards is refused. */
TEST_F(MpTest, MpPrimaryKilledSecondaryFailsClearly)
{
	Proc *p = primary(cat(kQ, ",log_range=4,low_water=0,max_qpns=16"));
	ASSERT_NE(p, nullptr);
	Proc *s = secondary("");
	ASSERT_NE(s, nullptr);
	EXPECT_EQ(s->cmd("alloc 16"), "OK 16 0"); /* the pool is dry now */
	p->kill9();
	p->wait();
	EXPECT_EQ(s->cmd("grow"), "RC -19");
	EXPECT_EQ(s->cmd("alloc 4"), "OK 0 -19");
	EXPECT_EQ(s->cmd("quit"), "");
	EXPECT_EQ(s->wait(), 0);
	EXPECT_NE(s->output().find("is gone: this secondary gets no more QPNs from the device"),
		  std::string::npos)
		<< s->output();
	Proc *late = spawn(true, dev_);
	ASSERT_NE(late, nullptr);
	std::string r = late->reply();
	EXPECT_NE(r.rfind("READY", 0), 0u) << late->output();
	EXPECT_NE(late->wait(), 0) << late->output();
}

/*
 * (5) Secondaries are SIGKILLed at random times in a tight alloc/free loop (so mostly inside a
 * pool call, their cache marked busy) while the primary loops too. Afterwards, once the pool has
 * reclaimed the dead processes and the quarantine has passed, nothing is lost (the primary gets
 * every QPN of the pool again, and the pool did not have to grow for it) and, from the logs, no QPN a dead secondary held or released was handed out before the
 * quarantine had passed since it was let go (for a held one: since the kill, a lower bound of
 * the time the death was noticed).
 */
TEST_F(MpTest, MpSecondaryKilledMidCallIsReclaimed)
{
	std::string lp = log_path("p");
	/* A pool that a tight loop does not drain through a 50 ms quarantine; low_water=0: the
	 * control thread never reserves ahead of need, so a growth below can only be an allocation
	 * that found the pool empty (with the default mark it reserves a range whenever the
	 * final "alloc capacity" empties the pool, and under load it does so before "stats"). */
	const uint64_t q_us = 50000;
	Proc *p = primary(cat(",quarantine_us=", std::to_string(q_us),
			      ",log_range=9,max_qpns=8192,cache=8,low_water=0"),
			  lp);
	ASSERT_NE(p, nullptr);
	EXPECT_EQ(p->cmd("loop 32"), "OK");
	std::vector<LogSpec> logs = {{lp, 0}};
	std::mt19937 rng{static_cast<unsigned>(getpid())};
	for (int round = 0; round < 5; round++) {
		std::string ls = log_path(cat("s", std::to_string(round)));
		Proc *s = secondary("", ls, uint64_t(round) + 7);
		ASSERT_NE(s, nullptr);
		EXPECT_EQ(s->cmd("loop 48"), "OK");
		usleep(20000 + rng() % 150000);
		uint64_t t = now_ns();
		s->kill9();
		EXPECT_EQ(s->wait(), -9);
		logs.push_back({ls, t});
	}
	std::string held = p->cmd("stop", 20000);
	if (held.empty()) {
		/* The primary's loop did not stop: e.g. a thread exit waiting forever for a secondary
		 * that died inside Pool::steal() holding that thread's cache (fixed: the owner drops a
		 * dead thief's chains and the next reclaim sweeps them). */
		p->kill9();
		p->wait();
		FAIL() << "the primary hung after its secondaries were killed";
	}
	ASSERT_EQ(held.rfind("OK", 0), 0u) << held;
	EXPECT_EQ(p->cmd("free 0").rfind("OK", 0), 0u);
	Stats st = parse_stats(p->cmd("settle 20000"));
	ASSERT_TRUE(st.ok);
	/* Nothing lost: the pool hands every QPN out again without growing (a lost QPN would make
	 * it grow, or fall short at the device's limit). And the counters say so exactly: a process
	 * killed inside a pool call may have counted that call or not (a free killed between its
	 * count and its chain update was counted twice once, in_quarantine 1 in one of 25 runs under
	 * ASan), and the reclaim that takes its QPNs back sets them from its census of the slots. */
	const std::string all = p->cmd(cat("alloc ", std::to_string(st.capacity)));
	Stats after = parse_stats(p->cmd("stats"));
	ASSERT_TRUE(after.ok);
	EXPECT_EQ(all, cat("OK ", std::to_string(st.capacity), " 0"))
		<< "QPNs lost with the killed secondaries";
	EXPECT_EQ(after.capacity, st.capacity) << "the pool grew: QPNs were lost";
	EXPECT_EQ(after.in_use, after.capacity);
	EXPECT_EQ(after.in_quarantine, 0u);
	EXPECT_EQ(p->cmd("free 0").rfind("OK", 0), 0u);
	EXPECT_EQ(p->cmd("quit"), "");
	EXPECT_EQ(p->wait(), 0);
	CheckResult c = check_logs(logs, q_us * 1000);
	EXPECT_GT(c.allocs, 0u);
	EXPECT_EQ(c.violations, 0u) << c.first;
	EXPECT_GE(st.dead_reclaimed, 1u);
}

} /* namespace */

namespace {

/* The checker itself finds what it must: an early reuse after a release and after a kill, and
 * an overlap; and no false alarm on a correct history. (No hugepages needed.) */
TEST(MpChecker, MpCheckerFindsEarlyReuse)
{
	std::string a = cat(::testing::TempDir(), "qpn_mp_chk_a_", std::to_string(getpid()));
	std::string b = cat(::testing::TempDir(), "qpn_mp_chk_b_", std::to_string(getpid()));
	auto write = [](const std::string &path, const char *text) {
		FILE *f = fopen(path.c_str(), "w");
		ASSERT_NE(f, nullptr);
		fputs(text, f);
		fclose(f);
	};
	/* a: 5 held 100..200; 6 held from 100 when killed at 300. */
	write(a, "A 5 100\nf 5 200\nF 5 201 0\nA 6 100\n");
	write(b, "A 5 1200\nA 6 1400\nf 6 1500\nF 6 1501 0\nA 7 1\n");
	EXPECT_EQ(check_logs({{a, 300}, {b, 0}}, 1000).violations, 0u);
	EXPECT_EQ(check_logs({{a, 300}, {b, 0}}, 1001).violations, 1u); /* 5 at 1200 < 200 + 1001 */
	EXPECT_EQ(check_logs({{a, 300}, {b, 0}}, 1101).violations,
		  2u);                                             /* and 6 at 1400 < 300 + 1101 */
	EXPECT_EQ(check_logs({{a, 0}, {b, 0}}, 0).violations, 1u); /* 6 still held by live a */
	std::remove(a.c_str());
	std::remove(b.c_str());
}

} /* namespace */
