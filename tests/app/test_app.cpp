/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * End-to-end runs of qpn-testpmd: the built binary (<build>/app/qpn-testpmd/qpn-testpmd, found
 * from this executable's path <build>/tests/qpn_tests) runs as a subprocess with its own EAL
 * file prefix and its own emulated device, in batch mode for about a second with --json, and
 * the JSON is checked: the proof that quarantine >= timewait gives zero stale rejects, the two
 * negative controls that produce them, every engine, the prompt driven through stdin, the
 * error exits, client and server as two processes over a shared-memory CM fabric, and
 * testpmd's habits (SIGINT mid-run, live `show stats`, `clear stats`, `set`/`show config`).
 */
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "common/test_helpers.h"
#include "mlx5_qpn_cm.h"
#include "mlx5_qpn_dc.h"
#include "mp/mp_test_util.h"
#include "mlx5_qpn.h"

namespace {

/* Concatenation by append: g++ 12 at -O3 warns (-Wrestrict, a false positive) on some
 * `"literal" + std::string` expressions. */
template <typename... T>
std::string
cat(const T &...parts)
{
	std::string s;
	(s.append(parts), ...);
	return s;
}

/* Durations of a test's phases, printed at its end (what a slow run spent its time on). */
class phase_clock {
public:
	void done(const char *what)
	{
		auto now = std::chrono::steady_clock::now();
		line_ += cat(line_.empty() ? "" : ", ", what, " ",
			     std::to_string(std::chrono::duration<double>(now - last_).count()),
			     " s");
		last_ = now;
	}
	void print() const { printf("[  phases  ] %s\n", line_.c_str()); }

private:
	std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
	std::string line_;
};

struct run_result {
	int status = -1;    /* exit code, or -1 if it did not exit normally */
	std::string output; /* stdout + stderr */
	std::string json;   /* the JSON file, if any */
};

class AppTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		app_ = test_helpers::build_path("app/qpn-testpmd/qpn-testpmd");
		ASSERT_EQ(access(app_.c_str(), X_OK), 0) << "qpn-testpmd not built at " << app_;
	}

	/* A unique emulated device and file prefix for each run. */
	std::string next_name()
	{
		static unsigned n;
		std::string name = cat("sim_t", std::to_string(getpid()), "_", std::to_string(n++));
		names_.push_back(name);
		return name;
	}

	void TearDown() override
	{
		for (auto &n : names_)
			mlx5_qpn_dev_purge(n.c_str()); /* -ENOENT when --destroy-sim did it */
	}

	/* Run the app: `lcores` for -l, `opts` after "--"; stdin from `input` if not empty. */
	run_result run(const std::string &lcores, const std::string &opts,
		       const std::string &prefix, const std::string &input = "",
		       bool want_json = true)
	{
		run_result r;
		std::string dir = ::testing::TempDir();
		std::string json = cat(dir, "qpn_app_", prefix, ".json");
		std::string in = cat(dir, "qpn_app_", prefix, ".in");
		std::remove(json.c_str());
		std::string cmd = cat("timeout -k 5 60 ", app_, " --no-huge --no-pci -m 256 -l ",
				      lcores, " --file-prefix=", prefix,
				      " --log-level=lib.eal:error -- ", opts);
		if (want_json)
			cmd.append(" --json=").append(json);
		if (!input.empty()) {
			std::ofstream(in) << input;
			cmd.append(" < ").append(in);
		} else {
			cmd += " < /dev/null";
		}
		cmd += " 2>&1";
		r.status = test_helpers::run_cmd(cmd, &r.output);
		r.json = test_helpers::slurp(json);
		std::remove(json.c_str());
		std::remove(in.c_str());
		return r;
	}

	std::string app_;
	std::vector<std::string> names_;
};

/* Minimal JSON lookup for qpn-testpmd's own output: "a.b.c" finds "a", then "b" after it, then
 * "c" after that, and parses the number (or the string) that follows. */
bool
json_find(const std::string &js, const std::string &path, size_t *pos)
{
	size_t at = 0, start = 0;
	while (start <= path.size()) {
		size_t dot = path.find('.', start);
		std::string key = cat("\"",
				      path.substr(start, dot == std::string::npos ?
								 std::string::npos :
								 dot - start),
				      "\":");
		at = js.find(key, at);
		if (at == std::string::npos)
			return false;
		at += key.size();
		if (dot == std::string::npos)
			break;
		start = dot + 1;
	}
	while (at < js.size() && js[at] == ' ')
		at++;
	*pos = at;
	return true;
}

double
json_num(const std::string &js, const std::string &path)
{
	size_t at;
	if (!json_find(js, path, &at))
		return -1;
	return std::strtod(js.c_str() + at, nullptr);
}

std::string
json_str(const std::string &js, const std::string &path)
{
	size_t at;
	if (!json_find(js, path, &at) || js[at] != '"')
		return "";
	return js.substr(at + 1, js.find('"', at + 1) - at - 1);
}

#define EXPECT_RUN_OK(r)                                                                           \
	do {                                                                                       \
		EXPECT_EQ((r).status, 0) << (r).output;                                            \
		ASSERT_FALSE((r).json.empty()) << (r).output;                                      \
	} while (0)

} // namespace

/* The proof: quarantine = the CM timewait (the default), strict policy (pairs held through
 * timewait): many reconnects, not one stale reject. */
