/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Locked memory (mlx5_qpn_hw_memlock.h): the check against RLIMIT_MEMLOCK and CAP_IPC_LOCK, the
 * UD fallback's pin estimate, its cap at what the limit leaves (one line, caps.qpn_limit, no
 * call to rdma-core past it) and its one shared CQ, destroyed after every QP on it.
 */
#include <gtest/gtest.h>

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "hw/mlx5_qpn_hw.h"
#include "hw/mlx5_qpn_hw_memlock.h"
#include "hw/mlx5_qpn_hw_qp.h"
#include "hw_fake_glue.h"
#include "hw_test_util.h"
#include "mlx5_qpn.h"

using hwfake::fake;
using hwtest::count_lines;
using hwtest::LogCapture;

namespace {

bool
get_caps(__user_cap_header_struct *hdr, __user_cap_data_struct *data)
{
	memset(hdr, 0, sizeof(*hdr));
	memset(data, 0, sizeof(*data) * _LINUX_CAPABILITY_U32S_3);
	hdr->version = _LINUX_CAPABILITY_VERSION_3;
	return syscall(SYS_capget, hdr, data) == 0;
}

/*
 * Lowers the soft RLIMIT_MEMLOCK to a number of bytes and drops CAP_IPC_LOCK from this
 * thread's effective set (it stays permitted, so it can come back); restores both. The
 * backend's open runs on the calling thread, which is the one whose capabilities count.
 */
class LowMemlock {
public:
	explicit LowMemlock(uint64_t bytes)
	{
		ok_ = getrlimit(RLIMIT_MEMLOCK, &saved_) == 0 && get_caps(&hdr_, caps_);
		if (!ok_)
			return;
		struct rlimit rl = saved_;
		rl.rlim_cur = bytes;
		ok_ = setrlimit(RLIMIT_MEMLOCK, &rl) == 0;
		__user_cap_data_struct lowered[_LINUX_CAPABILITY_U32S_3];
		memcpy(lowered, caps_, sizeof(lowered));
		lowered[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
		ok_ = ok_ && syscall(SYS_capset, &hdr_, lowered) == 0;
	}
	~LowMemlock()
	{
		setrlimit(RLIMIT_MEMLOCK, &saved_);
		syscall(SYS_capset, &hdr_, caps_);
	}
	LowMemlock(const LowMemlock &) = delete;
	LowMemlock &operator=(const LowMemlock &) = delete;
	bool ok() const { return ok_; }

private:
	bool ok_ = false;
	struct rlimit saved_ {};
	__user_cap_header_struct hdr_{};
	__user_cap_data_struct caps_[_LINUX_CAPABILITY_U32S_3]{};
};

uint64_t
page_size()
{
	return static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t
ud_qp_bytes()
{
	ibv_qp_init_attr attr;
	mlx5_qpn_hw_qp_init_attr(&attr, nullptr);
	return mlx5_qpn_hw_qp_pin_bytes(&attr, page_size());
}

uint64_t
ud_cq_bytes()
{
	return mlx5_qpn_hw_cq_pin_bytes(MLX5_QPN_HW_QP_CQE, page_size());
}

/* What this process has pinned already (the check counts it). */
uint64_t
vm_pin()
{
	uint64_t limit = 0, pinned = 0;
	mlx5_qpn_hw_memlock_room(&limit, &pinned);
	return pinned;
}

mlx5_qpn_backend *
open_without_objects(int *rc, std::string *log, uint32_t max_qpns = 65536)
{
	mlx5_qpn_devargs da{};
	snprintf(da.name, sizeof(da.name), "mlx5_fake");
	da.reserved_qpn = MLX5_QPN_RSVD_TRY;
	da.log_range = UINT32_MAX;
	da.max_qpns = max_qpns;
	fake().bit44 = false;
	mlx5_qpn_backend *be = nullptr;
	LogCapture cap;
	*rc = mlx5_qpn_hw_ops.open(&da, &be);
	*log = cap.text();
	return be;
}

using hwtest::count;

} // namespace

/* As libmlx5 sizes a one-entry UD QP and CQ: whole pages, plus a doorbell slot each. */
TEST(HwMemlock, PinEstimateIsWholePagesPlusDoorbell)
{
	ibv_qp_init_attr attr;
	mlx5_qpn_hw_qp_init_attr(&attr, nullptr);
	EXPECT_EQ(mlx5_qpn_hw_qp_pin_bytes(&attr, 4096), 4096u + 64);
	EXPECT_EQ(mlx5_qpn_hw_qp_pin_bytes(&attr, 65536), 65536u + 64);
	EXPECT_EQ(mlx5_qpn_hw_cq_pin_bytes(1, 4096), 4096u + 64);
	/* 64 send WRs of 128-byte UD WQEs and 64 receive WRs of 16 bytes: 9 KiB, three pages. */
	attr.cap.max_send_wr = 64;
	attr.cap.max_recv_wr = 64;
	EXPECT_EQ(mlx5_qpn_hw_qp_pin_bytes(&attr, 4096), 3 * 4096u + 64);
	/* How many fit beside the shared CQ. */
	const uint64_t qp = 4096 + 64, cq = 4096 + 64;
	EXPECT_EQ(mlx5_qpn_hw_qps_fit(UINT64_MAX, 4096), UINT32_MAX);
	EXPECT_EQ(mlx5_qpn_hw_qps_fit(cq + 3 * qp, 4096), 3u);
	EXPECT_EQ(mlx5_qpn_hw_qps_fit(cq + 3 * qp - 1, 4096), 2u);
	EXPECT_EQ(mlx5_qpn_hw_qps_fit(cq + qp - 1, 4096), 0u);
	EXPECT_EQ(mlx5_qpn_hw_qps_fit(0, 4096), 0u);
}

TEST(HwMemlock, CheckRefusesAboveTheLimitInOneLine)
{
	LowMemlock low(1 << 20);
	ASSERT_TRUE(low.ok()) << "cannot lower RLIMIT_MEMLOCK / drop CAP_IPC_LOCK here";
	const uint64_t pinned = vm_pin();
	uint64_t limit = 0;
	EXPECT_EQ(mlx5_qpn_hw_memlock_room(&limit, nullptr), (1u << 20) - pinned);
	EXPECT_EQ(limit, 1u << 20);
	LogCapture cap;
	EXPECT_EQ(mlx5_qpn_hw_memlock_check("mlx5_x", 4096, "the DC objects"), 0);
	EXPECT_EQ(cap.text(), "");
	LogCapture cap2;
	EXPECT_EQ(mlx5_qpn_hw_memlock_check("mlx5_x", 2 << 20, "the DC objects"), -ENOMEM);
	const std::string log = cap2.text();
	EXPECT_EQ(count_lines(log), 1u) << log;
	EXPECT_NE(log.find("mlx5_x: RLIMIT_MEMLOCK is 1 MiB"), std::string::npos) << log;
	EXPECT_NE(log.find("the DC objects needs 2 MiB more"), std::string::npos) << log;
	EXPECT_NE(log.find("CAP_IPC_LOCK"), std::string::npos) << log;
}

/* The kernel pins without looking at the limit for a process with CAP_IPC_LOCK. */
TEST(HwMemlock, CapIpcLockPasses)
{
	__user_cap_header_struct hdr;
	__user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];
	ASSERT_TRUE(get_caps(&hdr, caps));
	if ((caps[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK)) == 0)
		GTEST_SKIP() << "no CAP_IPC_LOCK to keep";
	struct rlimit saved;
	ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &saved), 0);
	struct rlimit low = saved;
	low.rlim_cur = 4096;
	ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &low), 0);
	uint64_t limit = 0;
	EXPECT_EQ(mlx5_qpn_hw_memlock_room(&limit, nullptr), UINT64_MAX);
	EXPECT_EQ(limit, UINT64_MAX);
	EXPECT_EQ(mlx5_qpn_hw_memlock_check("mlx5_x", 1ull << 40, "everything"), 0);
	ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &saved), 0);
}

