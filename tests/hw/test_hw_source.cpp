/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hardware backend against a fake rdma-core (hw_fake_glue.h): the trial at the size that
 * will be requested and its step-down (one size on bad parameter, to the granularity on any
 * other refusal), caps 2 only with hca_cap_2, reserved_qpn=try|yes|no on devices without
 * objects (ordinary UD QPs on one shared CQ; yes refused in one line), an rdma-core without
 * mlx5dv_reserved_qpn_alloc, and a forked child's close.
 */
#include <atomic>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <set>
#include <string>

#include "hw/mlx5_qpn_hw.h"
#include "common/mlx5_qpn_prm.h"
#include "hw/mlx5_qpn_hw_dc.h"
#include "hw_fake_glue.h"
#include "hw_test_util.h"
#include "mlx5_qpn.h"

using hwfake::fake;
using hwtest::count_lines;
using hwtest::LogCapture;

namespace {

mlx5_qpn_devargs
fake_devargs(mlx5_qpn_rsvd_policy policy)
{
	mlx5_qpn_devargs da{};
	snprintf(da.name, sizeof(da.name), "mlx5_fake");
	da.reserved_qpn = policy;
	da.log_range = UINT32_MAX;
	da.max_qpns = 65536;
	return da;
}

mlx5_qpn_backend *
open_fake(mlx5_qpn_rsvd_policy policy, std::string *log = nullptr)
{
	mlx5_qpn_devargs da = fake_devargs(policy);
	mlx5_qpn_backend *be = nullptr;
	LogCapture cap;
	int rc = mlx5_qpn_hw_ops.open(&da, &be);
	std::string text = cap.text();
	EXPECT_EQ(rc, 0) << text;
	if (log != nullptr)
		*log = text;
	return be;
}

/* The ordinary-QP source serves a QPN; close leaves nothing of the fake's alive. */
void
one_qp_then_close(mlx5_qpn_backend *be)
{
	uint32_t q = 0;
	EXPECT_EQ(mlx5_qpn_hw_ops.qp_create(be, &q), 0);
	mlx5_qpn_hw_ops.close(be);
	EXPECT_EQ(hwfake::live_objects(), 0);
}

using hwtest::count;

} // namespace

TEST(HwSource, TrialUsesTheSizeThatWillBeRequested)
{
	hwfake::Scope scope;
	std::string log;
	mlx5_qpn_backend *be = open_fake(MLX5_QPN_RSVD_TRY, &log);
	ASSERT_NE(be, nullptr);
	/* Not the granularity (7): the largest object, which the generic layer asks for. */
	EXPECT_EQ(fake().create_logs, (std::vector<uint8_t>{10}));
	EXPECT_EQ(fake().objs_live, 0) << "the trial object is given back";
	mlx5_qpn_caps caps{};
	ASSERT_EQ(mlx5_qpn_hw_ops.query_caps(be, &caps), 0);
	EXPECT_EQ(caps.reserved_qpn_obj, 1);
	/* log_max_num_reserved_qpn read as 0: unknown, no bound (not a supply of one QPN). */
	EXPECT_EQ(caps.log_max_num_reserved_qpn, MLX5_QPN_PRM_MAX_LOG_RANGE);
	/* The caps read and the source, logged at probe. */
	EXPECT_NE(log.find("granularity 2^7, max alloc 2^10, total unknown, taken as 2^24"),
		  std::string::npos)
		<< log;
	EXPECT_NE(log.find("QPN source: RESERVED_QPN objects"), std::string::npos) << log;
	mlx5_qpn_range_obj o{};
	ASSERT_EQ(mlx5_qpn_hw_ops.range_reserve(be, 10, &o), 0);
	EXPECT_EQ(o.log_size, 10);
	EXPECT_EQ(o.first_qpn % 1024, 0u);
	EXPECT_EQ(mlx5_qpn_hw_ops.range_release(be, &o), 0);
	mlx5_qpn_hw_ops.close(be);
	EXPECT_EQ(hwfake::live_objects(), 0);
}

