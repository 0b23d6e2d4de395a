/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd as a user meets it in the first hour: the prompt (its banner, `show stats` before
 * and between runs, --duration, Ctrl-C, a failed re-probe, the totals after a re-probe), the
 * warning of a quarantine shorter than the CM timewait, and command-line refusals that stay one
 * line (a control character in a string option, a device given twice). The built binary runs as
 * a subprocess (as in test_app.cpp), fed through stdin; only its output and exit are checked.
 */
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <poll.h>
#include <pty.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "common/test_helpers.h"
#include "mlx5_qpn.h"
#include "mp/mp_test_util.h"

namespace {

class TestpmdPrompt : public ::testing::Test {
protected:
	void SetUp() override
	{
		app_ = test_helpers::build_path("app/qpn-testpmd/qpn-testpmd");
		ASSERT_EQ(access(app_.c_str(), X_OK), 0) << "qpn-testpmd not built at " << app_;
		static unsigned n;
		name_ = "sim_pr" + std::to_string(getpid()) + "_" + std::to_string(n++);
		in_ = ::testing::TempDir() + "qpn_pr_" + name_ + ".in";
	}

	void TearDown() override
	{
		mlx5_qpn_dev_purge(name_.c_str()); /* -ENOENT when --destroy-sim did it */
		std::remove(in_.c_str());
	}

	/* The EAL options of every run; OPTS after "--". */
	std::vector<std::string> argv(const std::vector<std::string> &opts) const
	{
		std::vector<std::string> a = {app_,
					      "--no-huge",
					      "--no-pci",
					      "-m",
					      "256",
					      "-l",
					      "0-1",
					      "--file-prefix=" + name_,
					      "--log-level=lib.eal:error",
					      "--"};
		a.insert(a.end(), opts.begin(), opts.end());
		return a;
	}

	/* The prompt with OPTS (device DEV), fed INPUT: its output; *status its exit. */
	std::string prompt(const std::string &dev, const std::string &opts,
			   const std::string &input, int *status)
	{
		std::ofstream(in_) << input;
		const std::string c = "timeout --foreground -k 5 60 " + app_ +
				      " --no-huge --no-pci -m 256 -l 0-1 --file-prefix=" + name_ +
				      " --log-level=lib.eal:error -- --qpn-dev=" + dev + " -i " +
				      opts + " < " + in_ + " 2>&1";
		std::string out;
		*status = test_helpers::run_cmd(c, &out);
		return out;
	}

	std::string app_, name_, in_;
};

/* The lines of OUT that are not the EAL's. */
std::vector<std::string>
lines_of(const std::string &out)
{
	std::vector<std::string> v;
	size_t at = 0;
	while (at < out.size()) {
		size_t nl = out.find('\n', at);
		std::string l = out.substr(at,
					   nl == std::string::npos ? std::string::npos : nl - at);
		if (l.rfind("EAL:", 0) != 0 && l.rfind("TELEMETRY:", 0) != 0 && !l.empty())
			v.push_back(l);
		if (nl == std::string::npos)
			break;
		at = nl + 1;
	}
	return v;
}

/* Wait until P's output holds NEEDLE N times (at most 60 s). */
bool
wait_count(mp_test::Proc &p, const std::string &needle, unsigned n)
{
	for (int i = 0; i < 300; i++) {
		unsigned c = 0;
		for (size_t at = p.output().find(needle); at != std::string::npos;
		     at = p.output().find(needle, at + 1))
			c++;
		if (c >= n)
			return true;
		p.reply(200); /* reads what came meanwhile into output() (no "@ " line here) */
	}
	return false;
}

/* The connection counts of the summaries in OUT, in order ("connections: N (active side)"). */
std::vector<unsigned long long>
summary_conns(const std::string &out)
{
	std::vector<unsigned long long> v;
	for (size_t at = out.find("\nconnections: "); at != std::string::npos;
	     at = out.find("\nconnections: ", at + 1)) {
		unsigned long long n;
		if (sscanf(out.c_str() + at, "\nconnections: %llu", &n) == 1)
			v.push_back(n);
	}
	return v;
}

} // namespace

