/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf --count=instructions: instructions per operation without wall-clock noise.
 *
 * The tool runs itself again under valgrind's callgrind with instrumentation off
 * (--instr-atstart=no) and an internal option --count-child=DIR. The child sets the peers up,
 * warms each single-lcore loop uninstrumented, then instruments exactly one timed loop between
 * client requests (zero the counters, run, dump with a description naming peer, workload and
 * ops). The parent reads the dumps and divides. The loop's own few instructions are included,
 * alike for every peer. Where perf_event_open works, the hardware instruction counter of the
 * pair loop is read as well; on VMs without a virtual PMU it fails and the reason is reported.
 */
#include <dirent.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#ifdef QPN_PERF_HAVE_CALLGRIND
#include <valgrind/callgrind.h>
#endif

#include "perf_app.h"

std::string perf_hw_error;
bool perf_instr_measured;
std::string perf_instr_error;

static std::vector<std::string> perf_argv;

void
perf_save_argv(int argc, char **argv)
{
	perf_argv.assign(argv, argv + argc);
}

/* Workloads counted: the single-lcore ones whose cost does not depend on sleeping. */
static const perf_phase perf_counted[] = {PH_PAIR, PH_BURST, PH_HOLD};

int
perf_count_child(const struct perf_opts *o, std::vector<perf_state> &st)
{
#ifdef QPN_PERF_HAVE_CALLGRIND
	uint64_t n = o->quick ? 20000 : 100000;

	if (!RUNNING_ON_VALGRIND) {
		PERF_LOG(ERR, "--count-child is for the run under callgrind (use --count)");
		return -EINVAL;
	}
	for (auto &s : st) {
		if (!s.ok)
			continue;
		for (perf_phase ph : perf_counted) {
			perf_loop_res warm = {}, res = {};
			char desc[160];

			if (ph == PH_BURST && o->burst == 0)
				continue;
			perf_run_once(o, &s, ph, n / 4, &warm);
			CALLGRIND_START_INSTRUMENTATION;
			CALLGRIND_ZERO_STATS;
			perf_run_once(o, &s, ph, n, &res);
			snprintf(desc, sizeof(desc), "qpnperf %s %s %" PRIu64, s.peer->name,
				 perf_phase_name[ph], res.ops);
			CALLGRIND_DUMP_STATS_AT(desc);
			CALLGRIND_STOP_INSTRUMENTATION;
		}
	}
	return 0;
#else
	(void)o;
	(void)st;
	PERF_LOG(ERR, "built without valgrind/callgrind.h: no instruction counts");
	return -ENOTSUP;
#endif
}

/* One dump of the child: "desc: Trigger: Client Request: qpnperf PEER PHASE OPS", "summary: IR". */
static void
perf_read_dump(const std::string &path, std::vector<perf_state> &st, unsigned int *found)
{
	FILE *f = fopen(path.c_str(), "r");
	char line[512], peer[64] = "", phase[16] = "";
	uint64_t ops = 0, ir = 0;
	bool have_desc = false, have_ir = false;

	if (f == nullptr)
		return;
	while (fgets(line, sizeof(line), f) != nullptr) {
		const char *d = strstr(line, "Client Request: qpnperf ");

		if (strncmp(line, "desc:", 5) == 0 && d != nullptr)
			have_desc = sscanf(d + strlen("Client Request: qpnperf "),
					   "%63s %15s %" SCNu64, peer, phase, &ops) == 3;
		else if (strncmp(line, "summary:", 8) == 0 || strncmp(line, "totals:", 7) == 0)
			have_ir = sscanf(strchr(line, ':') + 1, "%" SCNu64, &ir) == 1;
	}
	fclose(f);
	if (!have_desc || !have_ir || ops == 0)
		return;
	for (auto &s : st) {
		if (strcmp(s.peer->name, peer) != 0)
			continue;
		for (int ph = 0; ph < PH_NB; ph++)
			if (strcmp(perf_phase_name[ph], phase) == 0) {
				s.instr[ph] = (double)ir / (double)ops;
				(*found)++;
			}
	}
}