/* Without the capability, RLIM_INFINITY passes too. */
TEST(HwMemlock, NoLimitPasses)
{
	LowMemlock nocap(RLIM_INFINITY);
	if (!nocap.ok())
		GTEST_SKIP() << "the hard limit is not RLIM_INFINITY";
	EXPECT_EQ(mlx5_qpn_hw_memlock_room(nullptr, nullptr), UINT64_MAX);
	EXPECT_EQ(mlx5_qpn_hw_memlock_check("mlx5_x", 1ull << 40, "everything"), 0);
}

/* The UD fallback under a limit that holds five QPs: capped at five in one line; the sixth is
 * refused before rdma-core, in one clear line. */
TEST(HwMemlock, UdFallbackIsCappedAtWhatFits)
{
	hwfake::Scope scope;
	const uint64_t limit = vm_pin() + ud_cq_bytes() + 5 * ud_qp_bytes() + 100;
	LowMemlock low(limit);
	ASSERT_TRUE(low.ok());
	int rc = 0;
	std::string log;
	mlx5_qpn_backend *be = open_without_objects(&rc, &log);
	ASSERT_EQ(rc, 0) << log;
	EXPECT_EQ(count(log, "ordinary UD QPs capped at 5 of 65536"), 1u) << log;
	EXPECT_EQ(count(log, "RLIMIT_MEMLOCK is " + std::to_string(limit) + " bytes"), 1u) << log;
	EXPECT_NE(log.find("each QP pins " + std::to_string(ud_qp_bytes()) + " bytes"),
		  std::string::npos)
		<< log;
	mlx5_qpn_caps caps{};
	ASSERT_EQ(mlx5_qpn_hw_ops.query_caps(be, &caps), 0);
	EXPECT_EQ(caps.qpn_limit, 5u) << "the generic layer grows no further";
	uint32_t q = 0;
	for (int i = 0; i < 5; i++)
		ASSERT_EQ(mlx5_qpn_hw_ops.qp_create(be, &q), 0) << i;
	LogCapture cap;
	EXPECT_EQ(mlx5_qpn_hw_ops.qp_create(be, &q), -ENOMEM);
	const std::string refused = cap.text();
	EXPECT_EQ(count_lines(refused), 1u) << refused;
	EXPECT_NE(refused.find("5 UD QPs held, all that RLIMIT_MEMLOCK allows"), std::string::npos)
		<< refused;
	EXPECT_EQ(fake().qps_live, 5) << "nothing reached rdma-core";
	EXPECT_EQ(fake().cqs_live, 1);
	mlx5_qpn_hw_ops.close(be);
	EXPECT_EQ(hwfake::live_objects(), 0);
}