/* The devargs shape the request: log_range, and a max_qpns smaller than the largest object. */
TEST(HwSource, TrialFollowsLogRangeAndMaxQpns)
{
	const struct {
		uint32_t log_range, max_qpns;
		uint8_t trial;
	} cases[] = {{8, 65536, 8}, {UINT32_MAX, 256, 8}, {UINT32_MAX, 16, 7}, {9, 300, 8}};
	for (const auto &c : cases) {
		hwfake::Scope scope;
		mlx5_qpn_devargs da = fake_devargs(MLX5_QPN_RSVD_TRY);
		da.log_range = c.log_range;
		da.max_qpns = c.max_qpns;
		mlx5_qpn_backend *be = nullptr;
		LogCapture cap;
		ASSERT_EQ(mlx5_qpn_hw_ops.open(&da, &be), 0);
		EXPECT_EQ(fake().create_logs, (std::vector<uint8_t>{c.trial}))
			<< c.log_range << " " << c.max_qpns;
		mlx5_qpn_hw_ops.close(be);
	}
}

TEST(HwSource, BadParameterStepsDownOnceAndStaysOnObjects)
{
	hwfake::Scope scope;
	fake().fw_max_log = 8;
	std::string log;
	mlx5_qpn_backend *be = open_fake(MLX5_QPN_RSVD_YES, &log);
	ASSERT_NE(be, nullptr);
	EXPECT_EQ(fake().create_logs, (std::vector<uint8_t>{10, 9, 8}));
	EXPECT_EQ(count(log, "stepping down towards 2^7"), 1u) << log;
	EXPECT_EQ(count(log, "failed"), 0u) << "refused sizes are not errors: " << log;
	EXPECT_NE(log.find("QPN source: RESERVED_QPN objects"), std::string::npos) << log;

	/* The generic layer still asks for 2^10: it gets what the firmware accepts, at once. */
	LogCapture cap;
	mlx5_qpn_range_obj a{}, b{};
	ASSERT_EQ(mlx5_qpn_hw_ops.range_reserve(be, 10, &a), 0);
	EXPECT_EQ(a.log_size, 8);
	EXPECT_EQ(fake().create_logs.size(), 4u) << "no refused command per range";
	/* Firmware tightening later: one more step, not logged again. */
	fake().fw_max_log = 7;
	ASSERT_EQ(mlx5_qpn_hw_ops.range_reserve(be, 10, &b), 0);
	EXPECT_EQ(b.log_size, 7);
	EXPECT_EQ(cap.text(), "");
	/* At the granularity a bad parameter is an error like any other. */
	fake().fw_max_log = 6;
	mlx5_qpn_range_obj c{};
	LogCapture cap2;
	EXPECT_EQ(mlx5_qpn_hw_ops.range_reserve(be, 10, &c), -EINVAL);
	EXPECT_EQ(count_lines(cap2.text()), 1u) << cap2.text();
	EXPECT_EQ(mlx5_qpn_hw_ops.range_release(be, &a), 0);
	mlx5_qpn_hw_ops.close(be); /* b still held: close destroys it */
	EXPECT_EQ(hwfake::live_objects(), 0);
}

namespace {

/* The fake's table with its own entries swapped in; installed for the scope's lifetime, the
 * fake's table restored after. */
class Wrapped {
public:
	explicit Wrapped(void (*edit)(mlx5_qpn_glue *)) : table_(*hwfake::fake_glue())
	{
		edit(&table_);
		mlx5_qpn_glue_set_override(&table_);
	}
	~Wrapped() { mlx5_qpn_glue_set_override(hwfake::fake_glue()); }
	Wrapped(const Wrapped &) = delete;
	Wrapped &operator=(const Wrapped &) = delete;

private:
	mlx5_qpn_glue table_;
};

/* How the wrapped devx_obj_create refuses every object above the granularity. */
struct Refusal {
	uint8_t status; /* 0: no status, only the errno */
	int err;
	const char *named; /* what the step line says of it */
};
Refusal g_refusal;

mlx5dv_devx_obj *
refuse_large(ibv_context *ctx, const void *in, size_t inlen, void *out, size_t outlen)
{
	mlx5_qpn_prm_obj_hdr h{};
	mlx5_qpn_prm_obj_hdr_parse(in, inlen, &h);
	if (h.log_obj_range <= fake().gran)
		return hwfake::fake_glue()->devx_obj_create(ctx, in, inlen, out, outlen);
	fake().create_logs.push_back(h.log_obj_range);
	if (g_refusal.status != 0)
		mlx5_qpn_prm_out_set_status(out, outlen, g_refusal.status, 0x5a5a);
	errno = g_refusal.err;
	return nullptr;
}

} // namespace

/* A firmware refusing large objects with any status, or a bare errno: objects of the
 * granularity, not the UD fallback. */