/* The child's command line: valgrind, this binary, the EAL part, then ours minus the outputs. */
static std::vector<std::string>
perf_child_cmd(const std::string &dir)
{
	std::vector<std::string> cmd = {"valgrind", "--tool=callgrind", "--instr-atstart=no",
					"--callgrind-out-file=" + dir + "/cg.out",
					"--log-file=" + dir + "/valgrind.log"};
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	size_t i = 1;

	exe[len > 0 ? len : 0] = '\0';
	cmd.push_back(exe);
	for (; i < perf_argv.size() && perf_argv[i] != "--"; i++)
		cmd.push_back(perf_argv[i]);
	/* A runtime directory of its own: the parent's EAL is still alive. */
	cmd.push_back("--file-prefix=qpnperf-cg" + std::to_string(getpid()));
	cmd.push_back("--");
	for (i++; i < perf_argv.size(); i++) {
		const std::string &a = perf_argv[i];

		if (a.rfind("--json", 0) == 0 || a.rfind("--count", 0) == 0)
			continue;
		cmd.push_back(a);
	}
	cmd.push_back("--scaling=off");
	cmd.push_back("--count-child=" + dir);
	return cmd;
}

int
perf_count_instructions(const struct perf_opts *, std::vector<perf_state> &st)
{
	char dir[] = "/tmp/qpnperf-cg.XXXXXX";
	unsigned int found = 0;
	int status = 0;

	if (mkdtemp(dir) == nullptr) {
		perf_instr_error = std::string("mkdtemp: ") + strerror(errno);
		return -errno;
	}
	std::vector<std::string> cmd = perf_child_cmd(dir);
	std::vector<char *> args;

	for (auto &a : cmd)
		args.push_back(a.data());
	args.push_back(nullptr);
	printf("\ncounting instructions under callgrind (a minute or so)...\n");
	fflush(stdout);
	pid_t pid = fork();

	if (pid == 0) {
		execvp(args[0], args.data());
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		perf_instr_error = std::string("cannot run valgrind: ") + strerror(errno);
	} else if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		perf_instr_error = "valgrind not found (Debian package valgrind)";
	} else {
		DIR *d = opendir(dir);
		struct dirent *e;

		while (d != nullptr && (e = readdir(d)) != nullptr)
			if (strncmp(e->d_name, "cg.out", 6) == 0)
				perf_read_dump(std::string(dir) + "/" + e->d_name, st, &found);
		if (d != nullptr)
			closedir(d);
		if (found == 0)
			perf_instr_error = "the callgrind run produced no counts (exit status " +
					   std::to_string(WEXITSTATUS(status)) + "; see " + dir +
					   "/valgrind.log)";
	}
	perf_instr_measured = found > 0;
	if (found > 0) {
		/* Nothing to inspect: remove the dumps. */
		DIR *d = opendir(dir);
		struct dirent *e;

		while (d != nullptr && (e = readdir(d)) != nullptr)
			if (e->d_name[0] != '.')
				unlink((std::string(dir) + "/" + e->d_name).c_str());
		if (d != nullptr)
			closedir(d);
		rmdir(dir);
	}
	return found > 0 ? 0 : -EIO;
}

/* User-space instructions of the pair loop from the PMU, when the kernel gives us one. */
void
perf_count_hw(const struct perf_opts *, std::vector<perf_state> &st)
{
	struct perf_event_attr attr = {};
	int fd;

	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_HARDWARE;
	attr.config = PERF_COUNT_HW_INSTRUCTIONS;
	attr.disabled = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
	if (fd < 0) {
		perf_hw_error = std::string("perf_event_open(instructions) failed: ") +
				strerror(errno) + " (no PMU for this VM or perf_event_paranoid)";
		return;
	}
	perf_hw_error.clear();
	for (auto &s : st) {
		perf_loop_res res = {};
		uint64_t count = 0;

		if (!s.ok)
			continue;
		ioctl(fd, PERF_EVENT_IOC_RESET, 0);
		ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
		s.peer->run_pairs(s.ctx, s.ph[PH_PAIR].n, &res);
		ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
		if (read(fd, &count, sizeof(count)) == (ssize_t)sizeof(count) && res.ops > 0)
			s.hw_instr = (double)count / (double)res.ops;
	}
	close(fd);
}
