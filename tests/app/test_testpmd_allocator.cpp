/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd --allocator: the active side's QPNs from ours (the pool, with its quarantine) or
 * from rdma-core's algorithm on the device (mlx5_qpn_dev_fw_qpn_alloc, no quarantine), and
 * --allocator=both with --client-lcores: one launch, every allocator at every count, side by
 * side in the JSON; --allocator-sweep over the device's conditions; qpn-perf-report's pages of
 * both. The built binary runs as a subprocess (as in test_app.cpp) on its own emulated device;
 * counts only, no timing.
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

	/* qpn-perf-report on the JSON: its exit status; index.html in *html. */
	int report(std::string *html)
	{
		const std::string dir = ::testing::TempDir() + "qpn_report_" + name_;
		std::string out;
		int rc = test_helpers::run_cmd(test_helpers::source_path(
						       "app/qpn-perf/qpn-perf-report") +
						       " " + json_ + " " + dir + " 2>&1",
					       &out);
		*html = test_helpers::slurp(dir + "/index.html");
		std::system(("rm -rf '" + dir + "'").c_str());
		return rc;
	}

	std::string app_, name_, json_;
};

/* How many times NEEDLE occurs in HAY. */
size_t
count_of(const std::string &hay, const std::string &needle)
{
	size_t n = 0;
	for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1))
		n++;
	return n;
}

const char *const kRowFields[] = {
	"client_lcores",
	"client_lcores_asked",
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
		{"--allocator-sweep=2,x", "bad value for --allocator-sweep: \"2,x\""},
		{"--allocator-sweep=2 --client-lcores=1",
		 "--allocator-sweep: it runs on every client"},
		{"--allocator-sweep=2 -i", "batch mode, --role=both only"},
		{"--allocator-sweep=2 --engine=dct-accept", "--allocator-sweep: it applies to"},
	};
	for (const auto &c : cases) {
		std::string out, js;
		EXPECT_EQ(run("-l 0", "", c.opts, &out, &js), 2) << c.opts << ": " << out;
		EXPECT_NE(out.find(c.says), std::string::npos) << c.opts << ": " << out;
	}
	std::string out, js;
	EXPECT_EQ(run("-l 0", ",slow_cmd_us=3", "--allocator-sweep=2", &out, &js), 2) << out;
	EXPECT_NE(out.find("--allocator-sweep: it sets the devargs slow_cmd_us"), std::string::npos)
		<< out;
}

/* Two lcores (one client that co-polls the server): --client-lcores=1,2 gets one client lcore
 * for both counts. That is said before the first run; the two pairs stay two pairs (a ratio
 * line each, not one per row of either allocator with the same lcore count); every row records
 * the count asked for beside the count it got; the report's table beside its conns/s plot has
 * both pairs. */
TEST_F(TestpmdAllocator, AppAllocatorCountsMatchedByPair)
{
	std::string out, js;
	int rc = run("-l 0-1", "",
		     "--allocator=both --client-lcores=1,2 --duration=0.3 --destroy-sim", &out,
		     &js);
	EXPECT_EQ(rc, 0) << out;
	ASSERT_FALSE(js.empty()) << out;
	const size_t said = out.find("--client-lcores=2 runs on 1 client lcore(s)");
	const size_t first_run = out.find("qpn-testpmd: allocator ours");
	ASSERT_NE(said, std::string::npos) << out;
	ASSERT_NE(first_run, std::string::npos) << out;
	EXPECT_LT(said, first_run) << "said after the run: " << out;
	EXPECT_EQ(count_of(out, "ours / rdma-core conns/s"), 2u) << out;
	EXPECT_EQ(count_of(out, "  1 client lcore(s): ours / rdma-core"), 1u) << out;
	EXPECT_EQ(count_of(out, "  1 of 2 client lcore(s): ours / rdma-core"), 1u) << out;
	const size_t rdma = js.find("\"rdma-core\": [");
	ASSERT_NE(rdma, std::string::npos) << js;
	for (size_t sec : {js.find("\"ours\": ["), rdma}) {
		size_t row = js.find("\"client_lcores\":", sec);
		for (unsigned asked : {1u, 2u}) {
			ASSERT_NE(row, std::string::npos) << js;
			EXPECT_EQ(num_after(js, "client_lcores", row), 1) << js;
			EXPECT_EQ(num_after(js, "client_lcores_asked", row), asked) << js;
			row = js.find("\"client_lcores\":", row + 1);
		}
	}
	std::string html;
	ASSERT_EQ(report(&html), 0);
	const size_t conns = html.find("cmp_conns.png");
	ASSERT_NE(conns, std::string::npos) << html;
	const size_t next = html.find("<img", conns);
	const std::string panel = html.substr(conns, next - conns);
	EXPECT_NE(panel.find("<tr><td>1</td>"), std::string::npos) << panel;
	EXPECT_NE(panel.find("<tr><td>2 (ran 1)</td>"), std::string::npos) << panel;
}