TEST(HwSource, AnyRefusalAboveGranularityStepsDownToIt)
{
	const Refusal cases[] = {
		{MLX5_QPN_CMD_STAT_BAD_SIZE_OUTS_CQES_ERR, EREMOTEIO,
		 "status 0x40 syndrome 0x5a5a"},
		{MLX5_QPN_CMD_STAT_BAD_RES_STATE_ERR, EREMOTEIO, "status 0x9 syndrome 0x5a5a"},
		{MLX5_QPN_CMD_STAT_LIM_ERR, EREMOTEIO, "status 0x8 syndrome 0x5a5a"},
		{0, ENOSPC, "no firmware status"},
	};
	for (const Refusal &c : cases) {
		hwfake::Scope scope;
		Wrapped w([](mlx5_qpn_glue *g) { g->devx_obj_create = refuse_large; });
		g_refusal = c;
		std::string log;
		mlx5_qpn_backend *be = open_fake(MLX5_QPN_RSVD_TRY, &log);
		ASSERT_NE(be, nullptr) << c.named;
		/* Statuses the kernel maps to EINVAL step one size at a time (as bad parameter),
		 * the others at once; both end at the granularity. */
		const std::vector<uint8_t> &logs = fake().create_logs;
		ASSERT_GE(logs.size(), 2u) << c.named;
		EXPECT_EQ(logs.front(), 10) << c.named;
		EXPECT_EQ(logs.back(), 7) << c.named;
		if (mlx5_qpn_fw_status_to_errno(c.status) != -EINVAL) {
			EXPECT_EQ(logs, (std::vector<uint8_t>{10, 7})) << c.named;
		}
		const size_t made = logs.size();
		EXPECT_NE(log.find("QPN source: RESERVED_QPN objects"), std::string::npos) << log;
		/* One line: the size and the status refused. */
		EXPECT_EQ(count(log, "firmware refused"), 1u) << log;
		EXPECT_NE(log.find("refused a RESERVED_QPN object of 2^10 QPNs (" +
				   std::string(c.named)),
			  std::string::npos)
			<< log;
		EXPECT_NE(log.find("stepping down towards 2^7"), std::string::npos) << log;
		mlx5_qpn_caps caps{};
		ASSERT_EQ(mlx5_qpn_hw_ops.query_caps(be, &caps), 0);
		EXPECT_EQ(caps.reserved_qpn_obj, 1) << c.named;
		/* Ranges come at the granularity at once, with no refused command. */
		mlx5_qpn_range_obj o{};
		LogCapture quiet;
		ASSERT_EQ(mlx5_qpn_hw_ops.range_reserve(be, 10, &o), 0);
		EXPECT_EQ(o.log_size, 7);
		EXPECT_EQ(fake().create_logs.size(), made + 1);
		EXPECT_EQ(quiet.text(), "");
		EXPECT_EQ(mlx5_qpn_hw_ops.range_release(be, &o), 0);
		mlx5_qpn_hw_ops.close(be);
		EXPECT_EQ(hwfake::live_objects(), 0);
	}
}

/* An rdma-core before 34: no mlx5dv_reserved_qpn_alloc/dealloc in the table. */
TEST(HwSource, WithoutSingleQpnApiServesFromObjectsOrUdQps)
{
	auto no_single = [](mlx5_qpn_glue *g) {
		g->reserved_qpn_alloc = nullptr;
		g->reserved_qpn_dealloc = nullptr;
	};
	for (bool objects : {true, false}) {
		hwfake::Scope scope;
		Wrapped w(no_single);
		fake().bit44 = objects;
		std::string log;
		mlx5_qpn_backend *be = open_fake(MLX5_QPN_RSVD_TRY, &log);
		ASSERT_NE(be, nullptr);
		const char *which = objects ? "QPNs come from RESERVED_QPN objects through DEVX" :
					      "QPNs come from ordinary UD QPs";
		EXPECT_EQ(count(log, "without mlx5dv_reserved_qpn_alloc"), 1u) << log;
		EXPECT_EQ(count(log, which), 1u) << log;
		uint32_t q = 0;
		EXPECT_EQ(mlx5_qpn_hw_ops.qpn_reserve_one(be, &q), -EOPNOTSUPP);
		LogCapture cap;
		EXPECT_EQ(mlx5_qpn_hw_ops.qpn_release_one(be, 0x2a0), -EINVAL);
		EXPECT_EQ(count_lines(cap.text()), 1u);
		mlx5_qpn_range_obj o{};
		if (objects) {
			ASSERT_EQ(mlx5_qpn_hw_ops.range_reserve(be, 10, &o), 0);
			EXPECT_EQ(o.log_size, 10);
		} else {
			EXPECT_EQ(mlx5_qpn_hw_ops.range_reserve(be, 10, &o), -ENOTSUP);
			ASSERT_EQ(mlx5_qpn_hw_ops.qp_create(be, &q), 0);
		}
		mlx5_qpn_hw_ops.close(be);
		EXPECT_EQ(hwfake::live_objects(), 0);
	}
	/* Through the generic layer: reserved_qpn=try serves QPNs. */
	hwfake::Scope scope;
	Wrapped w(no_single);
	fake().guid = 0x0002c90300fb0000ull | static_cast<uint32_t>(getpid() & 0xffff);
	mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe("ib=mlx5_fake,reserved_qpn=try,quarantine_us=0,max_qpns=1024",
				     &dev),
		  0);
	uint32_t q = 0;
	ASSERT_EQ(mlx5_qpn_reserved_alloc(dev, &q), 0);
	EXPECT_EQ(mlx5_qpn_reserved_dealloc(dev, q), 0);
	mlx5_qpn_dev_close(dev);
	EXPECT_EQ(fake().single_calls, 0);
	EXPECT_EQ(hwfake::live_objects(), 0);
}