/* A failed re-probe leaves the prompt usable: `start` without a device is refused in one line
 * (it divided by the number of devices: SIGFPE, exit 136), and `quit` ends normally. The
 * device's firmware refuses every create after the first (BAD_PARAM: -EINVAL), so the first
 * probe reserves its one range and the re-probe of `set quarantine` cannot reserve any. (A
 * device whose only range is cooling no longer fails a probe: it waits, driver.md §14.) */
TEST_F(TestpmdPrompt, StartWithoutADeviceIsRefused)
{
	mp_test::Proc p;
	ASSERT_TRUE(p.start(
		argv({"--qpn-dev=" + name_ +
			      ",rsvd_first=2048,rsvd_count=16775168,log_max_alloc=10,"
			      "fault_fw_after=1,fault_fw_status=0x10",
		      "--engine=alloc", "--quarantine-us=60000000", "-i", "--destroy-sim"})));
	ASSERT_TRUE(p.send("start"));
	ASSERT_TRUE(p.wait_output("started engine")) << p.output();
	usleep(300 * 1000);
	ASSERT_TRUE(p.send("stop"));
	ASSERT_TRUE(p.wait_output("pool: capacity")) << p.output();
	ASSERT_TRUE(p.send("set quarantine 1000"));
	ASSERT_TRUE(p.wait_output("set quarantine: re-probe failed")) << p.output();
	for (const char *c : {"start", "show device", "show config", "start", "quit"})
		ASSERT_TRUE(p.send(c));
	p.close_stdin();
	EXPECT_EQ(p.wait(), 0) << p.output();
	const std::string &out = p.output();
	size_t at = out.find("start: no device (the last re-probe failed)");
	ASSERT_NE(at, std::string::npos) << out;
	EXPECT_NE(out.find("start: no device", at + 1), std::string::npos) << out;
	EXPECT_NE(out.find("force-shared-qpn"), std::string::npos) << "show config: " << out;
	EXPECT_NE(out.find("bye"), std::string::npos) << out;
}

/* The banner comes before the first prompt; `show stats` before any start says so (it printed
 * an empty summary with "send_cqe skipped (no data path: )"); --duration says it applies to
 * batch mode only where the prompt offers it. */
TEST_F(TestpmdPrompt, TheFirstLinesAndStatsBeforeAStart)
{
	int status;
	const std::string out = prompt(name_, "--destroy-sim",
				       "show stats\nset duration 5\nshow config\nquit\n", &status);
	EXPECT_EQ(status, 0) << out;
	const std::vector<std::string> l = lines_of(out);
	size_t banner = out.find("qpn-testpmd interactive: engine");
	ASSERT_NE(banner, std::string::npos) << out;
	EXPECT_LT(banner, out.find("qpn-testpmd> ")) << "the prompt before the banner:\n" << out;
	EXPECT_NE(out.find("show stats: nothing run yet (start the engine first)"),
		  std::string::npos)
		<< out;
	EXPECT_EQ(out.find("no data path: )"), std::string::npos) << out;
	EXPECT_NE(out.find("duration: 5 (batch mode only: at the prompt a run lasts until stop)"),
		  std::string::npos)
		<< out;
	EXPECT_NE(out.find("  duration       5 (batch mode only"), std::string::npos) << out;
}

/* A quarantine shorter than the CM timewait in force is said at start and at `set quarantine`,
 * in one line naming both (the rule the project exists for: 209,782 stale rejects went by
 * without a word); the default quarantine (the timewait) and a longer one say nothing. */
TEST_F(TestpmdPrompt, AQuarantineShorterThanTheTimewaitIsWarnedOf)
{
	int status;
	std::string out = prompt(name_, "--quarantine-us=1000 --destroy-sim",
				 "set quarantine 16000\nset quarantine 2000\nquit\n", &status);
	EXPECT_EQ(status, 0) << out;
	const std::string warn = "qpn-testpmd: warning: device " + name_ + "'s quarantine ";
	size_t first = out.find(warn + "1000 us is shorter than the CM timewait 16 ms");
	ASSERT_NE(first, std::string::npos) << out;
	size_t set = out.find("quarantine: 16000 us (devices re-probed");
	ASSERT_NE(set, std::string::npos) << out;
	size_t second = out.find(warn + "2000 us is shorter than the CM timewait 16 ms");
	ASSERT_NE(second, std::string::npos) << out;
	/* Nothing said for 16000 us: the next warning is the 2000 us one. */
	EXPECT_EQ(out.find(warn, set), second) << out;

	out = prompt(name_, "--destroy-sim", "quit\n", &status);
	EXPECT_EQ(status, 0) << out;
	EXPECT_EQ(out.find("warning"), std::string::npos) << out;
}