TEST_F(AppTest, AppDciReconnectDefaultHasNoStaleRejects)
{
	std::string dev = next_name();
	run_result r = run("0-1", cat("--qpn-dev=", dev, " --duration=1.5 --destroy-sim"), dev);
	EXPECT_RUN_OK(r);
	EXPECT_EQ(json_str(r.json, "engine"), "dci-reconnect");
	EXPECT_EQ(json_str(r.json, "cm_policy"), "strict");
	EXPECT_GE(json_num(r.json, "quarantine_us"), json_num(r.json, "timewait_ms") * 1000);
	EXPECT_GT(json_num(r.json, "connections"), 100);
	EXPECT_GT(json_num(r.json, "conn_per_sec"), 0);
	EXPECT_EQ(json_num(r.json, "stale_rejects"), 0);
	EXPECT_EQ(json_num(r.json, "errors.other"), 0);
	EXPECT_EQ(json_num(r.json, "pool.refused_frees"), 0);
	double share = json_num(r.json, "pool_share");
	EXPECT_GT(share, 0.0);
	EXPECT_LT(share, 1.0);
	EXPECT_EQ(json_num(r.json, "steps.alloc.count"), json_num(r.json, "connections"));
	EXPECT_GT(json_num(r.json, "steps.req_rep.p50_ns"), 0);
	EXPECT_GT(json_num(r.json, "steps.rtu.count"), 0);
	EXPECT_GT(json_num(r.json, "steps.dreq_drep.count"), 0);
	EXPECT_GE(json_num(r.json, "steps.cycle.max_ns"), json_num(r.json, "steps.cycle.p99_ns"));
	if (r.json.find("\"data_path\": true") != std::string::npos) {
		EXPECT_EQ(json_num(r.json, "steps.send_cqe.count"),
			  json_num(r.json, "connections"));
		EXPECT_EQ(json_num(r.json, "data.error_completions"), 0);
		EXPECT_EQ(json_num(r.json, "data.sends"), json_num(r.json, "data.completions"));
	} else {
		EXPECT_NE(r.output.find("skipped (no data path"), std::string::npos) << r.output;
	}
	EXPECT_NE(r.output.find("pool share of the worker's time"), std::string::npos);
	EXPECT_NE(r.output.find("] "), std::string::npos) << "no progress line";
}

/* DCI error recovery: the emulated device loses every 50th SEND (dc_err_every), so its DCI
 * gets a retry-exceeded error CQE, goes to ERR and flushes what follows. The connection that
 * owned the lost send fails with the syndrome's reason, the flushed ones are counted apart (not
 * as new errors), the DCI is recovered, and connections go on being made: no other error, no
 * stale reject. */
TEST_F(AppTest, AppDciReconnectRecoversFromDciErrors)
{
	std::string dev = next_name();
	run_result r = run("0-1",
			   cat("--qpn-dev=", dev, ",dc_err_every=50 --duration=1 --destroy-sim"),
			   dev);
	EXPECT_RUN_OK(r);
	ASSERT_NE(r.json.find("\"data_path\": true"), std::string::npos) << r.output;
	const double errs = json_num(r.json, "data.error_completions");
	const double recov = json_num(r.json, "data.dci_recoveries");
	const std::string retry = mlx5_qpn_wc_syndrome_str(MLX5_QPN_SYND_TRANSPORT_RETRY);
	const std::string flush = mlx5_qpn_wc_syndrome_str(MLX5_QPN_SYND_WR_FLUSH);
	EXPECT_GT(errs, 1);
	EXPECT_EQ(json_num(r.json, cat("data.failed_connections.", retry)), errs) << r.json;
	EXPECT_GT(json_num(r.json, "data.flushed_completions"), 0);
	EXPECT_GT(json_num(r.json, cat("data.failed_connections.", flush)), 0) << r.json;
	/* Every error recovered (the last one may still be pending when the run stops). */
	EXPECT_GE(recov, errs - 1);
	EXPECT_LE(recov, errs);
	/* Connections made after the errors: many more than failed. */
	EXPECT_GT(json_num(r.json, "connections"), 4 * errs);
	EXPECT_EQ(json_num(r.json, "data.sends"), json_num(r.json, "data.completions"));
	EXPECT_EQ(json_num(r.json, "stale_rejects"), 0);
	EXPECT_EQ(json_num(r.json, "errors.other"), 0) << r.output;
	EXPECT_NE(r.output.find(cat("failed: DC send: ", retry)), std::string::npos) << r.output;
	EXPECT_NE(r.output.find(cat("connections failed by DC sends: ")), std::string::npos);
}

/* A recovery the device refuses (fault_fw_rate=13: every 13th create or modify fails, the DCI's
 * RESET->RTS among them, as a ConnectX may refuse a MODIFY_QP): the DCI is replaced by a new
 * one, one line says so, the rest are counted, and connections go on being made. */
TEST_F(AppTest, AppDciReconnectReplacesADciWhoseRecoveryIsRefused)
{
	std::string dev = next_name();
	run_result r = run("0-1",
			   cat("--qpn-dev=", dev,
			       ",dc_err_every=50,fault_fw_rate=13 --duration=1 --destroy-sim"),
			   dev);
	EXPECT_RUN_OK(r);
	ASSERT_NE(r.json.find("\"data_path\": true"), std::string::npos) << r.output;
	const double errs = json_num(r.json, "data.error_completions");
	const double recov = json_num(r.json, "data.dci_recoveries");
	const double repl = json_num(r.json, "data.dci_replaced");
	EXPECT_GT(repl, 0) << r.json;
	EXPECT_GE(recov + repl, errs - 1);
	EXPECT_LE(recov + repl, errs);
	EXPECT_GT(json_num(r.json, "connections"), 4 * errs);
	EXPECT_EQ(json_num(r.json, "errors.other"), 0) << r.output;
	EXPECT_NE(r.output.find("its recovery refused"), std::string::npos) << r.output;
	EXPECT_NE(r.output.find("DCIs replaced"), std::string::npos) << r.output;
}

/* Negative control 1: no quarantine, strict policy, a small range: QPNs come back while the
 * server still holds their pair in timewait. */
TEST_F(AppTest, AppDciReconnectStrictWithoutQuarantineGivesStaleRejects)
{
	std::string dev = next_name();
	run_result r = run("0-1",
			   cat("--qpn-dev=", dev,
			       ",max_qpns=64,log_max_alloc=4 --quarantine-us=0 "
			       "--cm-policy=strict --duration=1 --destroy-sim"),
			   dev);
	EXPECT_RUN_OK(r);
	EXPECT_EQ(json_num(r.json, "quarantine_us"), 0);
	EXPECT_GT(json_num(r.json, "stale_rejects"), 0);
	EXPECT_GT(json_num(r.json, "rej.STALE_CONN"), 0);
	EXPECT_GT(json_num(r.json, "cm.stale_rejects_sent"), 0);
	EXPECT_EQ(json_num(r.json, "errors.other"), 0) << "a stale reject must not be an error";
}