/* Not even the CQ and one QP fit: the open fails in one line rather than at the first QP. */
TEST(HwMemlock, UdFallbackWithoutRoomFailsTheOpen)
{
	hwfake::Scope scope;
	LowMemlock low(vm_pin() + ud_cq_bytes());
	ASSERT_TRUE(low.ok());
	int rc = 0;
	std::string log;
	mlx5_qpn_backend *be = open_without_objects(&rc, &log);
	EXPECT_EQ(rc, -ENOMEM);
	EXPECT_EQ(be, nullptr);
	EXPECT_EQ(count_lines(log), 1u) << log;
	EXPECT_NE(log.find("the UD fallback's shared CQ and first QP needs"), std::string::npos)
		<< log;
	EXPECT_EQ(hwfake::live_objects(), 0);
}

/* Enough room: no cap and no line about it. */
TEST(HwMemlock, UdFallbackUncappedWhenEverythingFits)
{
	hwfake::Scope scope;
	LowMemlock low(vm_pin() + ud_cq_bytes() + 64 * ud_qp_bytes());
	ASSERT_TRUE(low.ok());
	int rc = 0;
	std::string log;
	mlx5_qpn_backend *be = open_without_objects(&rc, &log, 64);
	ASSERT_EQ(rc, 0) << log;
	EXPECT_EQ(log.find("capped"), std::string::npos) << log;
	mlx5_qpn_caps caps{};
	ASSERT_EQ(mlx5_qpn_hw_ops.query_caps(be, &caps), 0);
	EXPECT_EQ(caps.qpn_limit, 0u);
	mlx5_qpn_hw_ops.close(be);
}

