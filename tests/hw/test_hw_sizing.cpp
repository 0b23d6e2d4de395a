/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hardware backend's decisions without a device: the object size requested and its
 * step-down, log_max_num_reserved_qpn = 0, the caps-2 gate, the QPN source for
 * reserved_qpn=try|yes|no, the firmware status mapping and the ordinary QP's arguments.
 */
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "hw/mlx5_qpn_hw_qp.h"
#include "hw/mlx5_qpn_hw_sizing.h"
#include "common/mlx5_qpn_prm.h"

namespace {

mlx5_qpn_caps
caps(uint8_t gran, uint8_t max_alloc, uint8_t max_num)
{
	mlx5_qpn_caps c{};
	c.log_reserved_qpn_granularity = gran;
	c.log_reserved_qpn_max_alloc = max_alloc;
	c.log_max_num_reserved_qpn = max_num;
	return c;
}

std::string
reason(mlx5_qpn_hw_obj_verdict v, int err, uint8_t log)
{
	mlx5_qpn_hw_probe p{v, err, log};
	char buf[128];
	EXPECT_GT(mlx5_qpn_hw_probe_reason(&p, buf, sizeof(buf)), 0);
	return buf;
}

} // namespace

TEST(HwSizing, RequestIsTheSizeTheGenericLayerAsksFor)
{
	/* Unset devarg: the largest object; no firmware bound (0 = unknown). */
	mlx5_qpn_caps c = caps(7, 10, 0);
	EXPECT_EQ(mlx5_qpn_hw_request_log(&c, UINT32_MAX, 65536, 0), 10);
	/* The devarg, clamped into [granularity, max alloc]. */
	EXPECT_EQ(mlx5_qpn_hw_request_log(&c, 8, 65536, 0), 8);
	EXPECT_EQ(mlx5_qpn_hw_request_log(&c, 3, 65536, 0), 7);
	EXPECT_EQ(mlx5_qpn_hw_request_log(&c, 20, 65536, 0), 10);
	/* Halved while it does not fit max_qpns, limit or the firmware total... */
	EXPECT_EQ(mlx5_qpn_hw_request_log(&c, UINT32_MAX, 256, 0), 8);
	EXPECT_EQ(mlx5_qpn_hw_request_log(&c, UINT32_MAX, 65536, 512), 9);
	mlx5_qpn_caps small_total = caps(7, 10, 9);
	EXPECT_EQ(mlx5_qpn_hw_request_log(&small_total, UINT32_MAX, 65536, 0), 9);
	/* ... but never below the granularity. */
	EXPECT_EQ(mlx5_qpn_hw_request_log(&c, UINT32_MAX, 1, 1), 7);
	/* Old firmware leaving max alloc 0: the granularity is the only size. */
	mlx5_qpn_caps old = caps(6, 0, 0);
	EXPECT_EQ(mlx5_qpn_hw_request_log(&old, UINT32_MAX, 65536, 0), 6);
	EXPECT_EQ(mlx5_qpn_hw_request_log(nullptr, UINT32_MAX, 65536, 0), 0);
}

TEST(HwSizing, StepDownOneSizeOnBadParameterToGranularityOnAnyOther)
{
	EXPECT_EQ(mlx5_qpn_hw_step_down(10, 7, -EINVAL), 9);
	EXPECT_EQ(mlx5_qpn_hw_step_down(8, 7, -EINVAL), 7);
	EXPECT_EQ(mlx5_qpn_hw_step_down(7, 7, -EINVAL), -1);
	EXPECT_EQ(mlx5_qpn_hw_step_down(10, 7, 0), -1);
	/* Any other refusal: straight to the granularity, rdma-core's and UCX's size; at the
	 * granularity nothing smaller is tried. */
	for (int rc : {-ENOMEM, -EAGAIN, -EBUSY, -EIO, -EPERM, -EOPNOTSUPP, -ENOSPC}) {
		EXPECT_EQ(mlx5_qpn_hw_step_down(10, 7, rc), 7) << rc;
		EXPECT_EQ(mlx5_qpn_hw_step_down(7, 7, rc), -1) << rc;
	}
	/* The whole walk from the request to the granularity. */
	std::vector<int> walk;
	for (int log = 10; log >= 0; log = mlx5_qpn_hw_step_down(uint8_t(log), 7, -EINVAL))
		walk.push_back(log);
	EXPECT_EQ(walk, (std::vector<int>{10, 9, 8, 7}));
}