/* Negative control 2: live policy, two connections of one node forced onto one QPN. */
TEST_F(AppTest, AppDciReconnectLiveSharedQpnGivesStaleRejects)
{
	std::string dev = next_name();
	run_result r = run("0-1",
			   cat("--qpn-dev=", dev,
			       " --cm-policy=live --force-shared-qpn --duration=1 "
			       "--destroy-sim"),
			   dev);
	EXPECT_RUN_OK(r);
	EXPECT_EQ(json_str(r.json, "cm_policy"), "live");
	EXPECT_GT(json_num(r.json, "stale_rejects"), 0);
	EXPECT_GT(json_num(r.json, "cm.stale_dreqs"), 0) << "the live holder gets a DREQ";
	EXPECT_EQ(json_num(r.json, "errors.other"), 0);
}

/* The live policy with the quarantine on is clean too. */
TEST_F(AppTest, AppDciReconnectLiveWithQuarantineHasNoStaleRejects)
{
	std::string dev = next_name();
	run_result r = run("0-1",
			   cat("--qpn-dev=", dev,
			       " --cm-policy=live --peers=3 "
			       "--connections=2000 --duration=5 --destroy-sim"),
			   dev);
	EXPECT_RUN_OK(r);
	EXPECT_EQ(json_num(r.json, "connections"), 2000);
	EXPECT_EQ(json_num(r.json, "stale_rejects"), 0);
}

TEST_F(AppTest, AppDctAcceptDefaultLayout)
{
	std::string dev = next_name();
	run_result r = run("0-1",
			   cat("--qpn-dev=", dev,
			       " --engine=dct-accept --peers=2 --connections=200 --duration=60 "
			       "--destroy-sim"),
			   dev);
	EXPECT_RUN_OK(r);
	EXPECT_EQ(json_str(r.json, "engine"), "dct-accept");
	EXPECT_EQ(json_str(r.json, "measured_side"), "passive");
	EXPECT_EQ(json_num(r.json, "connections"), 200);
	EXPECT_EQ(json_num(r.json, "stale_rejects"), 0);
	EXPECT_GT(json_num(r.json, "steps.alloc.count"), 0);
	EXPECT_GT(json_num(r.json, "steps.rtu.count"), 0);
	EXPECT_EQ(json_num(r.json, "errors.other"), 0);
}

/* dct-accept is the passive side: with --connections its peer (the active body) opens exactly N
 * connections, and the passive side takes one QPN per REQ, times every RTU, receives every SEND
 * and closes all N; the QPNs it still holds in timewait at the end go back to the pool. */
TEST_F(AppTest, AppDctAcceptCountsThePassiveSide)
{
	std::string dev = next_name();
	run_result r = run("0-1",
			   cat("--qpn-dev=", dev,
			       " --engine=dct-accept --peers=3 "
			       "--connections=500 --duration=5 --destroy-sim"),
			   dev);
	EXPECT_RUN_OK(r);
	EXPECT_EQ(json_str(r.json, "measured_side"), "passive");
	EXPECT_EQ(json_num(r.json, "connections"), 500);
	EXPECT_EQ(json_num(r.json, "steps.alloc.count"), 500);
	EXPECT_EQ(json_num(r.json, "steps.rtu.count"), 500);
	EXPECT_EQ(json_num(r.json, "errors.other"), 0);
	EXPECT_EQ(json_num(r.json, "pool.in_use"), 0) << "every QPN given back";
	if (r.json.find("\"data_path\": true") != std::string::npos) {
		EXPECT_EQ(json_num(r.json, "data.received"), json_num(r.json, "data.sends"));
	}
}

TEST_F(AppTest, AppChurnRunsWithoutErrors)
{
	std::string dev = next_name();
	run_result r = run("0-1",
			   cat("--qpn-dev=", dev,
			       " --engine=churn --peers=4 --seed=7 "
			       "--duration=1 --destroy-sim"),
			   dev);
	EXPECT_RUN_OK(r);
	EXPECT_EQ(json_str(r.json, "engine"), "churn");
	EXPECT_GT(json_num(r.json, "connections"), 100);
	EXPECT_EQ(json_num(r.json, "stale_rejects"), 0);
	EXPECT_EQ(json_num(r.json, "errors.other"), 0);
	EXPECT_EQ(json_num(r.json, "pool.in_use"), 0) << "every QPN given back";
}

TEST_F(AppTest, AppAllocEngine)
{
	std::string dev = next_name();
	run_result r = run("0-1",
			   cat("--qpn-dev=", dev, " --engine=alloc --duration=0.5 --destroy-sim"),
			   dev);
	EXPECT_RUN_OK(r);
	EXPECT_EQ(json_str(r.json, "engine"), "alloc");
	EXPECT_GT(json_num(r.json, "connections"), 1000);
	EXPECT_EQ(json_num(r.json, "errors.other"), 0);
	EXPECT_EQ(json_num(r.json, "pool.in_use"), 0);
}

/* One lcore: the main lcore runs client and server. */
TEST_F(AppTest, AppDciReconnectOnOneLcore)
{
	std::string dev = next_name();
	run_result r = run("0", cat("--qpn-dev=", dev, " --connections=500 --destroy-sim"), dev);
	EXPECT_RUN_OK(r);
	EXPECT_EQ(json_num(r.json, "connections"), 500);
	EXPECT_EQ(json_num(r.json, "stale_rejects"), 0);
}