namespace {

/* Each destroy_cq sees how many QPs were still alive: the CQ must go after all of them. */
int g_qps_at_cq_destroy = -1;

int
destroy_cq_watched(ibv_cq *cq)
{
	g_qps_at_cq_destroy = fake().qps_live;
	return hwfake::fake_glue()->destroy_cq(cq);
}

} // namespace

TEST(HwMemlock, OneCqForAllUdQpsDestroyedLast)
{
	hwfake::Scope scope;
	mlx5_qpn_glue wrapped = *hwfake::fake_glue();
	wrapped.destroy_cq = destroy_cq_watched;
	mlx5_qpn_glue_set_override(&wrapped);
	g_qps_at_cq_destroy = -1;
	int rc = 0;
	std::string log;
	mlx5_qpn_backend *be = open_without_objects(&rc, &log);
	ASSERT_EQ(rc, 0) << log;
	uint32_t q[8];
	for (uint32_t &x : q)
		ASSERT_EQ(mlx5_qpn_hw_ops.qp_create(be, &x), 0);
	EXPECT_EQ(fake().qps_live, 8);
	EXPECT_EQ(fake().cqs_live, 1);
	EXPECT_EQ(fake().cq_depths.size(), 1u);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(mlx5_qpn_hw_ops.qp_destroy(be, q[i]), 0);
	EXPECT_EQ(fake().cqs_live, 1) << "the shared CQ stays while QPs are on it";
	EXPECT_EQ(g_qps_at_cq_destroy, -1);
	mlx5_qpn_hw_ops.close(be);
	EXPECT_EQ(g_qps_at_cq_destroy, 0) << "the CQ is destroyed after every QP on it";
	EXPECT_EQ(hwfake::live_objects(), 0);
	mlx5_qpn_glue_set_override(hwfake::fake_glue());
}

/* Through the generic layer: the pool is sized to the cap, so the sixth QPN is "none left"
 * (-ENOSPC) from the pool, not an ibv_create_qp failure. */
TEST(HwMemlock, ProbeUnderTheCapEndsInNoneLeft)
{
	hwfake::Scope scope;
	fake().bit44 = false;
	fake().guid = 0x0002c90300fc0000ull | static_cast<uint32_t>(getpid() & 0xffff);
	LowMemlock low(vm_pin() + ud_cq_bytes() + 5 * ud_qp_bytes() + 100);
	ASSERT_TRUE(low.ok());
	LogCapture cap;
	mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe("ib=mlx5_fake,reserved_qpn=try,quarantine_us=0,max_qpns=1024",
				     &dev),
		  0);
	uint32_t q[6];
	for (int i = 0; i < 5; i++)
		ASSERT_EQ(mlx5_qpn_reserved_alloc(dev, &q[i]), 0) << i;
	EXPECT_EQ(mlx5_qpn_reserved_alloc(dev, &q[5]), -ENOSPC);
	for (int i = 0; i < 5; i++)
		EXPECT_EQ(mlx5_qpn_reserved_dealloc(dev, q[i]), 0);
	mlx5_qpn_dev_close(dev);
	const std::string log = cap.text();
	EXPECT_EQ(count(log, "capped at 5 of 1024"), 1u) << log;
	EXPECT_EQ(log.find("ibv_create_qp"), std::string::npos) << log;
	EXPECT_EQ(log.find("all that RLIMIT_MEMLOCK allows"), std::string::npos) << log;
	EXPECT_EQ(hwfake::live_objects(), 0);
}
