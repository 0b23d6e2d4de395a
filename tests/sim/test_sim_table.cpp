/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's QPN table against the rules of the kernel's rdmavt alloc_qpn,
 * table-driven: each row is a configuration, the operations done, and the QPNs rdmavt gives.
 */
#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <set>
#include <vector>

#include "sim/sim_qpn_table.h"

using namespace mlx5_qpn_sim;

namespace {

constexpr uint32_t AIP_BASE = uint32_t(kAipPrefix) << kAipShift;

std::unique_ptr<QpnTable>
make_table(const QpnTableCfg &cfg)
{
	auto t = std::make_unique<QpnTable>(); /* 2 MiB: never on the stack */
	EXPECT_EQ(t->init(cfg), 0);
	return t;
}

QpnTableCfg
cfg_of(uint32_t start, uint32_t inc, uint32_t shift, uint32_t res_start = 0, uint32_t res_count = 0,
       bool special = false)
{
	QpnTableCfg c;
	c.qpn_start = start;
	c.qpn_inc = inc;
	c.qos_shift = shift;
	c.res_start = res_start;
	c.res_count = res_count;
	c.premark_special = special;
	return c;
}

struct SeqCase {
	const char *what;
	QpnTableCfg cfg;
	uint8_t prefix;
	std::vector<int> expect; /* successive alloc() results */
};

class SimTableSeq : public ::testing::TestWithParam<SeqCase> {};

TEST_P(SimTableSeq, FollowsRdmavt)
{
	const SeqCase &c = GetParam();
	auto t = make_table(c.cfg);
	for (size_t i = 0; i < c.expect.size(); i++)
		EXPECT_EQ(t->alloc(QpType::ORDINARY, 1, c.prefix), c.expect[i])
			<< c.what << ": allocation #" << i;
}

const int AB = int(AIP_BASE);
constexpr uint32_t kMcast = 0xffffff; /* the multicast QPN */

INSTANTIATE_TEST_SUITE_P(
	SimRules, SimTableSeq,
	::testing::Values(
		/* The first QPN is qpn_start + incr, then next available after the last. */
		SeqCase{"start 0 stride 1", cfg_of(0, 1, 0), 0, {1, 2, 3, 4}},
		SeqCase{"start 5", cfg_of(5, 1, 0), 0, {6, 7, 8, 9}},
		/* incr = qpn_inc << qos_shift */
		SeqCase{"qos_shift 1", cfg_of(0, 1, 1), 0, {2, 4, 6, 8}},
		SeqCase{"qos_shift 2", cfg_of(0, 1, 2), 0, {4, 8, 12, 16}},
		SeqCase{"qpn_inc 3", cfg_of(0, 3, 0), 0, {3, 6, 9, 12}},
		SeqCase{"qpn_inc 2 qos_shift 1", cfg_of(0, 2, 1), 0, {4, 8, 12}},
		/* The driver-reserved range is pre-marked used and skipped. */
		SeqCase{"reserved range", cfg_of(0, 1, 0, 4, 4), 0, {1, 2, 3, 8, 9}},
		/* QP0/QP1 pre-marked: never ordinary QPNs. */
		SeqCase{"special pre-marked", cfg_of(0, 1, 0, 0, 0, true), 0, {2, 3, 4}},
		/* Wrap at the top: restart at incr with bit 0 flipped. 0xFFFFFF (multicast) is
		 * never available, so the scan wraps past it. */
		SeqCase{"wrap stride 1", cfg_of(0xfffffd, 1, 0), 0, {0xfffffe, 1, 2}},
		SeqCase{"wrap even->odd", cfg_of(0xfffffa, 1, 1), 0, {0xfffffc, 0xfffffe, 3, 5}},
		SeqCase{"wrap odd->even", cfg_of(0xfffffb, 1, 1), 0, {0xfffffd, 2, 4}},
		/* A scan that runs off a page continues on the next one at incr | bit 0. */
		SeqCase{"page walk stride 1",
			cfg_of(32758, 1, 0, 32760, 8),
			0,
			{32759, 32769, 32770}},
		SeqCase{"page walk stride 2",
			cfg_of(32748, 1, 1, 32752, 16),
			0,
			{32750, 32770, 32772}},
		/* The cursor itself may land on offset 0 of a page. */
		SeqCase{"cursor at page start", cfg_of(32766, 1, 0), 0, {32767, 32768, 32769}},
		/* AIP prefix: 16 bits OR-ed with 0x81 << 16, wrap at 2^16. */
		SeqCase{"aip", cfg_of(0, 1, 0), kAipPrefix, {AB | 1, AB | 2, AB | 3}},
		SeqCase{"aip wrap",
			cfg_of(0xfffa, 1, 1),
			kAipPrefix,
			{AB | 0xfffc, AB | 0xfffe, AB | 3, AB | 5}}),
	[](const ::testing::TestParamInfo<SeqCase> &info) {
		std::string s = info.param.what;
		for (auto &ch : s)
			if (!isalnum(static_cast<unsigned char>(ch)))
				ch = '_';
		return s;
	});

struct SpecialCase {
	QpType type;
	uint32_t port;
	int expect;
};

TEST(SimTable, SmiGsiOncePerPort)
{
	QpnTableCfg c = cfg_of(0, 1, 0);
	c.nb_ports = 2;
	auto t = make_table(c);
	const SpecialCase rows[] = {
		{QpType::SMI, 1, 0},       {QpType::GSI, 1, 1},       {QpType::SMI, 1, -EINVAL},
		{QpType::GSI, 1, -EINVAL}, {QpType::GSI, 2, 1},       {QpType::SMI, 2, 0},
		{QpType::SMI, 2, -EINVAL}, {QpType::SMI, 3, -EINVAL}, {QpType::GSI, 0, -EINVAL},
	};
	for (const auto &r : rows)
		EXPECT_EQ(t->alloc(r.type, r.port, 0), r.expect)
			<< "type " << int(r.type) << " port " << r.port;
	EXPECT_EQ(t->special_flags(), 0xfu); /* bit (type + 2 * (port - 1)) */
	/* Special QPs do not touch the bitmap or the cursor. */
	EXPECT_EQ(t->used(), 0u);
	EXPECT_EQ(t->alloc(QpType::ORDINARY, 1, 0), 1);
}

TEST(SimTable, NextAvailableAfterLastNotLowestFree)
{
	auto t = make_table(cfg_of(0, 1, 0));
	for (int q = 1; q <= 5; q++)
		ASSERT_EQ(t->alloc(QpType::ORDINARY, 1, 0), q);
	EXPECT_EQ(t->free(2, 0), 0);
	EXPECT_EQ(t->alloc(QpType::ORDINARY, 1, 0), 6);
	EXPECT_EQ(t->last(), 6u);
}

TEST(SimTable, AipExhaustionThenFreeReuse)
{
	auto t = make_table(cfg_of(0, 1, 0));
	std::set<int> got;
	int q;
	while ((q = t->alloc(QpType::ORDINARY, 1, kAipPrefix)) >= 0) {
		ASSERT_EQ(uint32_t(q) >> kAipShift, kAipPrefix);
		ASSERT_TRUE(got.insert(q).second) << "duplicate " << q;
		ASSERT_LT(got.size(), size_t(kAipSpace));
	}
	EXPECT_EQ(q, -ENOMEM);
	/* Each allocation steps straight from the cursor (so 32768 is reached from 32767), and
	 * only a wrap restarts at incr | bit 0: QPN 0 stays unreachable. */
	EXPECT_EQ(got.size(), size_t(kAipSpace - 1));
	EXPECT_EQ(got.count(AB), 0u);
	/* The 16-bit space is full; the 24-bit space is not. */
	int wide = t->alloc(QpType::ORDINARY, 1, 0);
	EXPECT_GT(wide, 0xffff);
	/* Free one in the middle: the next AIP allocation finds exactly it. */
	EXPECT_EQ(t->free(AIP_BASE | 12345, kAipPrefix), 0);
	EXPECT_EQ(t->alloc(QpType::ORDINARY, 1, kAipPrefix), AB | 12345);
	EXPECT_EQ(t->alloc(QpType::ORDINARY, 1, kAipPrefix), -ENOMEM);
}

TEST(SimTable, StrideExhaustsBothParities)
{
	/* With qos_shift 1 one parity is walked first; the allocation must still find the other
	 * before it reports -ENOMEM. */
	auto t = make_table(cfg_of(0, 1, 1));
	std::set<int> got;
	int q;
	while ((q = t->alloc(QpType::ORDINARY, 1, kAipPrefix)) >= 0)
		ASSERT_TRUE(got.insert(q).second);
	EXPECT_EQ(q, -ENOMEM);
	size_t odd = 0;
	for (int v : got)
		odd += v & 1;
	EXPECT_GT(odd, 0u);
	EXPECT_GT(got.size() - odd, 0u);
}

TEST(SimTable, FreeErrors)
{
	auto t = make_table(cfg_of(0, 1, 0, 100, 10, true));
	int q = t->alloc(QpType::ORDINARY, 1, 0);
	ASSERT_EQ(q, 2);
	EXPECT_EQ(t->free(3, 0), -EINVAL);          /* never allocated */
	EXPECT_EQ(t->free(105, 0), -EINVAL);        /* driver-reserved */
	EXPECT_EQ(t->free(1, 0), -EINVAL);          /* special */
	EXPECT_EQ(t->free(kQpnSpace, 0), -EINVAL);  /* out of the space */
	EXPECT_EQ(t->free(2, kAipPrefix), -EINVAL); /* no prefix */
	EXPECT_EQ(t->free(2, 0), 0);
	EXPECT_EQ(t->free(2, 0), -EINVAL); /* double free */
}

TEST(SimTable, InitRejectsBadConfig)
{
	auto t = std::make_unique<QpnTable>();
	EXPECT_EQ(t->init(cfg_of(0, 0, 0)), -EINVAL);
	EXPECT_EQ(t->init(cfg_of(0, 1, 16)), -EINVAL);
	EXPECT_EQ(t->init(cfg_of(kQpnSpace, 1, 0)), -EINVAL);
	EXPECT_EQ(t->init(cfg_of(0, 1, 0, kQpnSpace - 4, 5)), -EINVAL);
	QpnTableCfg c = cfg_of(0, 1, 0);
	c.nb_ports = 5;
	EXPECT_EQ(t->init(c), -EINVAL);
	c.nb_ports = 0;
	EXPECT_EQ(t->init(c), -EINVAL);
}

TEST(SimTable, BlocksAlignedAfterCursorAndDisjoint)
{
	auto t = make_table(cfg_of(0, 1, 0, 0, 0, true));
	for (int q = 2; q <= 5; q++)
		ASSERT_EQ(t->alloc(QpType::ORDINARY, 1, 0), q);
	EXPECT_EQ(t->reserve_block(3, 0), 8);            /* align_up(last + 1, 8) */
	EXPECT_EQ(t->alloc(QpType::ORDINARY, 1, 0), 16); /* ordinary QPs continue after it */
	EXPECT_EQ(t->reserve_block(10, 0), 1024);
	EXPECT_EQ(t->alloc(QpType::ORDINARY, 1, 0), 2048);
	for (uint32_t g = 0; g <= 12; g++) {
		int b = t->reserve_block(g, 0);
		ASSERT_GE(b, 0);
		EXPECT_EQ(uint32_t(b) & ((1u << g) - 1), 0u) << "g " << g;
		for (uint32_t i = 0; i < (1u << g); i++)
			ASSERT_TRUE(t->test(uint32_t(b) + i, 0));
	}
	EXPECT_EQ(t->reserve_block(25, 0), -EINVAL);
	EXPECT_EQ(t->reserve_block(17, kAipPrefix), -EINVAL);
	EXPECT_EQ(t->free_block(8, 3, 0), 0);
	EXPECT_EQ(t->free_block(8, 3, 0), -EINVAL);    /* double free */
	EXPECT_EQ(t->free_block(1024, 3, 0), 0);       /* part of a bigger block: bits are set */
	EXPECT_EQ(t->free_block(1028, 2, 0), -EINVAL); /* misaligned */
}

TEST(SimTable, BlocksFillSpaceThenEnomemAndWrap)
{
	auto t = make_table(cfg_of(0, 1, 0, 0, 0, true));
	std::vector<int> blocks;
	int b;
	while ((b = t->reserve_block(12, kAipPrefix)) >= 0)
		blocks.push_back(b);
	EXPECT_EQ(b, -ENOMEM);
	/* 16 blocks of 4096 in 2^16; block 0 holds QP0/QP1. */
	ASSERT_EQ(blocks.size(), 15u);
	EXPECT_EQ(blocks.front(), AB | 0x1000);
	EXPECT_EQ(t->free_block(uint32_t(blocks[3]), 12, kAipPrefix), 0);
	/* The search wraps from the cursor (at the top) to the freed block. */
	EXPECT_EQ(t->reserve_block(12, kAipPrefix), blocks[3]);
}

/* 0xFFFFFF is the multicast QPN: the hardware never hands it out, for ordinary QPs or in a
 * RESERVED_QPN range, and neither does the emulated device. */
TEST(SimTable, MulticastQpnNeverAvailable)
{
	/* Everything but the top four QPNs pre-reserved: exhaust what is left. */
	auto t = make_table(cfg_of(0, 1, 0, 0, kMcast - 3));
	EXPECT_EQ(t->used(), kMcast - 3) << "the multicast QPN is not counted as used";
	std::set<int> got;
	int q;
	while ((q = t->alloc(QpType::ORDINARY, 1, 0)) >= 0)
		ASSERT_TRUE(got.insert(q).second);
	EXPECT_EQ(q, -ENOMEM);
	EXPECT_EQ(got, (std::set<int>{0xfffffc, 0xfffffd, 0xfffffe}));
	EXPECT_TRUE(t->test(kMcast, 0));
	EXPECT_EQ(t->free(kMcast, 0), -EINVAL) << "it was never handed out";

	/* A stride landing on it steps over it. */
	auto s2 = make_table(cfg_of(0xfffffb, 1, 1));
	EXPECT_EQ(s2->alloc(QpType::ORDINARY, 1, 0), 0xfffffd);
	EXPECT_NE(s2->alloc(QpType::ORDINARY, 1, 0), 0xffffff);
}

TEST(SimTable, MulticastQpnInNoReservedBlock)
{
	auto t = make_table(cfg_of(0, 1, 0));
	EXPECT_EQ(t->reserve_block(24, 0), -ENOMEM) << "the whole space includes 0xFFFFFF";
	/* Fill the space with 2^20 blocks: the top one holds 0xFFFFFF and is never given. */
	std::vector<int> blocks;
	int b;
	while ((b = t->reserve_block(20, 0)) >= 0)
		blocks.push_back(b);
	EXPECT_EQ(b, -ENOMEM);
	EXPECT_EQ(blocks.size(), 15u);
	for (int x : blocks)
		EXPECT_FALSE(uint32_t(x) <= kMcast && kMcast < uint32_t(x) + (1u << 20)) << x;
	/* Small blocks up to the top: the last aligned block below it is fine, its own is not. */
	auto u = make_table(cfg_of(0, 1, 0, 0, 0xfffff0));
	std::vector<int> small;
	while ((b = u->reserve_block(2, 0)) >= 0)
		small.push_back(b);
	EXPECT_EQ(small, (std::vector<int>{0xfffff0, 0xfffff4, 0xfffff8}));
	EXPECT_EQ(u->reserve_block(0, 0), 0xfffffc);
	EXPECT_EQ(u->reserve_block(0, 0), 0xfffffd);
	EXPECT_EQ(u->reserve_block(0, 0), 0xfffffe);
	EXPECT_EQ(u->reserve_block(0, 0), -ENOMEM);
	EXPECT_EQ(u->free_block(0xfffffc, 2, 0), -EINVAL) << "a block naming it is refused";
}

} // namespace