/* After `set quarantine` re-probes the devices, the totals start again (a line says so): the
 * summary at quit is the second set-up's alone, equal to what its own `stop` printed, not the
 * first run's connections, steps and rejects beside the new device's pool counters. */
TEST_F(TestpmdPrompt, AReprobeStartsTheTotalsAgain)
{
	mp_test::Proc p;
	ASSERT_TRUE(p.start(argv({"--qpn-dev=" + name_, "-i", "--destroy-sim"})));
	for (unsigned run = 1; run <= 2; run++) {
		ASSERT_TRUE(p.send("start"));
		ASSERT_TRUE(wait_count(p, "started engine", run)) << p.output();
		usleep(300 * 1000);
		ASSERT_TRUE(p.send("stop"));
		ASSERT_TRUE(wait_count(p, "pool: capacity", run)) << p.output();
		if (run == 1) {
			ASSERT_TRUE(p.send("set quarantine 20000"));
			ASSERT_TRUE(p.wait_output("statistics start again")) << p.output();
		}
	}
	ASSERT_TRUE(p.send("quit"));
	p.close_stdin();
	EXPECT_EQ(p.wait(), 0) << p.output();
	const std::vector<unsigned long long> c = summary_conns(p.output());
	ASSERT_EQ(c.size(), 3u) << p.output(); /* stop, stop, quit */
	EXPECT_GT(c[0], 0u) << p.output();
	EXPECT_GT(c[1], 0u) << p.output();
	EXPECT_EQ(c[2], c[1]) << "the quit summary is not the second set-up's:\n" << p.output();
}

/* Each start has its own clock, the total over the starts is shown beside it, and the rate of
 * the first `show stats` of a start is since that start: "since the last show (2.0 s ago)" was
 * wrong after a pause between two starts, which is not run time. */
TEST_F(TestpmdPrompt, EachStartHasItsOwnClock)
{
	mp_test::Proc p;
	ASSERT_TRUE(p.start(argv({"--qpn-dev=" + name_, "-i", "--destroy-sim"})));
	for (unsigned run = 1; run <= 2; run++) {
		ASSERT_TRUE(p.send("start"));
		ASSERT_TRUE(wait_count(p, "started engine", run)) << p.output();
		usleep(400 * 1000);
		ASSERT_TRUE(p.send("show stats"));
		ASSERT_TRUE(wait_count(p, "s on average", run)) << p.output();
		ASSERT_TRUE(p.send("stop"));
		ASSERT_TRUE(wait_count(p, "pool: capacity", run)) << p.output();
		if (run == 1)
			usleep(1500 * 1000); /* the pause */
	}
	ASSERT_TRUE(p.send("quit"));
	p.close_stdin();
	EXPECT_EQ(p.wait(), 0) << p.output();
	std::vector<double> own, total;
	const std::string &out = p.output();
	for (size_t at = out.find("  ["); at != std::string::npos; at = out.find("  [", at + 1)) {
		double t, all, ago;
		char what[32];
		if (sscanf(out.c_str() + at,
			   "  [%lf s since start, %lf s run in all] %*u conns: %*f/s since the "
			   "%31[a-z ] (%lf s ago)",
			   &t, &all, what, &ago) != 4)
			continue;
		for (size_t n = strlen(what); n > 0 && what[n - 1] == ' '; n--)
			what[n - 1] = '\0';
		EXPECT_STREQ(what, "start") << out;
		EXPECT_LE(ago, t + 1e-9) << out;
		own.push_back(t);
		total.push_back(all);
	}
	ASSERT_EQ(own.size(), 2u) << out;
	/* The second start's clock starts again; the total holds both runs, not the pause. */
	EXPECT_LT(own[1], total[1]) << out;
	EXPECT_GT(total[1], total[0]) << out;
}

