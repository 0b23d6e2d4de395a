/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd --allocator: the active side's QPNs from ours (the pool, with its quarantine) or
 * from rdma-core's algorithm on the device (mlx5_qpn_dev_fw_qpn_alloc, no quarantine), and
 * --allocator=both with --client-lcores: one launch, every allocator at every count, side by
 * side in the JSON. The built binary runs as a subprocess (as in test_app.cpp) on its own
 * emulated device; counts only, no timing.
 */
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "common/test_helpers.h"
#include "mlx5_qpn.h"

namespace {

/* The number after "key": at or after FROM (-1: none, or not before LIMIT); *at: where. */
double
num_after(const std::string &js, const std::string &key, size_t from,
	  size_t limit = std::string::npos, size_t *at = nullptr)
{
	size_t p = js.find("\"" + key + "\":", from);
	if (p == std::string::npos || p >= limit)
		return -1;
	p += key.size() + 3;
	if (at != nullptr)
		*at = p;
	return std::strtod(js.c_str() + p, nullptr);
}

class TestpmdAllocator : public ::testing::Test {
protected:
	void SetUp() override
	{
		app_ = test_helpers::build_path("app/qpn-testpmd/qpn-testpmd");
		ASSERT_EQ(access(app_.c_str(), X_OK), 0) << "qpn-testpmd not built at " << app_;
		static unsigned n;
		name_ = "sim_al" + std::to_string(getpid()) + "_" + std::to_string(n++);
		json_ = ::testing::TempDir() + "qpn_alloc_" + name_ + ".json";
	}

	void TearDown() override
	{
		mlx5_qpn_dev_purge(name_.c_str()); /* -ENOENT when --destroy-sim did it */
		std::remove(json_.c_str());
	}

	/* One run on the lcores of EAL with the device NAME_ + DEVARGS and OPTS: its exit status,
	 * its output in *out, its JSON in *js. */
	int run(const std::string &eal, const std::string &devargs, const std::string &opts,
		std::string *out, std::string *js)
	{
		std::remove(json_.c_str());
		const std::string c =
			"timeout --foreground -k 5 120 " + app_ + " --no-huge --no-pci -m 256 " +
			eal + " --file-prefix=" + name_ +
			" --log-level=lib.eal:error -- --qpn-dev=" + name_ + devargs + " " + opts +
			" --stats-period=0 --json=" + json_ + " < /dev/null 2>&1";
		int rc = test_helpers::run_cmd(c, out);
		*js = test_helpers::slurp(json_);
		return rc;
	}

	std::string app_, name_, json_;
};

const char *const kRowFields[] = {
	"client_lcores",
	"seconds",
	"connections",
	"allocations",
	"conn_per_sec",
	"alloc_p50_ns",
	"alloc_p99_ns",
	"alloc_p999_ns",
	"cycle_p99_ns",
	"stale_rejects",
	"alloc_waits",
	"errors",
	"device_commands",
	"commands_per_1000_conns",
	"commands_per_1000_allocs",
};

} // namespace

/* --allocator=both --client-lcores=1,2: both sections, a row per count with every field, ours
 * with connections and not one stale reject. (The first-fit firmware gives rdma-core's blocks
 * back at once; whether that shows as stale rejects in a short run is the next test's.) */
