/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hardware DC path within the device's limits (the strict fake, hw_fake_glue.h): the DCI's
 * inline size from the firmware's max_wqe_sz_sq_dc, and RLIMIT_MEMLOCK checked before each DC
 * object is made.
 */
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "hw/mlx5_qpn_hw_sizing.h"
#include "hw_dc_fixture.h"

using hwdc::Dev;
using hwfake::fake;

TEST(HwDcLimits, InlineSizeAsLibmlx5CountsTheWqe)
{
	EXPECT_EQ(mlx5_qpn_hw_dc_max_inline(0, 256), 256u); /* unread: the driver's own bound */
	EXPECT_EQ(mlx5_qpn_hw_dc_max_inline(512, 256), 256u);
	EXPECT_EQ(mlx5_qpn_hw_dc_max_inline(336, 256), 252u); /* 320 usable: 64 + 4 + 252 */
	EXPECT_EQ(mlx5_qpn_hw_dc_max_inline(256, 256), 188u);
	EXPECT_EQ(mlx5_qpn_hw_dc_max_inline(127, 256), 0u); /* one BB holds no inline byte */
	EXPECT_EQ(mlx5_qpn_hw_dc_max_inline(64, 256), 0u);
}

TEST(HwDcLimits, DciInlineFollowsTheFirmwaresMaxWqeSize)
{
	Dev d(false, 256);
	ASSERT_EQ(d.make(nullptr, nullptr, false), 0) << d.cap.text();
	EXPECT_EQ(mlx5_qpn_dci_max_inline(d.dci), 188u);
	ASSERT_FALSE(fake().dv_qps.empty());
	bool found = false;
	for (const auto &q : fake().dv_qps)
		if (q.dc_type == MLX5DV_DCTYPE_DCI) {
			EXPECT_EQ(q.max_inline, 188u);
			/* libmlx5's WQE: 240 + (4 + 188 -> 192) = 432 -> 448 bytes, a slot of 8 BBs
			 * a WR, 2^6 BBs asked for log_sq_depth 3. */
			EXPECT_EQ(q.max_send_wr, 8u);
			found = true;
		}
	EXPECT_TRUE(found);
	uint8_t buf[MLX5_QPN_DC_MAX_INLINE] = {};
	EXPECT_EQ(mlx5_qpn_dci_post_send(d.dci, d.ah, d.dctn, hwdc::KEY, buf, 189, 1), -EINVAL);
	ASSERT_EQ(mlx5_qpn_dci_post_send(d.dci, d.ah, d.dctn, hwdc::KEY, buf, 188, 2), 0);
	mlx5_qpn_dci_ring(d.dci);
	auto wc = d.run(1);
	ASSERT_EQ(wc.size(), 1u);
	EXPECT_EQ(wc[0].syndrome, 0);
	EXPECT_EQ(wc[0].wr_id, 2u);
}

TEST(HwDcLimits, FirmwareWithoutRoomForInlineIsOneLine)
{
	Dev d(false, 127);
	hwtest::LogCapture cap; /* after the open's own line */
	mlx5_qpn_dci *dci = nullptr;
	EXPECT_EQ(mlx5_qpn_dci_create_cq_path(d.cq, 3, nullptr, &dci), -ENOTSUP);
	EXPECT_EQ(dci, nullptr);
	std::string log = cap.text();
	EXPECT_NE(log.find("max_wqe_sz_sq_dc 127 bytes"), std::string::npos) << log;
	EXPECT_EQ(hwtest::count_lines(log), 1u) << log;
}

TEST(HwDcLimits, DcObjectsBeyondRlimitMemlockAreOneLineNamingTheLimit)
{
	Dev d(false);
	ASSERT_NE(d.cq, nullptr);
	mlx5_qpn_cq *big = nullptr; /* a CQ that takes the DCI's 4096 WQEs */
	ASSERT_EQ(mlx5_qpn_cq_create_be(d.be, 12, &big), 0);
	const int srqs = fake().srqs_live, mrs = fake().mrs_live, qps = fake().qps_live;
	std::string log;
	hwtest::LogCapture cap; /* after the open's own line */
	{
		hwfake::MemlockLimit low(16 * 1024);
		if (!low.ok())
			GTEST_SKIP() << "cannot lower RLIMIT_MEMLOCK and drop CAP_IPC_LOCK here";
		mlx5_qpn_dct *dct = nullptr;
		mlx5_qpn_dci *dci = nullptr;
		EXPECT_EQ(mlx5_qpn_dct_create_cq_path(d.cq, hwdc::KEY, nullptr, &dct), -ENOMEM);
		EXPECT_EQ(mlx5_qpn_dci_create_cq_path(big, 12, nullptr, &dci), -ENOMEM);
		log = cap.text();
	}
	mlx5_qpn_cq_destroy(big);
	/* Nothing was made: the check comes before the first verbs call. */
	EXPECT_EQ(fake().srqs_live, srqs);
	EXPECT_EQ(fake().mrs_live, mrs);
	EXPECT_EQ(fake().qps_live, qps);
	EXPECT_EQ(hwtest::count_lines(log), 2u) << log;
	EXPECT_NE(log.find("RLIMIT_MEMLOCK"), std::string::npos) << log;
	EXPECT_NE(log.find("a DCT's SRQ and receive buffers"), std::string::npos) << log;
	EXPECT_NE(log.find("a DCI's send queue"), std::string::npos) << log;
}
