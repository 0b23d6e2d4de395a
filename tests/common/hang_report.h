/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TEST_HANG_REPORT_H
#define QPN_TEST_HANG_REPORT_H

/*
 * What a hung test leaves behind for whoever reads the CI log: where every process of the test
 * was, not only that meson killed it. A CI run once ended with "app-e2e TIMEOUT" after
 * `[ RUN ] AppTest.AppSecondaryClientBesidePrimary` and nothing else: no way to tell which of
 * three processes waited for what. Two users:
 *  - mp_test::Proc::wait(): a child that outlives its deadline is described before it is killed;
 *  - the watchdog (test_main.cpp): a test executable still running at 85 % of its meson timeout
 *    describes itself and its children on stderr, which meson prints for a failed test.
 */
#include <string>
#include <sys/types.h>

namespace test_helpers {

/*
 * The process ROOT and its descendants: for each its command line, state and kernel wait
 * channel, each thread's name, state and wait channel, the kernel stack where readable (root),
 * and every thread's user stack from gdb when gdb is installed (each attach bounded to 30 s;
 * QPN_TEST_GDB=0 turns it off). Never throws; a process that exits meanwhile is skipped.
 */
std::string process_report(pid_t root);

/*
 * Start the watchdog thread, once per process: if this process still runs SECONDS after the
 * call, it prints the test in progress and process_report(getpid()) on stderr (once; it does
 * not end the process: meson's timeout still does). 0: no watchdog.
 */
void start_watchdog(unsigned seconds);

/* For the watchdog: the test in progress ("" between tests). Called by a gtest listener. */
void watchdog_set_test(const std::string &name);

} /* namespace test_helpers */

#endif
