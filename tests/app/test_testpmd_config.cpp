/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd's `show config` at the prompt prints every run parameter (cli.cpp's contract):
 * those the prompt can `set` and those fixed at start (--allocator, --client-lcores,
 * --destroy-sim, the hardware options), and the lcores: the main one, the workers, and which of
 * them the last start made client and server lcores. The built binary runs as a subprocess (as
 * in test_app.cpp), its input a file; only its output is checked.
 */
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

#include "common/test_helpers.h"
#include "mlx5_qpn.h"

namespace {

class TestpmdConfig : public ::testing::Test {
protected:
	void SetUp() override
	{
		app_ = test_helpers::build_path("app/qpn-testpmd/qpn-testpmd");
		ASSERT_EQ(access(app_.c_str(), X_OK), 0) << "qpn-testpmd not built at " << app_;
		static unsigned n;
		name_ = "sim_cf" + std::to_string(getpid()) + "_" + std::to_string(n++);
		in_ = ::testing::TempDir() + "qpn_cfg_" + name_ + ".in";
	}

	void TearDown() override
	{
		mlx5_qpn_dev_purge(name_.c_str()); /* -ENOENT when --destroy-sim did it */
		std::remove(in_.c_str());
	}

	/* The prompt on lcores EAL with OPTS, fed INPUT: its output (stdout and stderr). */
	std::string prompt(const std::string &eal, const std::string &opts,
			   const std::string &input)
	{
		std::ofstream(in_) << input;
		const std::string c =
			"timeout --foreground -k 5 60 " + app_ + " --no-huge --no-pci -m 256 " +
			eal + " --file-prefix=" + name_ +
			" --log-level=lib.eal:error -- --qpn-dev=" + name_ +
			",max_qpns=4096 -i --destroy-sim " + opts + " < " + in_ + " 2>&1";
		std::string out;
		EXPECT_EQ(test_helpers::run_cmd(c, &out), 0) << out;
		return out;
	}

	std::string app_, name_, in_;
};

/* The line of one parameter in `show config`'s output: "  NAME<pad> VALUE". */
std::string
line(const std::string &name, const std::string &value)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "  %-14s %s\n", name.c_str(), value.c_str());
	return buf;
}

} // namespace

/* The parameters fixed at start are shown as given, beside those the prompt sets. */
TEST_F(TestpmdConfig, ShowsTheParametersFixedAtStart)
{
	const std::string out =
		prompt("-l 0-1",
		       "--allocator=rdma-core --hw-port=18600 --hw-peer=10.0.0.2:18515 "
		       "--hw-bind=10.0.0.1 --server-lcores=1",
		       "show config\nquit\n");
	for (const std::string &l :
	     {line("allocator", "rdma-core"),
	      line("client-lcores", "(every client lcore of the layout)"),
	      line("destroy-sim", "on"), line("hw-peer", "10.0.0.2:18515"),
	      line("hw-port", "18600"), line("hw-bind", "10.0.0.1"), line("server-lcores", "1")})
		EXPECT_NE(out.find(l), std::string::npos) << l << "\n" << out;
}

/* The defaults of those parameters, as the options give them. */
TEST_F(TestpmdConfig, ShowsTheirDefaults)
{
	const std::string out = prompt("-l 0-1", "", "show config\nquit\n");
	for (const std::string &l :
	     {line("allocator", "ours"), line("hw-peer", "(none)"), line("hw-port", "18515"),
	      line("hw-bind", "(the device's netdev)")})
		EXPECT_NE(out.find(l), std::string::npos) << l << "\n" << out;
}

/* The lcores: before a start the workers only; after one, its client and server lcores (two
 * workers: the last one serves, the first is the client; three lcores on this VM's two CPUs). */
TEST_F(TestpmdConfig, ShowsTheClientAndServerLcores)
{
	const std::string out = prompt("--lcores=0@0,1@1,2@1", "--connections=20",
				       "show config\nstart\nstop\nshow config\nquit\n");
	const std::string lcores = line("lcores", "main 0 (the prompt), workers 1,2");
	const size_t first = out.find(lcores);
	ASSERT_NE(first, std::string::npos) << out;
	EXPECT_NE(out.find(line("roles", "(client and server lcores are assigned at start)")),
		  std::string::npos)
		<< out;
	const size_t second = out.find(lcores, first + 1);
	ASSERT_NE(second, std::string::npos) << out;
	EXPECT_NE(out.find(line("roles", "client lcores 1, server lcores 2 (the last start's)"),
			   second),
		  std::string::npos)
		<< out;
}
