/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test main: initialises DPDK EAL once (no hugepages, no PCI, a file prefix of its own so that
 * test processes never share runtime state) and runs GoogleTest.
 * Extra EAL arguments can be given in QPN_TEST_EAL_ARGS (space separated).
 *
 * The watchdog (common/hang_report.h): meson gives each test area QPN_TEST_WATCHDOG_S, 85 % of
 * its timeout; the test command multiplies it by QPN_TEST_TIMEOUT_MULT, as it does the timeouts
 * of the sanitizer builds. A hung area then reports where each of its processes waits.
 */
#include <gtest/gtest.h>

#include "common/hang_report.h"

#include <rte_eal.h>
#include <rte_lcore.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

/* Tells the watchdog which test is running. */
class WatchdogListener : public ::testing::EmptyTestEventListener {
	void OnTestStart(const ::testing::TestInfo &t) override
	{
		test_helpers::watchdog_set_test(std::string(t.test_suite_name()) + "." + t.name());
	}
	void OnTestEnd(const ::testing::TestInfo &) override
	{
		test_helpers::watchdog_set_test("");
	}
};

unsigned
env_unsigned(const char *name, unsigned dflt)
{
	const char *v = std::getenv(name);
	char *end;
	unsigned long n = v != nullptr ? std::strtoul(v, &end, 10) : 0;
	return v != nullptr && *v != '\0' && *end == '\0' && n < 100000 ? unsigned(n) : dflt;
}

} // namespace

int
main(int argc, char **argv)
{
	::testing::InitGoogleTest(&argc, argv);
	::testing::UnitTest::GetInstance()->listeners().Append(new WatchdogListener);
	test_helpers::start_watchdog(env_unsigned("QPN_TEST_WATCHDOG_S", 0) *
				     env_unsigned("QPN_TEST_TIMEOUT_MULT", 1));

	std::string prefix = "--file-prefix=qpn_test_" + std::to_string(getpid());
	std::vector<std::string> eal_args = {argv[0], "--no-huge", "--no-pci",
					     "-m",    "512",       "-l",
					     "0-1",   prefix,      "--log-level=lib.eal:error"};
	if (const char *extra = std::getenv("QPN_TEST_EAL_ARGS")) {
		std::string s(extra);
		size_t pos = 0;
		while (pos < s.size()) {
			size_t end = s.find(' ', pos);
			if (end == std::string::npos)
				end = s.size();
			if (end > pos)
				eal_args.push_back(s.substr(pos, end - pos));
			pos = end + 1;
		}
	}
	std::vector<char *> eal_argv;
	for (auto &a : eal_args)
		eal_argv.push_back(a.data());
	if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
		std::fprintf(stderr, "qpn_tests: rte_eal_init failed\n");
		return 1;
	}
	int rc = RUN_ALL_TESTS();
	rte_eal_cleanup();
	return rc;
}
