/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TEST_HELPERS_H
#define QPN_TEST_HELPERS_H

/*
 * What the tests that start the built programs share: where those programs are (found from this
 * test executable's own path, so that any build directory works), running one shell command to
 * its end with its output, and reading a file a program wrote (its JSON, its redirected output).
 */
#include <string>

namespace test_helpers {

/* The build directory: this executable is <build>/tests/qpn_tests. "" if /proc/self/exe is
 * unreadable. */
std::string build_root();

/* A file of the build directory, REL relative to it (e.g. "app/qpn-testpmd/qpn-testpmd"). */
std::string build_path(const std::string &rel);

/* The whole file at PATH ("" if it does not exist or cannot be read). */
std::string slurp(const std::string &path);

/* Run the shell command CMD to its end (popen), its stdout appended to *out (the command
 * redirects stderr and stdin itself). Its exit code, or -1 if it did not exit normally or could
 * not be started. */
int run_cmd(const std::string &cmd, std::string *out);

} /* namespace test_helpers */

#endif