TEST(HwSource, Caps2OnlyWhenHcaCap2IsSet)
{
	hwfake::Scope scope;
	fake().hca_cap_2 = false;
	std::string log;
	mlx5_qpn_backend *be = open_fake(MLX5_QPN_RSVD_TRY, &log);
	ASSERT_NE(be, nullptr);
	EXPECT_EQ(fake().caps_queries, 1);
	EXPECT_EQ(fake().caps2_queries, 0);
	EXPECT_TRUE(fake().create_logs.empty());
	EXPECT_NE(log.find("no HCA caps 2 (cmd_hca_cap.hca_cap_2 clear)"), std::string::npos)
		<< log;
	EXPECT_NE(log.find("QPN source: ordinary UD QPs"), std::string::npos) << log;
	mlx5_qpn_hw_ops.close(be);

	hwfake::Scope again;
	be = open_fake(MLX5_QPN_RSVD_TRY);
	EXPECT_EQ(fake().caps2_queries, 1);
	mlx5_qpn_hw_ops.close(be);
}

TEST(HwSource, TryWithoutObjectsUsesOrdinaryUdQps)
{
	hwfake::Scope scope;
	fake().devx = false;
	std::string log;
	mlx5_qpn_backend *be = open_fake(MLX5_QPN_RSVD_TRY, &log);
	ASSERT_NE(be, nullptr);
	EXPECT_NE(log.find("no DEVX context"), std::string::npos) << log;
	/* rdma-core's single QPN needs the same object: refused without asking it. */
	uint32_t q = 0;
	EXPECT_EQ(mlx5_qpn_hw_ops.qpn_reserve_one(be, &q), -EOPNOTSUPP);
	EXPECT_EQ(fake().single_calls, 0);
	mlx5_qpn_range_obj o{};
	EXPECT_EQ(mlx5_qpn_hw_ops.range_reserve(be, 7, &o), -ENOTSUP);

	std::set<uint32_t> got;
	for (int i = 0; i < 5; i++) {
		ASSERT_EQ(mlx5_qpn_hw_ops.qp_create(be, &q), 0);
		got.insert(q);
	}
	EXPECT_EQ(got.size(), 5u);
	EXPECT_EQ(fake().qps_live, 5);
	EXPECT_EQ(fake().cqs_live, 1) << "one CQ shared by every UD QP";
	EXPECT_EQ(fake().pds_live, 1) << "one PD for all";
	EXPECT_EQ(fake().cq_depths, (std::vector<int>{1}));
	EXPECT_EQ(fake().bad_qp_attrs, 0);
	/* Released: the QP goes, the shared CQ stays; a second release is refused before
	 * rdma-core. */
	ASSERT_EQ(mlx5_qpn_hw_ops.qp_destroy(be, *got.begin()), 0);
	EXPECT_EQ(fake().qps_live, 4);
	EXPECT_EQ(fake().cqs_live, 1);
	LogCapture cap;
	EXPECT_EQ(mlx5_qpn_hw_ops.qp_destroy(be, *got.begin()), -EINVAL);
	EXPECT_EQ(mlx5_qpn_hw_ops.qp_destroy(be, 0xabcdef), -EINVAL);
	EXPECT_EQ(count_lines(cap.text()), 2u);
	EXPECT_EQ(fake().qps_destroyed, 1);
	mlx5_qpn_hw_ops.close(be);
	EXPECT_EQ(hwfake::live_objects(), 0) << "close destroys the QPs, CQs and the PD";
}

