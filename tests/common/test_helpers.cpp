/* SPDX-License-Identifier: BSD-3-Clause */
#include "test_helpers.h"

#include <climits>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace test_helpers {

std::string
build_root()
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0)
		return "";
	buf[n] = '\0';
	std::string dir(buf);
	dir.resize(dir.rfind('/')); /* <build>/tests */
	dir.resize(dir.rfind('/')); /* <build> */
	return dir;
}

std::string
build_path(const std::string &rel)
{
	std::string p = build_root();
	p.append("/").append(rel);
	return p;
}

std::string
source_path(const std::string &rel)
{
	const char *env = getenv("QPN_TEST_SRCDIR");
	std::string p = env && *env ? std::string(env) : build_root() + "/..";
	p.append("/").append(rel);
	return p;
}

std::string
slurp(const std::string &path)
{
	std::ifstream f(path);
	std::stringstream ss;
	ss << f.rdbuf();
	return ss.str();
}

int
run_cmd(const std::string &cmd, std::string *out)
{
	FILE *p = popen(cmd.c_str(), "r");
	if (p == nullptr)
		return -1;
	char buf[4096];
	size_t got;
	while ((got = fread(buf, 1, sizeof(buf), p)) > 0)
		out->append(buf, got);
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

FILE *
start_cmd(const std::string &cmd, int *pid)
{
	/* The shell prints its pid and execs the command: that pid is the command's. */
	FILE *p = popen(("echo $$; exec " + cmd).c_str(), "r");
	if (p == nullptr)
		return nullptr;
	if (fscanf(p, "%d", pid) != 1) {
		pclose(p);
		return nullptr;
	}
	return p;
}

} /* namespace test_helpers */
