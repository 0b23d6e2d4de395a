/* SPDX-License-Identifier: BSD-3-Clause */
#include "mp_test_util.h"

#include "common/hang_report.h"
#include "common/test_helpers.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mp_test {

namespace {

constexpr unsigned kPagesWanted = 32; /* 64 MiB of 2 MiB pages: a few small instances */

long
meminfo(const char *key)
{
	std::ifstream f("/proc/meminfo");
	std::string k;
	long v;
	std::string unit;
	std::string line;
	while (std::getline(f, line)) {
		std::istringstream is(line);
		if (is >> k >> v && k == std::string(key) + ":")
			return v;
	}
	return -1;
}

bool
hugetlbfs_mounted()
{
	std::ifstream f("/proc/mounts");
	std::string dev, dir, type;
	std::string line;
	while (std::getline(f, line)) {
		std::istringstream is(line);
		if (is >> dev >> dir >> type && type == "hugetlbfs")
			return true;
	}
	return false;
}

} /* namespace */

uint64_t
now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

std::string
helper_path()
{
	return test_helpers::build_path("tests/mp/qpn_mp_proc");
}
std::string
hugepages_ready()
{
	if (geteuid() == 0) {
		long total = meminfo("HugePages_Total"), free = meminfo("HugePages_Free");
		if (free >= 0 && free < long(kPagesWanted)) {
			std::ofstream("/proc/sys/vm/nr_hugepages")
				<< (total + long(kPagesWanted) - free);
		}
		if (!hugetlbfs_mounted()) {
			mkdir("/dev/hugepages", 0755);
			mount("nodev", "/dev/hugepages", "hugetlbfs", 0, nullptr);
		}
	}
	if (!hugetlbfs_mounted())
		return "DPDK multi-process needs hugepages: no hugetlbfs is mounted (and not root to "
		       "mount one)";
	if (meminfo("HugePages_Free") < long(kPagesWanted / 2))
		return "DPDK multi-process needs hugepages: fewer than 16 free (and not root to reserve "
		       "more)";
	if (geteuid() != 0 && access("/dev/hugepages", W_OK) != 0)
		return "DPDK multi-process needs hugepages: /dev/hugepages is not writable";
	return "";
}

void
remove_instance(const std::string &prefix)
{
	std::ifstream f("/proc/mounts");
	std::string dev, dir, type, line;
	std::vector<std::string> dirs;
	while (std::getline(f, line)) {
		std::istringstream is(line);
		if (is >> dev >> dir >> type && type == "hugetlbfs")
			dirs.push_back(dir);
	}
	std::string want = prefix + "map_";
	for (auto &d : dirs) {
		DIR *dp = opendir(d.c_str());
		if (dp == nullptr)
			continue;
		while (struct dirent *e = readdir(dp))
			if (strncmp(e->d_name, want.c_str(), want.size()) == 0)
				unlink((d + "/" + e->d_name).c_str());
		closedir(dp);
	}
	std::string run = std::string(geteuid() == 0 ? "/var/run/dpdk/" : "/tmp/dpdk/") + prefix;
	if (DIR *dp = opendir(run.c_str())) {
		while (struct dirent *e = readdir(dp))
			if (e->d_name[0] != '.')
				unlink((run + "/" + e->d_name).c_str());
		closedir(dp);
		rmdir(run.c_str());
	}
}

/* ---- Proc ------------------------------------------------------------------------------------ */

namespace {

/*
 * Has child `pid` exited? Its status in *status (exit code, or minus the signal), without
 * reaping it: the reap is left to a detached thread. Why: the kernel's reap of an exited DPDK
 * secondary (release_task -> proc_flush_pid -> shrink_dcache_parent) took from 0.1 s to 101 s
 * on the 2-core VM under a background build (perf), inside waitpid() even with WNOHANG: most
 * likely what held AppSecondaryClientBesidePrimary past CI's 240 s timeout once (the test was
 * waiting for the secondary; nothing printed). The test needs the status, not the reap.
 * Returns 0 (exited), -1 (still running) or -2 (not our child).
 */
int
exited(pid_t pid, int *status)
{
	siginfo_t si = {};
	if (waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) != 0)
		return errno == EINTR ? -1 : -2;
	if (si.si_pid != pid)
		return -1;
	*status = si.si_code == CLD_EXITED ? si.si_status : -si.si_status;
	std::thread([pid] { waitpid(pid, nullptr, 0); }).detach();
	return 0;
}

} // namespace