TEST(HwSource, YesWithoutObjectsFailsInOneLineNamingTheReason)
{
	struct Case {
		void (*setup)(hwfake::FakeDevice &);
		const char *reason;
	} const cases[] = {
		{[](hwfake::FakeDevice &d) { d.devx = false; }, "no DEVX context"},
		{[](hwfake::FakeDevice &d) { d.caps_ok = false; }, "QUERY_HCA_CAP refused"},
		{[](hwfake::FakeDevice &d) { d.bit44 = false; }, "bit 44 (RESERVED_QPN) clear"},
		{[](hwfake::FakeDevice &d) { d.hca_cap_2 = false; }, "hca_cap_2 clear"},
		/* Refused at 2^10, then at the granularity too. */
		{[](hwfake::FakeDevice &d) { d.create_status = MLX5_QPN_CMD_STAT_LIM_ERR; },
		 "trial object of 2^7 QPNs refused"},
		{[](hwfake::FakeDevice &d) { d.fw_max_log = 0; },
		 "trial object of 2^7 QPNs refused"},
	};
	for (const Case &c : cases) {
		hwfake::Scope scope;
		c.setup(fake());
		mlx5_qpn_devargs da = fake_devargs(MLX5_QPN_RSVD_YES);
		mlx5_qpn_backend *be = nullptr;
		LogCapture cap;
		EXPECT_EQ(mlx5_qpn_hw_ops.open(&da, &be), -EOPNOTSUPP) << c.reason;
		std::string log = cap.text();
		/* One line: the refusals met on the way are the reason, at debug level. */
		EXPECT_EQ(count_lines(log), 1u) << log;
		EXPECT_EQ(count(log, "reserved_qpn=yes but RESERVED_QPN objects are unusable"), 1u);
		EXPECT_NE(log.find(c.reason), std::string::npos) << log;
		EXPECT_EQ(be, nullptr);
		EXPECT_EQ(hwfake::live_objects(), 0) << c.reason;

		/* The same device with try works, on ordinary QPs. */
		hwfake::Scope again;
		c.setup(fake());
		one_qp_then_close(open_fake(MLX5_QPN_RSVD_TRY));
	}
}

TEST(HwSource, NoNeverAsksForObjects)
{
	hwfake::Scope scope;
	std::string log;
	mlx5_qpn_backend *be = open_fake(MLX5_QPN_RSVD_NO, &log);
	ASSERT_NE(be, nullptr);
	EXPECT_TRUE(fake().create_logs.empty());
	EXPECT_NE(log.find("(not tried (reserved_qpn=no)); QPN source: ordinary UD QPs"),
		  std::string::npos)
		<< log;
	one_qp_then_close(be);
}

/* A child of the opener that closes the device frees its memory and nothing of the parent's. */
TEST(HwSource, ForkedChildNeverDestroysParentsObjects)
{
	hwfake::Scope scope;
	mlx5_qpn_backend *be = open_fake(MLX5_QPN_RSVD_TRY);
	ASSERT_NE(be, nullptr);
	mlx5_qpn_range_obj o{};
	ASSERT_EQ(mlx5_qpn_hw_ops.range_reserve(be, 10, &o), 0);
	uint32_t qpn = 0, single = 0;
	ASSERT_EQ(mlx5_qpn_hw_ops.qp_create(be, &qpn), 0);
	ASSERT_EQ(mlx5_qpn_hw_ops.qpn_reserve_one(be, &single), 0);
	mlx5_qpn_uar uar{};
	ASSERT_EQ(mlx5_qpn_hw_ops.uar_map(be, &uar), 0);
	const hwfake::FakeDevice before = fake();

	fflush(nullptr);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		/* The fake's counters are this process's copy: what the child's close did. */
		mlx5_qpn_hw_ops.close(be);
		const hwfake::FakeDevice &d = fake();
		int harm = (d.objs_destroyed - before.objs_destroyed) +
			   (d.qps_destroyed - before.qps_destroyed) +
			   (d.uars_freed - before.uars_freed) + (d.closes - before.closes) +
			   (d.single_calls - before.single_calls) +
			   (d.pds_live != before.pds_live) + (d.cqs_live != before.cqs_live);
		_exit(harm > 100 ? 100 : harm);
	}
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(WEXITSTATUS(status), 0) << "the child destroyed something of the parent's";

	/* The parent still owns everything and gives it back at its own close. */
	EXPECT_EQ(fake().objs_live, 1);
	EXPECT_EQ(fake().qps_live, 1);
	mlx5_qpn_hw_ops.close(be);
	EXPECT_EQ(fake().objs_destroyed, 2); /* the trial object and the range */
	EXPECT_EQ(fake().qps_destroyed, 1);
	EXPECT_EQ(fake().uars_freed, 1);
	EXPECT_EQ(fake().single_calls, before.single_calls + 1);
	EXPECT_EQ(hwfake::live_objects(), 0);
}