TEST_F(AppTest, AppPromptDrivenThroughStdin)
{
	std::string dev = next_name();
	run_result r = run("0-1", cat("--qpn-dev=", dev, " -i --destroy-sim"), dev,
			   "help\nshow device\nset cm-policy live\nstart\nshow lcore stats\nstop\n"
			   "show stats\nshow pool\nclear stats\nset engine nosuch\nquit\n",
			   false);
	EXPECT_EQ(r.status, 0) << r.output;
	EXPECT_NE(r.output.find("set quarantine US"), std::string::npos) << r.output;
	EXPECT_NE(r.output.find(cat("device ", dev, ": backend sim")), std::string::npos)
		<< r.output;
	EXPECT_NE(r.output.find("CM policy: live"), std::string::npos) << r.output;
	EXPECT_NE(r.output.find("started engine dci-reconnect"), std::string::npos) << r.output;
	EXPECT_NE(r.output.find("stopped engine dci-reconnect"), std::string::npos) << r.output;
	EXPECT_NE(r.output.find("qpn-testpmd summary"), std::string::npos) << r.output;
	EXPECT_NE(r.output.find(cat("qpn pool qpn_", dev)), std::string::npos) << r.output;
	EXPECT_NE(r.output.find("statistics cleared"), std::string::npos) << r.output;
	EXPECT_EQ(r.output.find("engine: nosuch"), std::string::npos) << r.output;
	EXPECT_NE(r.output.find("bye"), std::string::npos) << r.output;
}

TEST_F(AppTest, AppBadOptionExits2)
{
	std::string dev = next_name();
	run_result r = run("0-1", cat("--qpn-dev=", dev, " --bogus"), dev, "", false);
	EXPECT_EQ(r.status, 2) << r.output;
	EXPECT_NE(r.output.find("unknown option \"--bogus\""), std::string::npos) << r.output;
	r = run("0-1", cat("--qpn-dev=", dev, " --duration=abc"), dev, "", false);
	EXPECT_EQ(r.status, 2) << r.output;
	EXPECT_NE(r.output.find("bad value for --duration"), std::string::npos) << r.output;
	r = run("0-1", cat("--qpn-dev=", dev, " --engine=warp"), dev, "", false);
	EXPECT_EQ(r.status, 2) << r.output;
	EXPECT_NE(r.output.find("unknown engine \"warp\""), std::string::npos) << r.output;
	r = run("0-1", cat("--qpn-dev=", dev, " --cm-policy=lax"), dev, "", false);
	EXPECT_EQ(r.status, 2) << r.output;
}

TEST_F(AppTest, AppHardwareWithoutDeviceFailsCleanly)
{
	std::string dev = next_name();
	run_result r = run("0-1", "--qpn-dev=ib=mlx5_0 --duration=1", dev, "", false);
	EXPECT_EQ(r.status, 1) << r.output;
	EXPECT_NE(r.output.find("mlx5_qpn.hw: no RDMA device \"mlx5_0\""), std::string::npos)
		<< r.output;
}

TEST_F(AppTest, AppBadDevargsFailsCleanly)
{
	std::string dev = next_name();
	run_result r = run("0-1", cat("--qpn-dev=", dev, ",colour=red --duration=1"), dev, "",
			   false);
	/* A devarg the driver's parser refuses is a bad command line (checked before any probe). */
	EXPECT_EQ(r.status, 2) << r.output;
	EXPECT_NE(r.output.find("colour=red"), std::string::npos) << r.output;
}

/* Every line the app printed that is not EAL's. */
std::string
app_lines(const std::string &out)
{
	std::string keep;
	size_t at = 0;
	while (at < out.size()) {
		size_t nl = out.find('\n', at);
		std::string line = out.substr(at, nl == std::string::npos ? std::string::npos :
									    nl - at);
		if (line.rfind("EAL", 0) != 0 && line.rfind("TELEMETRY", 0) != 0 && !line.empty())
			keep += line + "\n";
		if (nl == std::string::npos)
			break;
		at = nl + 1;
	}
	return keep;
}

/*
 * Hostile values of every numeric option: each is refused with exit 2 and exactly one line that
 * names the option and the value as typed, and no device is created (nothing left behind).
 * Before, strtod took "nan" (--peers=nan died of SIGFPE, --duration=nan never ended) and
 * "inf"/"1e3"/" 5", and a value cast to an integer silently became 0.
 */
TEST_F(AppTest, AppHostileNumbersRefusedAsOptions)
{
	struct Case {
		const char *opt;
		const char *line;
	};
	const Case cases[] = {
		{"--peers=nan",
		 "qpn-testpmd: bad value for --peers: \"nan\" (not a decimal integer; expected an integer in 1..32)"},
		{"--duration=nan",
		 "qpn-testpmd: bad value for --duration: \"nan\" (not a decimal number; expected a decimal number in 0.01..86400)"},
		{"--duration=inf",
		 "qpn-testpmd: bad value for --duration: \"inf\" (not a decimal number; expected a decimal number in 0.01..86400)"},
		{"--duration=-1",
		 "qpn-testpmd: bad value for --duration: \"-1\" (not a decimal number; expected a decimal number in 0.01..86400)"},
		{"--duration=1e3",
		 "qpn-testpmd: bad value for --duration: \"1e3\" (not a decimal number; expected a decimal number in 0.01..86400)"},
		{"--duration=",
		 "qpn-testpmd: bad value for --duration: \"\" (empty; expected a decimal number in 0.01..86400)"},
		{"--connections=99999999999999999999",
		 "qpn-testpmd: bad value for --connections: \"99999999999999999999\" (out of range; expected an integer in 1..1000000000000000)"},
		{"--msgs-per-conn=nan",
		 "qpn-testpmd: bad value for --msgs-per-conn: \"nan\" (not a decimal integer; expected an integer in 0..64)"},
		{"--inflight=4x",
		 "qpn-testpmd: bad value for --inflight: \"4x\" (not a decimal integer; expected an integer in 1..64)"},
		{"--quarantine-us=nan",
		 "qpn-testpmd: bad value for --quarantine-us: \"nan\" (not a decimal integer; expected an integer in 0..3600000000)"},
		{"--quarantine-us=-5",
		 "qpn-testpmd: bad value for --quarantine-us: \"-5\" (not a decimal integer; expected an integer in 0..3600000000)"},
		{"--cm-plt=inf",
		 "qpn-testpmd: bad value for --cm-plt: \"inf\" (not a decimal integer; expected an integer in 0..31)"},
		{"--cm-ack-delay=1.5",
		 "qpn-testpmd: bad value for --cm-ack-delay: \"1.5\" (not a decimal integer; expected an integer in 0..31)"},
		{"--seed=0x10",
		 "qpn-testpmd: bad value for --seed: \"0x10\" (not a decimal integer; expected an integer in 1..1000000000000000000)"},
		{"--burst=0",
		 "qpn-testpmd: bad value for --burst: \"0\" (out of range; expected an integer in 1..64)"},
		{"--hold=1e6",
		 "qpn-testpmd: bad value for --hold: \"1e6\" (not a decimal integer; expected an integer in 0..1048576)"},
		{"--hw-port=65536",
		 "qpn-testpmd: bad value for --hw-port: \"65536\" (out of range; expected an integer in 1..65535)"},
		{"--hw-peer=10.0.0.1:nan",
		 "qpn-testpmd: bad value for --hw-peer: \"10.0.0.1:nan\" (port: not a decimal integer; expected an integer in 1..65535)"},
	};
	for (const auto &c : cases) {
		std::string dev = next_name();
		run_result r = run("0-1", cat("--qpn-dev=", dev, " --duration=0.2 ", c.opt), dev,
				   "", false);
		EXPECT_EQ(r.status, 2) << c.opt << "\n" << r.output;
		EXPECT_EQ(app_lines(r.output), cat(c.line, "\n")) << c.opt;
		EXPECT_NE(access(cat("/dev/shm/mlx5_qpn_", dev).c_str(), F_OK), 0) << c.opt;
	}
}