Proc::~Proc()
{
	if (pid_ > 0 && !reaped_) {
		kill(pid_, SIGKILL);
		/* Bounded: a process in an uninterruptible wait is left to init rather than hanging
		 * the test executable until meson's timeout. */
		int st;
		for (int i = 0; i < 2000 && exited(pid_, &st) == -1; i++)
			usleep(10000);
	}
	if (in_ >= 0)
		close(in_);
	if (outfd_ >= 0)
		close(outfd_);
}

bool
Proc::start(const std::vector<std::string> &argv)
{
	int pin[2], pout[2];
	if (pipe2(pin, O_CLOEXEC) != 0 || pipe2(pout, O_CLOEXEC) != 0)
		return false;
	std::vector<char *> av;
	for (auto &a : argv)
		av.push_back(const_cast<char *>(a.c_str()));
	av.push_back(nullptr);
	pid_ = fork();
	if (pid_ < 0)
		return false;
	if (pid_ == 0) {
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		dup2(pout[1], 2);
		/* Only stdin, stdout and stderr: not the test's own EAL files, sockets and pipes
		 * (DPDK opens them without O_CLOEXEC), which a child would otherwise hold. */
		syscall(SYS_close_range, 3u, ~0u, 0u);
		execv(av[0], av.data());
		_exit(127);
	}
	close(pin[0]);
	close(pout[1]);
	in_ = pin[1];
	outfd_ = pout[0];
	return true;
}

bool
Proc::read_more(int timeout_ms)
{
	struct pollfd p = {outfd_, POLLIN, 0};
	if (poll(&p, 1, timeout_ms) <= 0)
		return false;
	char b[4096];
	ssize_t n = read(outfd_, b, sizeof(b));
	if (n <= 0)
		return false;
	buf_.append(b, size_t(n));
	return true;
}

std::string
Proc::reply(int timeout_ms)
{
	uint64_t end = now_ns() + uint64_t(timeout_ms) * 1000000ull;
	for (;;) {
		size_t nl;
		while ((nl = buf_.find('\n')) != std::string::npos) {
			std::string line = buf_.substr(0, nl);
			buf_.erase(0, nl + 1);
			out_ += line + "\n";
			if (line.rfind("@ ", 0) == 0)
				return line.substr(2);
		}
		uint64_t now = now_ns();
		if (now >= end || !read_more(int((end - now) / 1000000 + 1)))
			return "";
	}
}

std::string
Proc::cmd(const std::string &line, int timeout_ms)
{
	std::string l = line + "\n";
	if (write(in_, l.data(), l.size()) != ssize_t(l.size()))
		return "";
	return reply(timeout_ms);
}

bool
Proc::send(const std::string &line)
{
	std::string l = line + "\n";
	return write(in_, l.data(), l.size()) == ssize_t(l.size());
}

bool
Proc::wait_output(const std::string &needle, int timeout_ms)
{
	uint64_t end = now_ns() + uint64_t(timeout_ms) * 1000000ull;
	for (;;) {
		if (out_.find(needle) != std::string::npos ||
		    buf_.find(needle) != std::string::npos)
			return true;
		uint64_t now = now_ns();
		if (now >= end || !read_more(int((end - now) / 1000000 + 1)))
			return false;
	}
}

void
Proc::close_stdin()
{
	if (in_ >= 0)
		close(in_);
	in_ = -1;
}

void
Proc::kill9()
{
	if (pid_ > 0 && !reaped_)
		kill(pid_, SIGKILL);
}

