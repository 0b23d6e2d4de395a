/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The soak's checker, on logs written by hand: it must catch every kind of violation it claims
 * to judge, and must not report a legal history.
 */
#include <gtest/gtest.h>

#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "soak_check.h"

using namespace soak;

namespace {

constexpr uint64_t Q = 1000; /* quarantine, in the logs' ns */

Life
life(std::vector<Rec> recs, uint64_t kill = 0)
{
	Life l;
	l.recs = std::move(recs);
	l.kill_ns = kill;
	return l;
}

} /* namespace */

TEST(SoakCheck, LegalHistoryIsClean)
{
	/* A frees 7 at 100; B gets it at 1100 (exactly the quarantine later). */
	std::vector<Life> lives = {life({{kAllocEnd, 7, 10}, {kFreeBegin, 7, 100}}),
				   life({{kAllocEnd, 7, 1100}, {kFreeBegin, 7, 1200}})};
	Report r = check(lives, Q);
	EXPECT_TRUE(r.violations.empty());
	EXPECT_EQ(r.allocs, 2u);
	EXPECT_EQ(r.frees, 2u);
	EXPECT_EQ(r.holds_judged, 1u);
}

TEST(SoakCheck, CatchesTwoLiveHolders)
{
	std::vector<Life> lives = {life({{kAllocEnd, 7, 10}, {kFreeBegin, 7, 500}}),
				   life({{kAllocEnd, 7, 200}})};
	Report r = check(lives, Q);
	ASSERT_EQ(r.violations.size(), 1u);
	EXPECT_TRUE(r.violations[0].overlap);
	EXPECT_EQ(r.violations[0].qpn, 7u);
}

TEST(SoakCheck, CatchesAHandOutInsideTheQuarantine)
{
	std::vector<Life> lives = {life({{kAllocEnd, 9, 10}, {kFreeBegin, 9, 100}}),
				   life({{kAllocEnd, 9, 1099}})};
	Report r = check(lives, Q);
	ASSERT_EQ(r.violations.size(), 1u);
	EXPECT_FALSE(r.violations[0].overlap);
}

TEST(SoakCheck, AKilledHolderLetsGoAtItsKill)
{
	/* Held at the kill (t = 500): not before 1500. */
	std::vector<Life> early = {life({{kAllocEnd, 3, 10}}, 500), life({{kAllocEnd, 3, 1400}})};
	EXPECT_EQ(check(early, Q).violations.size(), 1u);
	std::vector<Life> late = {life({{kAllocEnd, 3, 10}}, 500), life({{kAllocEnd, 3, 1600}})};
	Report r = check(late, Q);
	EXPECT_TRUE(r.violations.empty());
	EXPECT_EQ(r.kills, 1u);
	EXPECT_EQ(r.reclaimed, 1u);
	EXPECT_EQ(r.min_reclaim_delay_ns, 1100u);
}

TEST(SoakCheck, QuarantinedAtAKillCountsAsReclaimed)
{
	std::vector<Life> lives = {life({{kAllocEnd, 4, 10}, {kFreeBegin, 4, 400}}, 500),
				   life({{kAllocEnd, 4, 1450}})};
	Report r = check(lives, Q);
	EXPECT_TRUE(r.violations.empty()); /* 1450 >= 400 + 1000 */
	EXPECT_EQ(r.reclaimed, 1u);
	EXPECT_EQ(r.min_reclaim_delay_ns, UINT64_MAX) << "only QPNs held at the kill set the delay";
}

TEST(SoakCheck, HeldAtCloseLetsGoAtTheClose)
{
	std::vector<Life> lives = {life({{kAllocEnd, 5, 10}, {kCloseBegin, 0, 300}}),
				   life({{kAllocEnd, 5, 1200}})};
	EXPECT_EQ(check(lives, Q).violations.size(), 1u);
	lives[1].recs[0].t_ns = 1300;
	EXPECT_TRUE(check(lives, Q).violations.empty());
}

TEST(SoakCheck, ATornTailIsDropped)
{
	std::string path = "/tmp/qpn_soakcheck_" + std::to_string(getpid());
	int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ASSERT_GE(fd, 0);
	Rec r[2] = {{kAllocEnd, 1, 5}, {kFreeBegin, 1, 6}};
	ASSERT_EQ(write(fd, r, sizeof(r)), ssize_t(sizeof(r)));
	ASSERT_EQ(write(fd, r, 7), 7); /* killed mid-record */
	close(fd);
	auto recs = read_log(path);
	unlink(path.c_str());
	ASSERT_EQ(recs.size(), 2u);
	EXPECT_EQ(recs[1].op, uint32_t(kFreeBegin));
}

/* Per death, the time to the first hand-out of any of its QPNs by another process. */
TEST(SoakCheck, ReturnDelayPerKilledLife)
{
	std::vector<Life> lives =
		{life({{kAllocEnd, 3, 10}, {kAllocEnd, 4, 20}}, 500),  /* killed at 500 */
		 life({{kAllocEnd, 4, 1700}, {kAllocEnd, 3, 1600}}),   /* 3 back first, at 1600 */
		 life({{kAllocEnd, 8, 10}}, 600),                      /* killed, never back */
		 life({{kAllocEnd, 9, 10}, {kFreeBegin, 9, 20}}, 700), /* quarantined at the kill */
		 life({{kAllocEnd, 9, 2000}})};
	Report r = check(lives, Q);
	EXPECT_TRUE(r.violations.empty());
	ASSERT_EQ(r.return_delays_ns.size(), 2u);
	EXPECT_EQ(r.return_delays_ns[0], 1100u);
	EXPECT_EQ(r.return_delays_ns[1], 1300u);
}