/*
 * An option is reported as the option the user typed, never as a devarg they did not: a bad
 * --qpn-dev is named as typed ("sim,cache=8,", not the "sim,cache=8,,quarantine_us=16000" the
 * app hands the driver), and CM exponents whose timewait exceeds the longest quarantine are
 * refused as options (not as "bad devarg quarantine_us=8388608000").
 */
TEST_F(AppTest, AppOptionsNeverReportedAsDevargs)
{
	std::string dev = next_name();
	run_result r = run("0-1", cat("--qpn-dev=", dev, ",cache=8, --duration=0.2"), dev, "",
			   false);
	EXPECT_EQ(r.status, 2) << r.output;
	EXPECT_EQ(app_lines(r.output),
		  cat("qpn-testpmd: bad value for --qpn-dev: \"", dev, ",cache=8,\" (bad devarg ",
		      dev, ",cache=8,: empty pair (a trailing ','))\n"));
	r = run("0-1", cat("--qpn-dev=", dev, ",cache==8 --duration=0.2"), dev, "", false);
	EXPECT_EQ(r.status, 2) << r.output;
	EXPECT_EQ(app_lines(r.output), cat("qpn-testpmd: bad value for --qpn-dev: \"", dev,
					   ",cache==8\" (bad devarg "
					   "cache==8: more than one '=' (expected key=value))\n"));
	r = run("0-1", cat("--qpn-dev=", dev, " --cm-plt=31 --duration=0.2"), dev, "", false);
	EXPECT_EQ(r.status, 2) << r.output;
	EXPECT_EQ(r.output.find("devarg"), std::string::npos) << r.output;
	EXPECT_NE(r.output.find("--cm-plt=31 --cm-ack-delay=10 give a CM timewait of 8388608 ms"),
		  std::string::npos)
		<< r.output;
	EXPECT_NE(access(cat("/dev/shm/mlx5_qpn_", dev).c_str(), F_OK), 0);
	/* With an explicit quarantine the same exponents are fine. */
	r = run("0-1",
		cat("--qpn-dev=", dev,
		    " --cm-plt=31 --quarantine-us=1000 --engine=alloc "
		    "--duration=0.2 --destroy-sim"),
		dev);
	EXPECT_EQ(r.status, 0) << r.output;
}

/* The prompt's numeric `set` refuses the same values in one line naming the command and the
 * value, and keeps running (before, cmdline's RTE_UINT64 token took 0x10 and answered "nan"
 * with a bare "Bad arguments"). A devarg quarantine_us given first is replaced, not mangled. */
TEST_F(AppTest, AppPromptRefusesHostileNumbers)
{
	std::string dev = next_name();
	run_result r = run("0-1", cat("--qpn-dev=", dev, ",quarantine_us=5000 -i --destroy-sim"),
			   dev,
			   "set quarantine nan\nset quarantine 0x10\nset quarantine -1\n"
			   "set quarantine 3600000001\nset quarantine 7000\nshow device\nquit\n",
			   false);
	EXPECT_EQ(r.status, 0) << r.output;
	for (const char *v : {"nan", "0x10", "-1"})
		EXPECT_NE(r.output.find(cat("qpn-testpmd: bad value for set quarantine: \"", v,
					    "\" (not a decimal integer; expected an integer in "
					    "0..3600000000)")),
			  std::string::npos)
			<< v << r.output;
	EXPECT_NE(r.output.find("qpn-testpmd: bad value for set quarantine: \"3600000001\" (out of "
				"range; expected an integer in 0..3600000000)"),
		  std::string::npos)
		<< r.output;
	EXPECT_NE(r.output.find("quarantine: 7000 us (devices re-probed"), std::string::npos)
		<< r.output;
	EXPECT_NE(r.output.find("quarantine 7000 us"), std::string::npos) << r.output;
	EXPECT_EQ(r.output.find("Bad arguments"), std::string::npos) << r.output;
}

