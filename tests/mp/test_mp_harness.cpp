/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The harness of the multi-process and app tests: a child that hangs must end the wait with a
 * description of where it was (common/hang_report.h), not hold the test until meson's timeout.
 */
#include <gtest/gtest.h>

#include <csignal>
#include <string>

#include "mp_test_util.h"

TEST(MpHarness, AHungChildIsDescribedThenKilled)
{
	mp_test::Proc p;
	ASSERT_TRUE(p.start({"/bin/sleep", "1000"}));
	EXPECT_EQ(p.wait(300), -SIGKILL);
	const std::string &out = p.output();
	EXPECT_NE(out.find("still running after 300 ms: killed"), std::string::npos) << out;
	/* The report names the process, its state and its command line. */
	EXPECT_NE(out.find("state S"), std::string::npos) << out;
	EXPECT_NE(out.find("sleep 1000"), std::string::npos) << out;
}

TEST(MpHarness, AChildThatExitsIsReapedWithItsStatus)
{
	mp_test::Proc p;
	ASSERT_TRUE(p.start({"/bin/sh", "-c", "echo done; exit 3"}));
	EXPECT_EQ(p.wait(60000), 3);
	EXPECT_EQ(p.output(), "done\n");
}