TEST(HwSizing, LogMaxNumZeroIsUnknownNotOne)
{
	EXPECT_EQ(mlx5_qpn_hw_log_max_num(0), MLX5_QPN_PRM_MAX_LOG_RANGE);
	EXPECT_EQ(mlx5_qpn_hw_log_max_num(1), 1);
	EXPECT_EQ(mlx5_qpn_hw_log_max_num(16), 16);
	EXPECT_EQ(mlx5_qpn_hw_log_max_num(31), MLX5_QPN_PRM_MAX_LOG_RANGE);
}

TEST(HwSizing, Caps2OnlyWhenHcaCap2IsSet)
{
	std::vector<uint8_t> out(MLX5_QPN_PRM_QUERY_HCA_CAP_OUT_LEN, 0);
	EXPECT_EQ(mlx5_qpn_hw_caps2_advertised(out.data(), out.size()), 0);
	/* Bit 0x20 of cmd_hca_cap = the top bit of its second dword. */
	out[MLX5_QPN_PRM_HCA_CAP_OFFSET + 4] = 0x80;
	EXPECT_EQ(mlx5_qpn_hw_caps2_advertised(out.data(), out.size()), 1);
	/* Its neighbours do not count. */
	out[MLX5_QPN_PRM_HCA_CAP_OFFSET + 4] = 0x7f;
	out[MLX5_QPN_PRM_HCA_CAP_OFFSET + 3] = 0xff;
	EXPECT_EQ(mlx5_qpn_hw_caps2_advertised(out.data(), out.size()), 0);
	EXPECT_EQ(mlx5_qpn_hw_caps2_advertised(nullptr, out.size()), -EINVAL);
	EXPECT_EQ(mlx5_qpn_hw_caps2_advertised(out.data(), MLX5_QPN_PRM_HCA_CAP_OFFSET + 4),
		  -EINVAL);
}

TEST(HwSizing, SourceForEveryPolicyAndVerdict)
{
	const mlx5_qpn_hw_obj_verdict failing[] = {
		MLX5_QPN_HW_OBJ_NO_DEVX,          MLX5_QPN_HW_OBJ_CAPS_UNREADABLE,
		MLX5_QPN_HW_OBJ_NOT_ADVERTISED,   MLX5_QPN_HW_OBJ_NO_CAPS2,
		MLX5_QPN_HW_OBJ_CAPS2_UNREADABLE, MLX5_QPN_HW_OBJ_TRIAL_FAILED,
		MLX5_QPN_HW_OBJ_NOT_TRIED,
	};
	mlx5_qpn_hw_probe ok{MLX5_QPN_HW_OBJ_OK, 0, 7};
	EXPECT_EQ(mlx5_qpn_hw_source_choose(MLX5_QPN_RSVD_TRY, &ok), MLX5_QPN_HW_SRC_OBJECTS);
	EXPECT_EQ(mlx5_qpn_hw_source_choose(MLX5_QPN_RSVD_YES, &ok), MLX5_QPN_HW_SRC_OBJECTS);
	EXPECT_EQ(mlx5_qpn_hw_source_choose(MLX5_QPN_RSVD_NO, &ok), MLX5_QPN_HW_SRC_ORDINARY);
	for (mlx5_qpn_hw_obj_verdict v : failing) {
		mlx5_qpn_hw_probe p{v, -EINVAL, 7};
		/* try and no work on every ConnectX; yes refuses. */
		EXPECT_EQ(mlx5_qpn_hw_source_choose(MLX5_QPN_RSVD_TRY, &p),
			  MLX5_QPN_HW_SRC_ORDINARY);
		EXPECT_EQ(mlx5_qpn_hw_source_choose(MLX5_QPN_RSVD_NO, &p),
			  MLX5_QPN_HW_SRC_ORDINARY);
		EXPECT_EQ(mlx5_qpn_hw_source_choose(MLX5_QPN_RSVD_YES, &p), MLX5_QPN_HW_SRC_NONE);
	}
	EXPECT_EQ(mlx5_qpn_hw_source_choose(MLX5_QPN_RSVD_TRY, nullptr), MLX5_QPN_HW_SRC_NONE);
	EXPECT_STREQ(mlx5_qpn_hw_source_name(MLX5_QPN_HW_SRC_OBJECTS), "RESERVED_QPN objects");
	EXPECT_STREQ(mlx5_qpn_hw_source_name(MLX5_QPN_HW_SRC_ORDINARY), "ordinary UD QPs");
	EXPECT_STREQ(mlx5_qpn_hw_source_name(MLX5_QPN_HW_SRC_NONE), "none");
}