TEST_F(TestpmdAllocator, AppAllocatorBothWritesBothSections)
{
	std::string out, js;
	int rc = run(
		"--lcores='(0-3)@(0-1)'", ",fw_first_fit=1",
		"--allocator=both --client-lcores=1,2 --duration=0.4 --idle-yield --destroy-sim",
		&out, &js);
	EXPECT_EQ(rc, 0) << out;
	ASSERT_FALSE(js.empty()) << out;
	EXPECT_NE(js.find("\"mode\": \"allocator-compare\""), std::string::npos) << js;
	EXPECT_NE(js.find("\"conditions\": {"), std::string::npos) << js;
	const size_t ours = js.find("\"ours\": [");
	const size_t rdma = js.find("\"rdma-core\": [");
	ASSERT_NE(ours, std::string::npos) << js;
	ASSERT_NE(rdma, std::string::npos) << js;
	ASSERT_LT(ours, rdma);
	for (size_t sec : {ours, rdma}) {
		const size_t end = sec == ours ? rdma : js.size();
		size_t at = sec;
		for (unsigned count : {1u, 2u}) {
			size_t row = js.find("\"client_lcores\":", at);
			ASSERT_LT(row, end) << "no row for " << count << " in " << js;
			EXPECT_EQ(num_after(js, "client_lcores", row), count) << js;
			for (const char *f : kRowFields)
				EXPECT_GE(num_after(js, f, row, end), 0) << f << " " << js;
			if (sec == ours) {
				EXPECT_GT(num_after(js, "connections", row), 0) << js;
				EXPECT_EQ(num_after(js, "stale_rejects", row), 0) << js;
				EXPECT_EQ(num_after(js, "errors", row), 0) << js;
			} else {
				EXPECT_GT(num_after(js, "allocations", row), 0) << js;
			}
			at = row + 1;
		}
		const size_t extra = js.find("\"client_lcores\":", at);
		EXPECT_TRUE(extra == std::string::npos || extra >= end) << "a third row: " << js;
	}
	EXPECT_NE(out.find("allocators side by side"), std::string::npos) << out;
}

/* rdma-core's algorithm has no quarantine: on the first-fit firmware, blocks of one QPN
 * (log_gran=0), a QPN freed is the next one handed out, and the server's CM, which holds
 * (client GUID, QPN) through a 1 s timewait (strict), rejects the next REQ with it as
 * STALE_CONN. The reuse distance (0 allocations) is shorter than the timewait whatever the
 * machine's speed: 40 connections started one at a time give stale rejects. The same run with
 * ours gives none (its quarantine is the timewait). */
TEST_F(TestpmdAllocator, AppAllocatorRdmaCoreGivesStaleRejects)
{
	const std::string dev = ",fw_first_fit=1,log_gran=0,log_max_alloc=6,max_qpns=64";
	const std::string opts = "--connections=40 --inflight=1 --cm-plt=16 --cm-ack-delay=16 "
				 "--cm-policy=strict --duration=30 --destroy-sim";
	std::string out, js;
	EXPECT_EQ(run("-l 0-1", dev, "--allocator=rdma-core " + opts, &out, &js), 0) << out;
	ASSERT_FALSE(js.empty()) << out;
	EXPECT_NE(js.find("\"allocator\": \"rdma-core\""), std::string::npos) << js;
	EXPECT_GT(num_after(js, "stale_rejects", 0), 0) << js;
	EXPECT_GT(num_after(js, "stale_rejects_sent", 0), 0) << js;
	EXPECT_EQ(num_after(js, "other", js.find("\"errors\": {")), 0) << out;

	EXPECT_EQ(run("-l 0-1", dev, "--allocator=ours " + opts, &out, &js), 0) << out;
	ASSERT_FALSE(js.empty()) << out;
	EXPECT_NE(js.find("\"allocator\": \"ours\""), std::string::npos) << js;
	EXPECT_GT(num_after(js, "connections", 0), 0) << js;
	EXPECT_EQ(num_after(js, "stale_rejects", 0), 0) << js;
}

/* Refused at start-up, one line each, exit 2. */
TEST_F(TestpmdAllocator, AppAllocatorOptionsRefused)
{
	const struct {
		const char *opts, *says;
	} cases[] = {
		{"--allocator=glibc", "bad value for --allocator: \"glibc\""},
		{"--allocator=rdma-core --engine=alloc", "--allocator=rdma-core applies to"},
		{"--allocator=both -i", "batch mode, --role=both only"},
		{"--client-lcores=0", "bad value for --client-lcores: \"0\""},
		{"--client-lcores=1,,2", "bad value for --client-lcores"},
		{"--client-lcores=-1", "bad value for --client-lcores"},
		{"--client-lcores=1,2,x", "bad value for --client-lcores"},
	};
	for (const auto &c : cases) {
		std::string out, js;
		EXPECT_EQ(run("-l 0", "", c.opts, &out, &js), 2) << c.opts << ": " << out;
		EXPECT_NE(out.find(c.says), std::string::npos) << c.opts << ": " << out;
	}
}
