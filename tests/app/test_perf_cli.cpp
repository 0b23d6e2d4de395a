/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf as a DPDK user meets it: -h, its usage line, --scaling (and the old --lcores=on|off,
 * taken with a deprecation line; any other --lcores value is the EAL's map, refused), the
 * instructions column and the latency table without --count=instructions, the aims of a run
 * too short to quote, and qpn-perf-report's page of such a run. The built binary runs as a
 * subprocess; output only, no timing.
 */
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "common/test_helpers.h"

namespace {

class PerfCli : public ::testing::Test {
protected:
	void SetUp() override
	{
		perf_ = test_helpers::build_path("app/qpn-perf/qpn-perf");
		ASSERT_EQ(access(perf_.c_str(), X_OK), 0) << "qpn-perf not built at " << perf_;
		json_ = ::testing::TempDir() + "qpn_perf_cli_" + std::to_string(getpid()) + ".json";
	}

	void TearDown() override { std::remove(json_.c_str()); }

	/* qpn-perf on one lcore with OPTS after "--": its exit status, its output in *out. */
	int run(const std::string &opts, std::string *out)
	{
		const std::string c = "timeout --foreground -k 5 120 " + perf_ +
				      " --no-huge --no-pci -m 512 -l 0 --file-prefix=perfcli" +
				      std::to_string(getpid()) + " --log-level=lib.eal:error -- " +
				      opts + " < /dev/null 2>&1";
		return test_helpers::run_cmd(c, out);
	}

	std::string perf_, json_;
};

/* The line of OUT that starts with PREFIX (after spaces), or "". */
std::string
line_of(const std::string &out, const std::string &prefix)
{
	size_t p = 0;
	while (p < out.size()) {
		size_t e = out.find('\n', p);
		if (e == std::string::npos)
			e = out.size();
		std::string l = out.substr(p, e - p);
		if (l.find_first_not_of(' ') != std::string::npos &&
		    l.compare(l.find_first_not_of(' '), prefix.size(), prefix) == 0)
			return l;
		p = e + 1;
	}
	return "";
}

} // namespace

/* -h is --help, as in every DPDK app; the usage names the program, not the path it ran by. */
TEST_F(PerfCli, PerfHelpShortOptionAndName)
{
	std::string out;
	EXPECT_EQ(run("-h", &out), 0) << out;
	EXPECT_NE(out.find("usage: qpn-perf [EAL options] -- [options]"), std::string::npos) << out;
	EXPECT_EQ(out.find("usage: /"), std::string::npos) << out;
	EXPECT_NE(out.find("--scaling=on|off"), std::string::npos) << out;
	EXPECT_EQ(out.find("--lcores=on|off"), std::string::npos)
		<< "old spelling offered: " << out;
}

/* --lcores is the EAL's lcore map: after "--" a map is refused with a line saying where it
 * goes; on|off, the old spelling of --scaling, is taken with a deprecation line. */
TEST_F(PerfCli, PerfLcoresIsTheEals)
{
	std::string out;
	EXPECT_EQ(run("--lcores=0-1", &out), 2) << out;
	EXPECT_NE(out.find("qpn-perf: bad value for --lcores: \"0-1\" (the EAL's lcore map goes "
			   "before \"--\"; the scaling runs are --scaling=on|off)"),
		  std::string::npos)
		<< out;
	EXPECT_EQ(run("--lcores=off --help", &out), 0) << out;
	EXPECT_NE(out.find("qpn-perf: --lcores=off is deprecated, use --scaling=off"),
		  std::string::npos)
		<< out;
}

/* A run without --count=instructions: its instructions column says "-", not 0.0; the
 * latency table gives each figure with its unit; the aims of one repetition say they are not
 * figures to quote, and the aims whose peers did not run say "not measured" (the text and
 * qpn-perf-report's page, which shows no 0.000 for them). */
TEST_F(PerfCli, PerfShortRunSaysWhatItDidNotMeasure)
{
	std::string out;
	ASSERT_EQ(run("--quick --only=qpnpool,mempool --scaling=off --repeat=1 --burst=0 --json=" +
			      json_,
		      &out),
		  0)
		<< out;
	const std::string pair = line_of(out, "qpnpool ");
	ASSERT_FALSE(pair.empty()) << out;
	EXPECT_EQ(pair.substr(pair.find_last_not_of(' ')), "-") << pair;
	EXPECT_EQ(out.find(" 0.0\n"), std::string::npos) << out;
	const std::string lat = line_of(out, "qpnpool    alloc");
	ASSERT_FALSE(lat.empty()) << out;
	EXPECT_TRUE(lat.find("ns") != std::string::npos || lat.find("us") != std::string::npos)
		<< lat;
	EXPECT_NE(out.find("not figures to quote: 1 repetition (a median needs 3 or more)"),
		  std::string::npos)
		<< out;
	EXPECT_NE(out.find("not measured (a peer it needs did not run: see --only)"),
		  std::string::npos)
		<< out;

	const std::string dir = ::testing::TempDir() + "qpn_perf_cli_" + std::to_string(getpid());
	std::string rep;
	ASSERT_EQ(test_helpers::run_cmd(test_helpers::source_path("app/qpn-perf/qpn-perf-report") +
						" " + json_ + " " + dir + " 2>&1",
					&rep),
		  0)
		<< rep;
	const std::string html = test_helpers::slurp(dir + "/index.html");
	std::system(("rm -rf '" + dir + "'").c_str());
	const size_t aims = html.find("id=\"aims\"");
	ASSERT_NE(aims, std::string::npos) << html;
	const std::string sec = html.substr(aims, html.find("<h2", aims + 1) - aims);
	EXPECT_NE(sec.find("Not figures to quote: 1 repetition"), std::string::npos) << sec;
	EXPECT_NE(sec.find("<td>not measured</td>"), std::string::npos) << sec;
	EXPECT_EQ(sec.find("<td>0.000</td>"), std::string::npos) << sec;
	EXPECT_EQ(sec.find(">met<"), std::string::npos) << "a verdict of one repetition: " << sec;
}
