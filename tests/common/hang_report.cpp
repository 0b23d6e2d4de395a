/* SPDX-License-Identifier: BSD-3-Clause */
#include "common/hang_report.h"
#include "common/test_helpers.h"

#include <dirent.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace test_helpers {

namespace {

/* /proc/<id>/stat: "pid (comm) S ppid ...", comm may hold spaces and parentheses. */
bool
parse_stat(const std::string &stat, char *state, long *ppid)
{
	size_t r = stat.rfind(')');
	if (r == std::string::npos || r + 2 >= stat.size())
		return false;
	return sscanf(stat.c_str() + r + 2, "%c %ld", state, ppid) == 2;
}

std::vector<pid_t>
descendants(pid_t root)
{
	std::multimap<long, pid_t> children;
	if (DIR *d = opendir("/proc")) {
		while (struct dirent *e = readdir(d)) {
			char *end;
			long pid = strtol(e->d_name, &end, 10);
			char st;
			long ppid;
			if (*end == '\0' && pid > 0 &&
			    parse_stat(slurp(std::string("/proc/") + e->d_name + "/stat"), &st,
				       &ppid))
				children.emplace(ppid, pid_t(pid));
		}
		closedir(d);
	}
	std::vector<pid_t> out{root};
	for (size_t i = 0; i < out.size(); i++) {
		auto [b, e] = children.equal_range(out[i]);
		for (auto it = b; it != e; ++it)
			out.push_back(it->second);
	}
	return out;
}

std::string
trim(std::string s)
{
	while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
		s.pop_back();
	return s;
}

std::string
gdb_stacks(pid_t pid)
{
	const char *g = getenv("QPN_TEST_GDB");
	if ((g != nullptr && strcmp(g, "0") == 0) || access("/usr/bin/gdb", X_OK) != 0)
		return "    (no gdb: user stacks not shown)\n";
	std::string cmd = "timeout 30 /usr/bin/gdb -nx -batch -p " + std::to_string(pid) +
			  " -ex 'set pagination off' -ex 'thread apply all bt 25' 2>&1 </dev/null";
	std::string out;
	if (FILE *p = popen(cmd.c_str(), "r")) {
		char line[1024];
		while (fgets(line, sizeof(line), p) != nullptr)
			if (line[0] == '#' || strncmp(line, "Thread ", 7) == 0)
				out += std::string("    ") + line;
		pclose(p);
	}
	return out.empty() ? "    (gdb could not attach)\n" : out;
}

std::mutex g_test_mutex;
std::string g_test;

} // namespace

std::string
process_report(pid_t root)
{
	std::ostringstream o;
	for (pid_t pid : descendants(root)) {
		std::string dir = "/proc/" + std::to_string(pid);
		char st = '?';
		long ppid = 0;
		if (!parse_stat(slurp(dir + "/stat"), &st, &ppid))
			continue; /* gone meanwhile */
		std::string cmd = slurp(dir + "/cmdline").substr(0, 400);
		for (char &c : cmd)
			if (c == '\0')
				c = ' ';
		o << "  process " << pid << " (parent " << ppid << ") state " << st << " wchan "
		  << trim(slurp(dir + "/wchan")) << ": " << trim(cmd) << "\n";
		if (DIR *d = opendir((dir + "/task").c_str())) {
			while (struct dirent *e = readdir(d)) {
				if (e->d_name[0] == '.')
					continue;
				std::string t = dir + "/task/" + e->d_name;
				char ts = '?';
				long tp;
				parse_stat(slurp(t + "/stat"), &ts, &tp);
				o << "    thread " << e->d_name << " '" << trim(slurp(t + "/comm"))
				  << "' state " << ts << " wchan " << trim(slurp(t + "/wchan"))
				  << "\n";
				std::string ks = trim(slurp(t + "/stack"));
				if (!ks.empty() && ts == 'D') /* where an unkillable wait sits */
					o << "      kernel: " << ks << "\n";
			}
			closedir(d);
		}
		o << gdb_stacks(pid);
	}
	return o.str();
}

void
watchdog_set_test(const std::string &name)
{
	std::lock_guard<std::mutex> g(g_test_mutex);
	g_test = name;
}

void
start_watchdog(unsigned seconds)
{
	static std::once_flag once;
	if (seconds == 0)
		return;
	std::call_once(once, [seconds] {
		/* gdb, our child, may attach to us under Yama's ptrace_scope=1 too. */
		prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
		std::thread([seconds] {
			std::this_thread::sleep_for(std::chrono::seconds(seconds));
			std::string test;
			{
				std::lock_guard<std::mutex> g(g_test_mutex);
				test = g_test;
			}
			std::string r = process_report(getpid());
			fprintf(stderr,
				"qpn_tests: watchdog: still running after %u s (test in progress: "
				"%s); this process and its children:\n%s",
				seconds, test.empty() ? "none" : test.c_str(), r.c_str());
			fflush(stderr);
		}).detach();
	});
}

} /* namespace test_helpers */