/* --allocator-sweep=0,5: both allocators at every point (2 command latencies x 2 reuse
 * orders x 2 timewaits), each point on devices with its slow_cmd_us and fw_first_fit; one
 * JSON, and qpn-perf-report's ratio plot with every point in its table. */
TEST_F(TestpmdAllocator, AppAllocatorSweepRunsEveryPoint)
{
	std::string out, js;
	int rc = run("-l 0-1", "", "--allocator-sweep=0,5 --duration=0.2 --destroy-sim", &out, &js);
	EXPECT_EQ(rc, 0) << out;
	ASSERT_FALSE(js.empty()) << out;
	EXPECT_NE(js.find("\"mode\": \"allocator-sweep\""), std::string::npos) << js;
	EXPECT_EQ(count_of(js, "\"cmd_us\":"), 8u) << js;
	EXPECT_EQ(count_of(js, "\"fw_order\": \"first-fit\""), 4u) << js;
	EXPECT_EQ(count_of(js, "\"fw_order\": \"next-available\""), 4u) << js;
	EXPECT_EQ(count_of(js, "\"timewait_ms\": 16,"), 4u) << js;
	EXPECT_EQ(count_of(js, "\"timewait_ms\": 1024,"), 4u) << js;
	size_t at = js.find("\"points\": [");
	ASSERT_NE(at, std::string::npos) << js;
	for (unsigned i = 0; i < 8; i++) {
		const size_t pt = js.find("\"cmd_us\":", at);
		ASSERT_NE(pt, std::string::npos) << js;
		const size_t end = js.find("\"cmd_us\":", pt + 1);
		const size_t ours = js.find("\"ours\": {", pt);
		const size_t rdma = js.find("\"rdma-core\": {", pt);
		ASSERT_LT(ours, end) << js;
		ASSERT_LT(rdma, end) << js;
		EXPECT_GE(num_after(js, "ratio_conn_per_sec", pt, end), 0) << js;
		EXPECT_GT(num_after(js, "connections", ours, rdma), 0) << js;
		EXPECT_EQ(num_after(js, "stale_rejects", ours, rdma), 0) << js;
		EXPECT_GT(num_after(js, "allocations", rdma, end), 0) << js;
		for (const char *f : kRowFields) {
			EXPECT_GE(num_after(js, f, ours, rdma), 0) << f << " " << js;
			EXPECT_GE(num_after(js, f, rdma, end), 0) << f << " " << js;
		}
		at = pt + 1;
	}
	EXPECT_NE(out.find("over the device's conditions"), std::string::npos) << out;
	std::string html;
	ASSERT_EQ(report(&html), 0);
	EXPECT_NE(html.find("sweep_ratio.png"), std::string::npos) << html;
	EXPECT_EQ(count_of(html, "<td>first-fit</td>"), 4u) << html;
	EXPECT_EQ(count_of(html, "<td>next-available</td>"), 4u) << html;
}
