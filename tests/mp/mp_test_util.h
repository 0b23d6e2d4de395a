/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MP_TEST_UTIL_H
#define MP_TEST_UTIL_H

/*
 * Multi-process test helpers: hugepages (which DPDK secondaries need), a spawned qpn_mp_proc
 * driven over pipes, clean-up of a DPDK instance's files, and the log checker.
 *
 * The checker is independent of the pool: it reads only the processes' logs. A log's "A" time is
 * taken after the allocation returned (never earlier than the hand-out) and its "f" time before
 * the free is called (never later than the release); a killed process let its held QPNs go no
 * earlier than the kill() call. So a reported violation is real: the bounds can miss one (a
 * delayed log write), never invent one.
 */
#include <cstdint>
#include <string>
#include <vector>

namespace mp_test {

/* Hugepages usable by DPDK multi-process: mounts and reserves them when root. Empty string if
 * usable, else the reason (for GTEST_SKIP). */
std::string hugepages_ready();

/*
 * EAL option for a primary whose secondaries must map its memory at the same addresses: a base
 * far from where the kernel places libraries and sanitizer allocations, inside the application
 * range of ThreadSanitizer and the high memory of AddressSanitizer (EAL's default hint, 4 GiB,
 * falls in ASan's shadow gap, so the kernel picks an address a secondary may already use).
 */
constexpr const char *kPrimaryBaseVa = "--base-virtaddr=0x7e8100000000";

/* Remove what a DPDK instance with this --file-prefix left behind (a SIGKILLed primary leaves
 * its hugepage files, which would hold the pages). */
void remove_instance(const std::string &prefix);

uint64_t now_ns();

/* The built helper <build>/tests/mp/qpn_mp_proc. */
std::string helper_path();

/* A child process (fork + exec) with stdin/stdout pipes; stderr goes to stdout. */
class Proc {
public:
	Proc() = default;
	Proc(const Proc &) = delete;
	Proc &operator=(const Proc &) = delete;
	~Proc();
	bool start(const std::vector<std::string> &argv);
	/* Wait for the next "@ " line (at most timeout_ms; "" on EOF or timeout); other lines go to
	 * output(). */
	std::string reply(int timeout_ms = 60000);
	/* Send a command line and wait for its reply. */
	std::string cmd(const std::string &line, int timeout_ms = 60000);
	/* Send a line without waiting for a reply. */
	bool send(const std::string &line);
	/* Wait until the output holds `needle` (at most timeout_ms). */
	bool wait_output(const std::string &needle, int timeout_ms = 60000);
	void close_stdin();
	void kill9();
	/* Wait for exit (at most timeout_ms, then SIGKILL). Exit code, or -signal. */
	int wait(int timeout_ms = 60000);
	const std::string &output() const { return out_; }
	int pid() const { return pid_; }

private:
	bool read_more(int timeout_ms);
	int pid_ = -1;
	int in_ = -1, outfd_ = -1;
	std::string buf_, out_;
	bool reaped_ = false;
	int status_ = 0;
};

/* One process's log and, if it was killed, the time just before kill() (0: not killed). */
struct LogSpec {
	std::string path;
	uint64_t killed_at_ns;
};

struct CheckResult {
	uint64_t allocs = 0, frees = 0, holdings = 0;
	uint64_t violations = 0;
	std::string first; /* the first violation, readable */
};

/* No QPN handed out while another holding of it was live, nor before `quarantine_ns` after it
 * was let go (released, or held by a process when it was killed). */
CheckResult check_logs(const std::vector<LogSpec> &logs, uint64_t quarantine_ns);

} /* namespace mp_test */

#endif