/* qpn-perf's options: the same parser, the same one line, exit 2. */
TEST_F(AppTest, AppPerfHostileOptionsRefused)
{
	std::string perf = app_.substr(0, app_.rfind("/qpn-testpmd/")) + "/qpn-perf/qpn-perf";
	ASSERT_EQ(access(perf.c_str(), X_OK), 0) << perf;
	struct Case {
		const char *opt;
		const char *line;
	};
	const Case cases[] = {
		{"--cache=nan",
		 "qpn-perf: bad value for --cache: \"nan\" (not a decimal integer; expected an integer in 1..65536)"},
		{"--repeat=-1",
		 "qpn-perf: bad value for --repeat: \"-1\" (not a decimal integer; expected an integer in 1..1000)"},
		{"--budget-ms=99999999999999999999",
		 "qpn-perf: bad value for --budget-ms: \"99999999999999999999\" (out of range; expected an integer in 1..60000)"},
		{"--scaling=maybe",
		 "qpn-perf: bad value for --scaling: \"maybe\" (expected on or off)"},
		{"--range", "qpn-perf: option \"--range\" needs a value (see --help)"},
		/* A control character in a string option stays on the refusal's one line. */
		{"--only=\"$(printf 'qpnpool\\nx')\"",
		 "qpn-perf: bad value for --only: \"qpnpool\\x0ax\" (unknown peer \"qpnpool\\x0ax\"; see --help for the list)"},
	};
	for (const auto &c : cases) {
		std::string cmd = cat("timeout -k 5 60 ", perf,
				      " --no-huge --no-pci -m 256 -l 0-1 "
				      "--file-prefix=perfbad",
				      std::to_string(getpid()), " --log-level=lib.eal:error -- ",
				      c.opt, " < /dev/null 2>&1");
		std::string out;
		EXPECT_EQ(test_helpers::run_cmd(cmd, &out), 2) << c.opt << "\n" << out;
		EXPECT_EQ(app_lines(out), cat(c.line, "\n")) << c.opt;
	}
}

/* Two processes on one emulated device: a server (passive side, --role=server) in the
 * background and a client (--role=client) that finds it through the shared-memory CM fabric's
 * service directory. The server outlives the client by far (12 s against the client's start-up,
 * up to 5 s of waiting for the server and 1.5 s of run): under ThreadSanitizer on a loaded
 * 2-core machine a 3 s server ended while the client still had connections open. Each is its own DPDK primary (own --file-prefix); the client's worker is on
 * the other core (--main-lcore=1) so the two busy loops do not share one. */
TEST_F(AppTest, AppTwoProcessClientServer)
{
	std::string dev = next_name();
	std::string fab = cat("fab", std::to_string(getpid()));
	mlx5_qpn_cm_shm_fabric_unlink(fab.c_str());
	std::string sjson = cat(::testing::TempDir(), "qpn_app_", dev, "_srv.json");
	std::remove(sjson.c_str());
	/* Once the client has exited, every connection it completed has been accepted and closed
	 * on the server's side: SIGINT then ends the server's run in order (summary and JSON, as at
	 * the end of its duration; AppSigintStopsTheRunCleanly). Its --duration=12 is only a cap, for
	 * a client that starts slowly (a sanitizer build on a loaded machine): waiting it out would
	 * be a third of app-e2e's time in every build. */
	mp_test::Proc srv;
	ASSERT_TRUE(srv.start({app_, "--no-huge", "--no-pci", "-m", "256", "-l", "0-1",
			       cat("--file-prefix=", dev, "s"), "--log-level=lib.eal:error", "--",
			       "--role=server", cat("--fabric=", fab), cat("--qpn-dev=", dev),
			       "--duration=12", cat("--json=", sjson)}));
	/* The client waits (up to 5 s) for the server to publish its node and DCT. */
	run_result c =
		run("0-1 --main-lcore=1",
		    cat("--role=client --fabric=", fab, " --qpn-dev=", dev, " --duration=1.5"),
		    cat(dev, "c"));
	ASSERT_EQ(kill(srv.pid(), SIGINT), 0);
	run_result s;
	s.status = srv.wait();
	s.json = test_helpers::slurp(sjson);
	s.output = srv.output();
	std::remove(sjson.c_str());
	/* Stopped by our signal, or (the client slower than the cap) at the end of its duration. */
	if (s.status == 128 + SIGINT) {
		EXPECT_NE(s.output.find("stopped by signal 2"), std::string::npos) << s.output;
		s.status = 0;
	}
	/* Its last user removed the fabric's segment when it exited (nothing left in /dev/shm). */
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_unlink(fab.c_str()), -ENOENT)
		<< "the fabric outlived its users";

	EXPECT_RUN_OK(c);
	EXPECT_RUN_OK(s);
	EXPECT_NE(c.output.find("server node(s) on CM fabric"), std::string::npos) << c.output;
	EXPECT_EQ(json_str(c.json, "role"), "client");
	EXPECT_EQ(json_str(s.json, "role"), "server");
	EXPECT_EQ(json_str(s.json, "engine"), "dct-accept");
	EXPECT_EQ(json_str(s.json, "measured_side"), "passive");
	double cc = json_num(c.json, "connections"), sc = json_num(s.json, "connections");
	EXPECT_GT(cc, 0);
	EXPECT_GT(sc, 0);
	/* Every connection the client completed was accepted and closed by the server. */
	EXPECT_GE(sc, cc);
	EXPECT_EQ(json_num(c.json, "stale_rejects"), 0);
	EXPECT_EQ(json_num(s.json, "stale_rejects"), 0);
	EXPECT_EQ(json_num(s.json, "cm.stale_rejects_sent"), 0);
	EXPECT_EQ(json_num(c.json, "cm.stale_rejects_sent"), 0);
	EXPECT_EQ(json_num(c.json, "errors.other"), 0);
	EXPECT_EQ(json_num(s.json, "errors.other"), 0);
	/* Both ends on the same device: same node GUID. */
	EXPECT_EQ(json_str(c.json, "device.node_guid"), json_str(s.json, "device.node_guid"));
	if (c.json.find("\"data_path\": true") != std::string::npos) {
		/* The client's SENDs were received by the server process's DCT. */
		EXPECT_GT(json_num(c.json, "data.sends"), 0);
		EXPECT_EQ(json_num(c.json, "data.error_completions"), 0);
		EXPECT_EQ(json_num(c.json, "data.sends"), json_num(c.json, "data.completions"));
		EXPECT_GE(json_num(s.json, "data.received"), json_num(c.json, "data.completions"));
	}
}

