/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TEST_HELPERS_H
#define QPN_TEST_HELPERS_H

/*
 * What the tests that start the built programs share: where those programs are (found from this
 * test executable's own path, so that any build directory works), running one shell command to
 * its end with its output, and reading a file a program wrote (its JSON, its redirected output).
 */
#include <cstdio>
#include <string>

namespace test_helpers {

/* The sanitizer this test executable is built with: GCC says so with __SANITIZE_THREAD__ /
 * __SANITIZE_ADDRESS__, clang through __has_feature. */
#if defined(__SANITIZE_THREAD__)
#define QPN_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define QPN_TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define QPN_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QPN_TEST_ASAN 1
#endif
#endif
#ifdef QPN_TEST_TSAN
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif
#ifdef QPN_TEST_ASAN
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

/*
 * The iteration count of a fuzz or stress loop: N in the plain build, N / TSAN_DIV under
 * ThreadSanitizer and N / ASAN_DIV under AddressSanitizer (at least 1). Why: the plain build's
 * count is chosen for coverage of inputs (random frames, interleavings); a sanitizer build runs
 * the same code 2-3x (ASan) to 10-20x (TSan, every access recorded, at -O0) slower, and what it
 * looks for (a race, a bad access) shows on the first iterations that reach the code, not on
 * the thousandth. The divisor must leave every branch the loop targets reached many times: a
 * test that asserts "each kind seen" keeps its assertion, the count stays large enough for it.
 */
constexpr unsigned
sanitizer_scaled(unsigned n, unsigned tsan_div, unsigned asan_div = 1)
{
	unsigned div = kTsan ? tsan_div : kAsan ? asan_div : 1;
	if (div <= 1 || n == 0)
		return n;
	return n / div > 0 ? n / div : 1;
}

/* The build directory: this executable is <build>/tests/qpn_tests. "" if /proc/self/exe is
 * unreadable. */
std::string build_root();

/* A file of the build directory, REL relative to it (e.g. "app/qpn-testpmd/qpn-testpmd"). */
std::string build_path(const std::string &rel);

/* A file of the source tree, REL relative to its root (e.g. "app/qpn-perf/qpn-perf-report"): the
 * root meson test passes in QPN_TEST_SRCDIR (an environment variable, not a define: a define
 * would put an absolute path in every test source's compile command, and the compiler cache
 * would then miss in a clone in another folder), else the build directory's parent. */
std::string source_path(const std::string &rel);

/* The whole file at PATH ("" if it does not exist or cannot be read). */
std::string slurp(const std::string &path);

/* Run the shell command CMD to its end (popen), its stdout appended to *out (the command
 * redirects stderr and stdin itself). Its exit code, or -1 if it did not exit normally or could
 * not be started. */
int run_cmd(const std::string &cmd, std::string *out);

/* Start the shell command CMD in the background (popen; CMD redirects its own output), its
 * process id in *pid: the shell execs CMD, so a signal to *pid reaches CMD's program (or
 * `timeout --foreground`, which passes SIGINT and SIGTERM on to its program once; plain
 * `timeout` sends it to its process group as well: twice). pclose() waits for it and gives
 * its wait status. nullptr if it could not be started. */
FILE *start_cmd(const std::string &cmd, int *pid);

} /* namespace test_helpers */

#endif