/* The generic layer over the fake: reserved_qpn=try on a ConnectX without objects works. */
TEST(HwSource, ProbeTryWithoutObjectsServesOrdinaryQpns)
{
	hwfake::Scope scope;
	fake().bit44 = false;
	fake().guid = 0x0002c90300fa0000ull | static_cast<uint32_t>(getpid() & 0xffff);
	mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe("ib=mlx5_fake,reserved_qpn=try,quarantine_us=0,max_qpns=256",
				     &dev),
		  0);
	mlx5_qpn_dev_info info{};
	ASSERT_EQ(mlx5_qpn_dev_info_get(dev, &info), 0);
	EXPECT_EQ(info.source, MLX5_QPN_SRC_ORDINARY);
	EXPECT_EQ(info.port, MLX5_QPN_HW_DC_PORT); /* the port the probe and the DC objects use */
	uint32_t q = 0;
	ASSERT_EQ(mlx5_qpn_reserved_alloc(dev, &q), 0);
	EXPECT_GE(q, 0x2a0u) << "a QPN of one of the fake's QPs";
	EXPECT_GT(std::atomic_ref<int>(fake().qps_live).load(), 0); /* the control thread grows */
	EXPECT_EQ(mlx5_qpn_reserved_dealloc(dev, q), 0);
	mlx5_qpn_dev_close(dev);
	EXPECT_EQ(hwfake::live_objects(), 0);
	/* Its lease file now: the next Scope resets the GUID that names it. */
	mlx5_qpn_dev_purge("mlx5_fake");

	/* yes on the same device: refused at probe. */
	hwfake::Scope again;
	fake().bit44 = false;
	dev = nullptr;
	EXPECT_EQ(mlx5_qpn_dev_probe("ib=mlx5_fake,reserved_qpn=yes", &dev), -EOPNOTSUPP);
	EXPECT_EQ(dev, nullptr);
	EXPECT_EQ(hwfake::live_objects(), 0);
}

/* mlx5_qpn_dev_fw_qpn_alloc/free on hardware are rdma-core's calls themselves, one each; a
 * double free is refused before libmlx5 sees it; the hardware does not count its commands. */
TEST(HwSource, FwQpnIsMlx5dvReservedQpnAlloc)
{
	hwfake::Scope scope;
	fake().guid = 0x0002c90300f90000ull | static_cast<uint32_t>(getpid() & 0xffff);
	mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe("ib=mlx5_fake,quarantine_us=0,max_qpns=1024", &dev), 0);
	const int before = fake().single_calls;
	uint32_t q = 0;
	ASSERT_EQ(mlx5_qpn_dev_fw_qpn_alloc(dev, &q), 0);
	EXPECT_EQ(fake().single_calls, before + 1);
	EXPECT_EQ(mlx5_qpn_reserved_dealloc(dev, q), -EINVAL); /* not the pool's */
	EXPECT_EQ(mlx5_qpn_dev_fw_qpn_free(dev, q), 0);
	EXPECT_EQ(fake().single_calls, before + 2);
	EXPECT_EQ(mlx5_qpn_dev_fw_qpn_free(dev, q), -EINVAL);
	EXPECT_EQ(fake().single_calls, before + 2);
	mlx5_qpn_dev_stats st;
	ASSERT_EQ(mlx5_qpn_dev_stats_get(dev, &st), 0);
	EXPECT_EQ(st.fw_qpn_allocs, 1u);
	EXPECT_EQ(st.fw_qpn_frees, 1u);
	EXPECT_EQ(st.dev_commands, 0u);
	mlx5_qpn_dev_close(dev);
	EXPECT_EQ(hwfake::live_objects(), 0);
}