/* One process over the shared-memory fabric (--role=both --fabric): same results as in-process. */
TEST_F(AppTest, AppOneProcessOverSharedMemoryFabric)
{
	std::string dev = next_name();
	std::string fab = cat("fab1_", std::to_string(getpid()));
	/* A count, not a time (the duration is only a cap): 0.5 s held 12 connections once at
	 * load ~10 under TSan, and the test is about the fabric, not the rate. */
	run_result r = run("0-1",
			   cat("--fabric=", fab, " --qpn-dev=", dev,
			       " --peers=2 --connections=200 --duration=60 "
			       "--destroy-sim"),
			   dev);
	mlx5_qpn_cm_shm_fabric_unlink(fab.c_str());
	EXPECT_RUN_OK(r);
	EXPECT_EQ(json_str(r.json, "fabric"), fab);
	EXPECT_EQ(json_num(r.json, "connections"), 200);
	EXPECT_EQ(json_num(r.json, "stale_rejects"), 0);
	EXPECT_EQ(json_num(r.json, "errors.other"), 0);
}

TEST_F(AppTest, AppRoleNeedsFabric)
{
	std::string dev = next_name();
	run_result r = run("0-1", cat("--qpn-dev=", dev, " --role=server"), dev, "", false);
	EXPECT_EQ(r.status, 2) << r.output;
	EXPECT_NE(r.output.find("needs --fabric"), std::string::npos) << r.output;
	r = run("0-1", cat("--qpn-dev=", dev, " --role=client --fabric=f --engine=alloc"), dev, "",
		false);
	EXPECT_EQ(r.status, 2) << r.output;
	r = run("0-1", cat("--qpn-dev=", dev, " --role=primary --fabric=f"), dev, "", false);
	EXPECT_EQ(r.status, 2) << r.output;
}

/* qpn-testpmd as a DPDK secondary client (--proc-type=secondary) beside a primary qpn-testpmd
 * whose alloc engine runs meanwhile: the secondary attaches to the primary's device and pool and
 * runs its own engine without errors; the primary carries on and stops cleanly. Needs hugepages
 * (DPDK secondaries do): as root the test sets them up, else it skips. */
TEST_F(AppTest, AppSecondaryClientBesidePrimary)
{
	std::string why = mp_test::hugepages_ready();
	if (!why.empty())
		GTEST_SKIP() << why;
	std::string dev = next_name();
	std::string prefix = cat("qpn_app_mp_", dev);
	std::string json = cat(::testing::TempDir(), "qpn_app_", prefix, ".json");
	std::remove(json.c_str());
	/* Each phase's duration is printed: this test once took 30 s instead of 2 under load. */
	phase_clock phases;
	mp_test::Proc prim;
	ASSERT_TRUE(prim.start({app_, "-l", "0-1", "--no-pci", mp_test::kPrimaryBaseVa,
				cat("--file-prefix=", prefix), "--log-level=lib.eal:error", "--",
				cat("--qpn-dev=", dev), "--engine=alloc", "-i"}));
	ASSERT_TRUE(prim.send("start"));
	ASSERT_TRUE(prim.wait_output("started engine alloc")) << prim.output();
	phases.done("primary started");
	mp_test::Proc sec;
	ASSERT_TRUE(sec.start({app_, "-l", "0", "--no-pci", "--proc-type=secondary",
			       cat("--file-prefix=", prefix), "--log-level=lib.eal:error", "--",
			       cat("--qpn-dev=", dev), "--engine=alloc", "--duration=0.5",
			       cat("--json=", json)}));
	sec.close_stdin();
	int st = sec.wait();
	phases.done("secondary ran");
	ASSERT_TRUE(prim.send("stop"));
	ASSERT_TRUE(prim.send("quit"));
	prim.close_stdin();
	EXPECT_EQ(prim.wait(), 0) << prim.output();
	phases.done("primary stopped");
	phases.print();
	mp_test::remove_instance(prefix);
	EXPECT_EQ(st, 0) << sec.output();
	EXPECT_NE(sec.output().find(cat("secondary process: device ", dev, " of the primary")),
		  std::string::npos)
		<< sec.output();
	std::string js = test_helpers::slurp(json);
	std::remove(json.c_str());
	EXPECT_EQ(json_str(js, "engine"), "alloc") << sec.output();
	EXPECT_GT(json_num(js, "connections"), 100);
	EXPECT_EQ(json_num(js, "errors.other"), 0);
	EXPECT_NE(prim.output().find("stopped engine alloc"), std::string::npos) << prim.output();
}

/* testpmd's habit: SIGINT ends a run as its end would. Mid-run (after the first progress line,
 * so one timeline point is in), the summary is printed, the JSON written with the timeline and
 * every step field, the device purged (--destroy-sim), and the exit status is 128 + SIGINT. */