TEST(HwSizing, ReasonNamesTheFailingStep)
{
	EXPECT_EQ(reason(MLX5_QPN_HW_OBJ_NO_DEVX, -EPERM, 0),
		  std::string("no DEVX context (") + strerror(EPERM) + ")");
	EXPECT_EQ(reason(MLX5_QPN_HW_OBJ_NOT_ADVERTISED, 0, 0),
		  "general_obj_types bit 44 (RESERVED_QPN) clear");
	EXPECT_EQ(reason(MLX5_QPN_HW_OBJ_NO_CAPS2, 0, 0),
		  "no HCA caps 2 (cmd_hca_cap.hca_cap_2 clear)");
	EXPECT_EQ(reason(MLX5_QPN_HW_OBJ_TRIAL_FAILED, -EINVAL, 7),
		  std::string("trial object of 2^7 QPNs refused (") + strerror(EINVAL) + ")");
	EXPECT_EQ(reason(MLX5_QPN_HW_OBJ_CAPS_UNREADABLE, -EIO, 0),
		  std::string("QUERY_HCA_CAP refused (") + strerror(EIO) + ")");
	EXPECT_EQ(reason(MLX5_QPN_HW_OBJ_CAPS2_UNREADABLE, 0, 0),
		  "QUERY_HCA_CAP(caps 2) refused (no status)");
	EXPECT_EQ(reason(MLX5_QPN_HW_OBJ_OK, 0, 9), "trial object of 2^9 QPNs created");
	EXPECT_EQ(reason(MLX5_QPN_HW_OBJ_NOT_TRIED, 0, 0), "not tried (reserved_qpn=no)");
	char small[8];
	mlx5_qpn_hw_probe p{MLX5_QPN_HW_OBJ_NOT_ADVERTISED, 0, 0};
	EXPECT_GT(mlx5_qpn_hw_probe_reason(&p, small, sizeof(small)), 7);
	EXPECT_EQ(strlen(small), 7u); /* truncated, terminated */
	EXPECT_EQ(mlx5_qpn_hw_probe_reason(nullptr, small, sizeof(small)), -EINVAL);
	EXPECT_EQ(mlx5_qpn_hw_probe_reason(&p, nullptr, 4), -EINVAL);
}

/* The kernel's and rdma-core's cmd_status_to_err(): the two entries this project had wrong. */
TEST(HwSizing, StatusMappingAsKernelAndRdmaCore)
{
	EXPECT_EQ(MLX5_QPN_CMD_STAT_NOT_READY, 0x7);
	EXPECT_EQ(mlx5_qpn_fw_status_to_errno(MLX5_QPN_CMD_STAT_NOT_READY), -EAGAIN);
	EXPECT_EQ(MLX5_QPN_CMD_STAT_IX_ERR, 0xa);
	EXPECT_EQ(mlx5_qpn_fw_status_to_errno(MLX5_QPN_CMD_STAT_IX_ERR), -EINVAL);
	/* Bad parameter is what the step-down keys on. */
	EXPECT_EQ(mlx5_qpn_hw_step_down(9, 7,
					mlx5_qpn_fw_status_to_errno(
						MLX5_QPN_CMD_STAT_BAD_PARAM_ERR)),
		  8);
	EXPECT_EQ(mlx5_qpn_hw_step_down(9, 7,
					mlx5_qpn_fw_status_to_errno(MLX5_QPN_CMD_STAT_LIM_ERR)),
		  7);
}

TEST(HwSizing, OrdinaryQpArguments)
{
	ibv_qp_init_attr attr;
	memset(&attr, 0xa5, sizeof(attr));
	ibv_cq *cq = reinterpret_cast<ibv_cq *>(0x1000);
	mlx5_qpn_hw_qp_init_attr(&attr, cq);
	EXPECT_EQ(attr.qp_type, IBV_QPT_UD);
	EXPECT_EQ(attr.send_cq, cq);
	EXPECT_EQ(attr.recv_cq, cq);
	EXPECT_EQ(attr.srq, nullptr);
	EXPECT_EQ(attr.qp_context, nullptr);
	EXPECT_EQ(attr.cap.max_send_wr, 1u);
	EXPECT_EQ(attr.cap.max_recv_wr, 1u);
	EXPECT_EQ(attr.cap.max_send_sge, 1u);
	EXPECT_EQ(attr.cap.max_recv_sge, 1u);
	EXPECT_EQ(attr.cap.max_inline_data, 0u);
	EXPECT_EQ(attr.sq_sig_all, 0);
	EXPECT_EQ(MLX5_QPN_HW_QP_CQE, 1);
}