int
Proc::wait(int timeout_ms)
{
	if (pid_ <= 0)
		return -1;
	uint64_t end = now_ns() + uint64_t(timeout_ms) * 1000000ull, killed_at = 0;
	std::string note;
	while (!reaped_) {
		int st;
		int r = exited(pid_, &st);
		if (r == 0) {
			reaped_ = true;
			status_ = st;
			break;
		}
		if (r == -2) { /* not our child any more: never loop on it */
			note += "\n[mp_test: waitid(" + std::to_string(pid_) +
				") failed: " + strerror(errno) + "]\n";
			reaped_ = true;
			status_ = -1;
			break;
		}
		/* keep draining its output so that it never blocks on a full pipe */
		read_more(10);
		uint64_t now = now_ns();
		if (now >= end && killed_at == 0) {
			/* Say where it (and anything it started) waits before the kill erases it. */
			note += "\n[mp_test: pid " + std::to_string(pid_) +
				" still running after " + std::to_string(timeout_ms) +
				" ms: killed; it was here:]\n" + test_helpers::process_report(pid_);
			kill(pid_, SIGKILL);
			killed_at = now;
		} else if (killed_at != 0 && now - killed_at > 20000000000ull) {
			note += "[mp_test: pid " + std::to_string(pid_) +
				" not gone 20 s after SIGKILL (an uninterruptible wait):]\n" +
				test_helpers::process_report(pid_);
			reaped_ = true; /* given up: the destructor must not wait for it either */
			status_ = -SIGKILL;
			break;
		}
	}
	while (read_more(0)) {
	}
	out_ += buf_ + note;
	buf_.clear();
	return status_;
}

/* ---- checker --------------------------------------------------------------------------------- */

CheckResult
check_logs(const std::vector<LogSpec> &logs, uint64_t q)
{
	struct Holding {
		uint64_t from, until; /* until: UINT64_MAX if still held by a live process */
		size_t log;
	};
	CheckResult r;
	std::map<uint32_t, std::vector<Holding>> by_qpn;
	for (size_t li = 0; li < logs.size(); li++) {
		std::ifstream f(logs[li].path);
		std::map<uint32_t, uint64_t> open; /* qpn -> alloc time */
		std::string line;
		while (std::getline(f, line)) {
			char k;
			unsigned qpn;
			unsigned long long t;
			if (sscanf(line.c_str(), "%c %u %llu", &k, &qpn, &t) != 3)
				continue; /* a torn last line of a killed process */
			if (k == 'A') {
				r.allocs++;
				open[qpn] = t;
			} else if (k == 'f') {
				auto it = open.find(qpn);
				if (it != open.end()) {
					by_qpn[qpn].push_back({it->second, t, li});
					open.erase(it);
				}
			} else if (k == 'F') {
				r.frees++;
			}
		}
		for (auto &o : open)
			by_qpn[o.first].push_back(
				{o.second,
				 logs[li].killed_at_ns != 0 ? logs[li].killed_at_ns : UINT64_MAX,
				 li});
	}
	for (auto &e : by_qpn) {
		auto &v = e.second;
		r.holdings += v.size();
		std::sort(v.begin(), v.end(),
			  [](const Holding &a, const Holding &b) { return a.from < b.from; });
		for (size_t i = 1; i < v.size(); i++) {
			const Holding &a = v[i - 1], &b = v[i];
			bool bad = a.until == UINT64_MAX || b.from < a.until + q;
			if (!bad)
				continue;
			if (r.violations++ == 0) {
				char m[256];
				snprintf(m, sizeof(m),
					 "QPN 0x%06x: held by log %zu from %llu until %llu, "
					 "handed out to log %zu at %llu (quarantine %llu ns)",
					 e.first, a.log, (unsigned long long)a.from,
					 (unsigned long long)a.until, b.log,
					 (unsigned long long)b.from, (unsigned long long)q);
				r.first = m;
			}
		}
	}
	return r;
}

} /* namespace mp_test */