TEST_F(AppTest, AppSigintStopsTheRunCleanly)
{
	std::string dev = next_name();
	std::string json = cat(::testing::TempDir(), "qpn_app_", dev, ".json");
	std::remove(json.c_str());
	mp_test::Proc p;
	ASSERT_TRUE(p.start({app_, "--no-huge", "--no-pci", "-m", "256", "-l", "0-1",
			     cat("--file-prefix=", dev), "--log-level=lib.eal:error", "--",
			     cat("--qpn-dev=", dev), "--duration=120", "--stats-period=1",
			     cat("--json=", json), "--destroy-sim"}));
	ASSERT_TRUE(p.wait_output(" conns (")) << p.output();
	ASSERT_EQ(kill(p.pid(), SIGINT), 0);
	EXPECT_EQ(p.wait(), 128 + SIGINT) << p.output();
	const std::string &out = p.output();
	EXPECT_NE(out.find("qpn-testpmd summary: engine dci-reconnect"), std::string::npos) << out;
	EXPECT_NE(out.find("p99.9"), std::string::npos) << out;
	EXPECT_NE(out.find("stopped by signal 2"), std::string::npos) << out;
	std::string js = test_helpers::slurp(json);
	std::remove(json.c_str());
	ASSERT_FALSE(js.empty()) << out;
	EXPECT_LT(json_num(js, "duration_s"), 100) << "the signal ended the run";
	EXPECT_GT(json_num(js, "connections"), 0);
	EXPECT_GT(json_num(js, "timeline.t_s"), 0) << js;
	EXPECT_GT(json_num(js, "timeline.connections"), 0) << js;
	for (const char *k :
	     {"count", "min_ns", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"})
		EXPECT_GE(json_num(js, cat("steps.cycle.", k)), 0) << k;
	EXPECT_GE(json_num(js, "steps.cycle.max_ns"), json_num(js, "steps.cycle.p999_ns"));
	EXPECT_GE(json_num(js, "steps.cycle.p999_ns"), json_num(js, "steps.cycle.p50_ns"));
	EXPECT_GE(json_num(js, "steps.cycle.p50_ns"), json_num(js, "steps.cycle.min_ns"));
	size_t h;
	ASSERT_TRUE(json_find(js, "steps.alloc.hist", &h));
	EXPECT_EQ(js.compare(h, 1, "["), 0);
	EXPECT_NE(js.find("\"meta\""), std::string::npos);
	EXPECT_NE(access(cat("/dev/shm/mlx5_qpn_", dev).c_str(), F_OK), 0) << "device not purged";
}

namespace {

/* The `show stats` line of a running engine: this start's clock and the total, count, rates, and
 * what the rate is since ("start" or "last show"). */
struct live_line {
	double t = -1, total = -1, since = -1, avg = -1;
	unsigned long long conns = 0;
	std::string since_what;
};

std::vector<live_line>
live_lines(const std::string &out)
{
	std::vector<live_line> v;
	for (size_t at = out.find("  ["); at != std::string::npos; at = out.find("  [", at + 1)) {
		live_line l;
		double ago;
		char what[32];
		if (sscanf(out.c_str() + at,
			   "  [%lf s since start, %lf s run in all] %llu conns: %lf/s since the "
			   "%31[a-z ] (%lf s ago), %lf/s on average",
			   &l.t, &l.total, &l.conns, &l.since, what, &ago, &l.avg) == 7) {
			l.since_what = what;
			while (!l.since_what.empty() && l.since_what.back() == ' ')
				l.since_what.pop_back();
			v.push_back(l);
		}
	}
	return v;
}

} // namespace

/* The prompt as testpmd's: `show stats` while running gives the real clock and sane rates since
 * the last show; `clear stats` zeroes what it says (CM, pool and device counters too); `set`
 * and `show config` round-trip and refuse a bad value in one line; `quit` prints the summary. */
TEST_F(AppTest, AppPromptLiveStatsClearAndConfig)
{
	std::string dev = next_name();
	mp_test::Proc p;
	ASSERT_TRUE(p.start({app_, "--no-huge", "--no-pci", "-m", "256", "-l", "0-1",
			     cat("--file-prefix=", dev), "--log-level=lib.eal:error", "--",
			     cat("--qpn-dev=", dev), "-i", "--destroy-sim"}));
	ASSERT_TRUE(p.send("start"));
	ASSERT_TRUE(p.wait_output("started engine dci-reconnect")) << p.output();
	usleep(300 * 1000); /* let it run; nothing below depends on how long */
	ASSERT_TRUE(p.send("show stats"));
	ASSERT_TRUE(p.wait_output("since the start")) << p.output();
	usleep(500 * 1000);
	ASSERT_TRUE(p.send("show stats"));
	ASSERT_TRUE(p.send("show config"));
	ASSERT_TRUE(p.wait_output("force-shared-qpn")) << p.output();
	p.reply(10); /* the lines read so far into output() */
	std::vector<live_line> l = live_lines(p.output());
	ASSERT_EQ(l.size(), 2u) << p.output();
	EXPECT_GT(l[0].t, 0) << "a real clock";
	EXPECT_GT(l[1].t, l[0].t);
	EXPECT_EQ(l[0].since_what, "start") << p.output();
	EXPECT_EQ(l[1].since_what, "last show") << p.output();
	EXPECT_GT(l[1].conns, 0u) << p.output();
	EXPECT_GT(l[1].since, 0) << p.output();
	EXPECT_LT(l[1].since, 1e8) << p.output();
	EXPECT_GT(l[1].avg, 0) << p.output();
	EXPECT_LT(l[1].avg, 1e8) << p.output();

	ASSERT_TRUE(p.send("stop"));
	ASSERT_TRUE(p.send("clear stats"));
	ASSERT_TRUE(p.send("show stats"));
	ASSERT_TRUE(p.send("set duration 7"));
	ASSERT_TRUE(p.send("set peers 99"));
	ASSERT_TRUE(p.send("show config"));
	ASSERT_TRUE(p.send("quit"));
	p.close_stdin();
	EXPECT_EQ(p.wait(), 0) << p.output();
	const std::string &out = p.output();
	size_t cleared = out.find("statistics cleared: connections, steps, rejects");
	ASSERT_NE(cleared, std::string::npos) << out;
	std::string after = out.substr(cleared);
	for (const char *zero : {"connections: 0 (active side)", "CM: established 0,",
				 "allocs 0, frees 0, cache hits 0", "ranges reserved 0 (0 QPNs)"})
		EXPECT_NE(after.find(zero), std::string::npos) << zero << "\n" << after;
	EXPECT_NE(after.find("duration: 7"), std::string::npos) << after;
	EXPECT_NE(after.find("  duration       7 (batch mode only"), std::string::npos) << after;
	EXPECT_NE(after.find("qpn-testpmd: bad value for set peers: \"99\" (out of range; "
			     "expected an integer in 1..32)"),
		  std::string::npos)
		<< after;
	EXPECT_NE(after.find("  peers          1\n"), std::string::npos) << after;
	size_t bye = after.find("bye");
	ASSERT_NE(bye, std::string::npos) << after;
	EXPECT_NE(after.find("qpn-testpmd summary", bye), std::string::npos) << "quit: no summary";
}
