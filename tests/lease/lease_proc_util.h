/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTS_LEASE_PROC_UTIL_H
#define QPN_TESTS_LEASE_PROC_UTIL_H

/* The lease tests' second (and third) process: lease_helper, spawned with pipes on its stdin
 * and stdout (lease_helper.cpp says what it prints and obeys). */

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace leasetest {

inline std::string
helper_path()
{
	char buf[4096];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0)
		return "";
	buf[n] = '\0';
	std::string s(buf);
	return s.substr(0, s.rfind('/')) + "/lease/lease_helper";
}

/* A lease_helper process: its stdin and stdout are pipes. */
struct Helper {
	pid_t pid = -1;
	FILE *out = nullptr; /* its stdout */
	int in = -1;         /* its stdin */
	std::vector<uint32_t> held, released;

	bool start(const std::string &devargs, unsigned nalloc, unsigned nrel)
	{
		int up[2], down[2];
		if (pipe(up) != 0 || pipe(down) != 0)
			return false;
		std::string path = helper_path();
		std::string na = std::to_string(nalloc), nr = std::to_string(nrel);
		pid = fork();
		if (pid < 0)
			return false;
		if (pid == 0) {
			dup2(down[0], 0);
			dup2(up[1], 1);
			close(up[0]);
			close(up[1]);
			close(down[0]);
			close(down[1]);
			execl(path.c_str(), path.c_str(), devargs.c_str(), na.c_str(), nr.c_str(),
			      (char *)nullptr);
			_exit(127);
		}
		close(up[1]);
		close(down[0]);
		in = down[1];
		out = fdopen(up[0], "r");
		char line[128];
		while (out != nullptr && fgets(line, sizeof(line), out) != nullptr) {
			unsigned q;
			if (sscanf(line, "H %u", &q) == 1)
				held.push_back(q);
			else if (sscanf(line, "R %u", &q) == 1)
				released.push_back(q);
			else if (strncmp(line, "READY", 5) == 0)
				return true;
			else
				break;
		}
		return false;
	}
	bool close_dev()
	{
		if (write(in, "close\n", 6) != 6)
			return false;
		int st = 0;
		return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
		       (pid = -1, true);
	}
	bool kill9()
	{
		if (kill(pid, SIGKILL) != 0)
			return false;
		int st = 0;
		bool ok = waitpid(pid, &st, 0) == pid && WIFSIGNALED(st);
		pid = -1;
		return ok;
	}
	~Helper()
	{
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, nullptr, 0);
		}
		if (out != nullptr)
			fclose(out);
		if (in >= 0)
			close(in);
	}
};

} // namespace leasetest

#endif /* QPN_TESTS_LEASE_PROC_UTIL_H */