/* Ctrl-C at the prompt, on a terminal, ends as app.md says: the engine stopped, the summary,
 * exit 130. cmdline's raw mode turns the terminal's signals off, so without the app turning
 * them back on the Ctrl-C was a character the line editor dropped and the prompt went on. */
TEST_F(TestpmdPrompt, CtrlCAtThePromptEndsWithTheSummary)
{
	std::vector<std::string> a = argv({"--qpn-dev=" + name_, "-i", "--destroy-sim"});
	std::vector<char *> cargv;
	for (std::string &x : a)
		cargv.push_back(x.data());
	cargv.push_back(nullptr);
	int master = -1;
	pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		execv(cargv[0], cargv.data());
		_exit(127);
	}
	std::string out;
	auto read_until = [&](const std::string &needle, int ms) {
		for (int waited = 0; out.find(needle) == std::string::npos && waited < ms;) {
			pollfd pfd = {master, POLLIN, 0};
			if (poll(&pfd, 1, 100) <= 0) {
				waited += 100;
				continue;
			}
			char buf[4096];
			ssize_t n = read(master, buf, sizeof(buf));
			if (n <= 0)
				break;
			out.append(buf, size_t(n));
		}
		return out.find(needle) != std::string::npos;
	};
	EXPECT_TRUE(read_until("qpn-testpmd> ", 60000)) << out;
	ASSERT_EQ(write(master, "start\r", 6), 6);
	EXPECT_TRUE(read_until("started engine", 60000)) << out;
	usleep(300 * 1000);
	ASSERT_EQ(write(master, "\x03", 1), 1); /* Ctrl-C */
	const bool ended = read_until("stopped by signal", 20000);
	if (!ended)
		kill(pid, SIGKILL); /* the prompt ignored it */
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	read_until("\x01never\x01", 200);
	close(master);
	ASSERT_TRUE(ended) << "Ctrl-C did not end the prompt:\n" << out;
	ASSERT_TRUE(WIFEXITED(status)) << out;
	EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT) << out;
	EXPECT_NE(out.find("qpn-testpmd summary"), std::string::npos) << out;
}

/* A string option with a control character is refused in one line, the character escaped as
 * the numbers' are (it was printed raw: two lines); a device given twice is a command-line
 * mistake (exit 2, one line), not a driver error at run time (exit 1). */
TEST_F(TestpmdPrompt, StringOptionsAreRefusedInOneLine)
{
	struct Case {
		std::string opt, line;
	};
	const std::vector<Case> cases = {
		{"--fabric=x\ny",
		 "qpn-testpmd: bad value for --fabric: \"x\\x0ay\" (1..32 characters "
		 "from [A-Za-z0-9_.-])"},
		{"--role=x\ny",
		 "qpn-testpmd: bad value for --role: \"x\\x0ay\" (expected both, client or server)"},
		{"--cm-policy=x\ny",
		 "qpn-testpmd: bad value for --cm-policy: \"x\\x0ay\" (expected live or strict)"},
		{"--engine=x\ny", "qpn-testpmd: unknown engine \"x\\x0ay\" (see --help)"},
		{"--allocator=x\ny",
		 "qpn-testpmd: bad value for --allocator: \"x\\x0ay\" (expected "
		 "ours, rdma-core or both)"},
		{"--client-lcores=1,\n2",
		 "qpn-testpmd: bad value for --client-lcores: \"1,\\x0a2\" (expected up to"},
		{"--qpn-dev=" + name_, "qpn-testpmd: bad value for --qpn-dev: \"" + name_ +
					       "\" (device " + name_ +
					       " given twice; each device once)"},
	};
	for (const Case &c : cases) {
		mp_test::Proc p;
		ASSERT_TRUE(p.start(argv({"--qpn-dev=" + name_, "--duration=0.2", c.opt})));
		p.close_stdin();
		EXPECT_EQ(p.wait(), 2) << c.opt << "\n" << p.output();
		const std::vector<std::string> l = lines_of(p.output());
		ASSERT_EQ(l.size(), 1u) << c.opt << "\n" << p.output();
		EXPECT_EQ(l[0].rfind(c.line, 0), 0u) << c.opt << "\n" << l[0];
	}
	EXPECT_EQ(mlx5_qpn_dev_purge(name_.c_str()), -ENOENT) << "a refused command line probed";
}
