/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd with several server lcores (--server-lcores): the peers split among them, each
 * server lcore polling only its own peers' CM agents and DCTs. The built binary runs as a
 * subprocess (as in test_app.cpp) on more lcores than this VM has CPUs (--lcores='(0-3)@(0-1)':
 * four EAL threads on two CPUs), and its JSON says what each server did: connections made, no
 * stale reject and no error anywhere (the CM's checks are per peer, and a peer stays on one
 * lcore), and every server lcore served connections. Counts only, no timing: on two shared CPUs
 * the rate says nothing.
 */
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "common/test_helpers.h"
#include "mlx5_qpn_cm.h"
#include "mlx5_qpn.h"

namespace {

/* The number after "key": at or after FROM in qpn-testpmd's JSON (-1: none); *at: where. */
double
num_after(const std::string &js, const std::string &key, size_t from, size_t *at = nullptr)
{
	size_t p = js.find("\"" + key + "\":", from);
	if (p == std::string::npos)
		return -1;
	p += key.size() + 3;
	if (at != nullptr)
		*at = p;
	return std::strtod(js.c_str() + p, nullptr);
}

/* Server K's entry of "per_server" (where it starts, or npos). */
size_t
server_entry(const std::string &js, unsigned k)
{
	size_t list = js.find("\"per_server\":");
	if (list == std::string::npos)
		return list;
	return js.find("\"server\": " + std::to_string(k) + ",", list);
}

class TestpmdServerLcores : public ::testing::Test {
protected:
	void SetUp() override
	{
		app_ = test_helpers::build_path("app/qpn-testpmd/qpn-testpmd");
		ASSERT_EQ(access(app_.c_str(), X_OK), 0) << "qpn-testpmd not built at " << app_;
		static unsigned n;
		name_ = "sim_sl" + std::to_string(getpid()) + "_" + std::to_string(n++);
		json_ = ::testing::TempDir() + "qpn_srv_" + name_ + ".json";
		out_ = ::testing::TempDir() + "qpn_srv_" + name_ + ".out";
	}

	void TearDown() override
	{
		mlx5_qpn_dev_purge(name_.c_str()); /* -ENOENT when --destroy-sim did it */
		std::remove(json_.c_str());
		std::remove(out_.c_str());
	}

	/* The shell command of one qpn-testpmd run: EAL args EAL, file prefix PREFIX, OPTS.
	 * `timeout --foreground`: a SIGINT sent to timeout reaches qpn-testpmd once (without it,
	 * timeout passes it on and also sends it to its own process group: a second signal, which
	 * qpn-testpmd takes as "exit at once"). */
	std::string cmd(const std::string &eal, const std::string &prefix, const std::string &opts,
			unsigned timeout_s)
	{
		return "timeout --foreground -k 5 " + std::to_string(timeout_s) + " " + app_ +
		       " --no-huge --no-pci -m 256 " + eal + " --file-prefix=" + prefix +
		       " --log-level=lib.eal:error -- --qpn-dev=" + name_ + keys_ + " " + opts;
	}

	/* One batch run in this test's own process (file prefix and device NAME_) on the lcores of
	 * EAL with OPTS, ended by --destroy-sim, its JSON in JSON_: the output in *out, the exit
	 * status checked, the JSON returned. */
	std::string run_batch(const std::string &eal, const std::string &opts, std::string *out)
	{
		const std::string c = cmd(eal, name_, opts + " --destroy-sim --json=" + json_, 60);
		EXPECT_EQ(test_helpers::run_cmd(c + " < /dev/null 2>&1", out), 0) << *out;
		return test_helpers::slurp(json_);
	}

	/* What every run must show: connections, no stale reject, no error, and each of the
	 * NB server lcores served connections on lcore FIRST_LCORE + k. */
	void expect_servers_served(const std::string &js, unsigned nb, unsigned first_lcore,
				   const std::string &out)
	{
		ASSERT_FALSE(js.empty()) << out;
		EXPECT_EQ(num_after(js, "server_lcores", 0), nb) << js;
		EXPECT_EQ(num_after(js, "stale_rejects", 0), 0) << js;
		EXPECT_EQ(num_after(js, "stale_rejects_sent", 0), 0) << js;
		EXPECT_EQ(num_after(js, "stale_dreqs", 0), 0) << js;
		EXPECT_EQ(num_after(js, "other", js.find("\"errors\": {")), 0) << js;
		for (unsigned k = 0; k < nb; k++) {
			size_t at = server_entry(js, k);
			ASSERT_NE(at, std::string::npos) << "no server " << k << ": " << js;
			EXPECT_EQ(num_after(js, "lcore", at), first_lcore + k) << js;
			EXPECT_GT(num_after(js, "connections", at), 0) << "server " << k << js;
			EXPECT_EQ(num_after(js, "stale_rejects", at), 0) << js;
			EXPECT_EQ(num_after(js, "errors", at), 0) << js;
		}
		EXPECT_EQ(server_entry(js, nb), std::string::npos) << "one server too many: " << js;
	}

	std::string app_, name_, json_, out_;
	std::string keys_; /* devargs after the device's name (",max_qpns=...") */
};

/* The start-up line that says the device's QPNs cap conns/s (run.cpp, qpn_cap_check). */
class TestpmdQpnCap : public TestpmdServerLcores {
protected:
	/* The keys of qpn-testpmd's default device, as its --help gives them ("default
	 * sim0,KEYS)"), for a device of this test's own name. */
	std::string default_keys()
	{
		std::string out;
		test_helpers::run_cmd(cmd("-l 0", name_, "--help", 30) + " < /dev/null 2>&1", &out);
		const std::string mark = "default sim0";
		size_t at = out.find(mark);
		if (at == std::string::npos)
			return "?";
		at += mark.size();
		return out.substr(at, out.find(')', at) - at);
	}
};

/* A 1 s timewait (packet life time 16, ACK delay 16: 1024 ms) on the CM's both sides. */
const char *const kTw1s = "--cm-plt=16 --cm-ack-delay=16";

} // namespace

/* One process, two server lcores (the last two workers) and one client lcore on two CPUs: the
 * four peers split two and two, each server's connections accepted and closed by it alone. */
TEST_F(TestpmdServerLcores, SplitThePeers)
{
	std::string out;
	const std::string js = run_batch("--lcores='(0-3)@(0-1)'",
					 "--peers=4 --server-lcores=2 --duration=1.5", &out);
	expect_servers_served(js, 2, 2, out);
	const double conns = num_after(js, "connections", 0);
	EXPECT_GT(conns, 0) << js;
	/* Every connection the client completed was accepted and closed by one of the servers. */
	double served = 0;
	for (unsigned k = 0; k < 2; k++)
		served += num_after(js, "connections", server_entry(js, k));
	EXPECT_GE(served, conns) << js;
	EXPECT_NE(out.find("server side 0"), std::string::npos) << out;
	EXPECT_NE(out.find("server side 1"), std::string::npos) << out;
}

/* --co-poll: no dedicated server lcore; each of the two workers is a client and polls one
 * server in its own loop (peers 0 and 2 on lcore 1, peers 1 and 3 on lcore 2). */
TEST_F(TestpmdServerLcores, CoPolledByTheClients)
{
	std::string out;
	const std::string js = run_batch("--lcores='(0-2)@(0-1)'",
					 "--peers=4 --server-lcores=2 --co-poll --duration=1.5",
					 &out);
	expect_servers_served(js, 2, 1, out);
	EXPECT_GT(num_after(js, "connections", 0), 0) << js;
	EXPECT_NE(out.find("client+server"), std::string::npos) << out;
}

/* Asked for more server lcores than there are peers: one line says so, each peer its server. */
TEST_F(TestpmdServerLcores, CappedByPeers)
{
	std::string out;
	const std::string js = run_batch("--lcores='(0-3)@(0-1)'",
					 "--peers=2 --server-lcores=4 --duration=0.5", &out);
	EXPECT_NE(out.find("qpn-testpmd: 2 server lcore(s), not 4 (fewer --peers)"),
		  std::string::npos)
		<< out;
	expect_servers_served(js, 2, 2, out);
}

/* `set server-lcores` and `show config` at the prompt; a bad value refused with one line. */
TEST_F(TestpmdServerLcores, AtThePrompt)
{
	std::string out;
	std::string in = ::testing::TempDir() + "qpn_srv_" + name_ + ".in";
	std::ofstream(in) << "set server-lcores 17\nset server-lcores 3\nshow config\nquit\n";
	EXPECT_EQ(test_helpers::run_cmd(cmd("-l 0-1", name_, "-i --destroy-sim", 60) + " < " + in +
						" 2>&1",
					&out),
		  0)
		<< out;
	std::remove(in.c_str());
	EXPECT_NE(out.find("bad value for set server-lcores: \"17\" (out of range; expected an "
			   "integer in 1..16)"),
		  std::string::npos)
		<< out;
	EXPECT_NE(out.find("  server-lcores  3\n"), std::string::npos) << out;
	EXPECT_NE(out.find("  idle-yield     off\n"), std::string::npos) << out;
	EXPECT_NE(out.find("  co-poll        off\n"), std::string::npos) << out;
}

/* --role=server in a process of its own, its two server lcores serving the client process's
 * connections (over the shared-memory fabric), the server lcores yielding when idle. */
TEST_F(TestpmdServerLcores, InAServerProcess)
{
	const std::string fab = "fabsl" + std::to_string(getpid());
	mlx5_qpn_cm_shm_fabric_unlink(fab.c_str());
	const std::string sjson = json_ + ".srv";
	/* The server's 10 s are a cap (a slow client start under a sanitizer): SIGINT ends its run
	 * in order once the client is done (its connections were served by then), instead of the
	 * test waiting the 10 s out in every build. */
	int spid = 0;
	FILE *srv = test_helpers::start_cmd(
		cmd("--lcores='(0-2)@(0-1)'", name_ + "s",
		    "--role=server --fabric=" + fab +
			    " --peers=2 --server-lcores=2 --idle-yield --duration=10 "
			    "--json=" +
			    sjson,
		    40) +
			" < /dev/null > " + out_ + " 2>&1",
		&spid);
	ASSERT_NE(srv, nullptr);
	std::string cout;
	int cst = test_helpers::run_cmd(cmd("-l 0-1 --main-lcore=1", name_ + "c",
					    "--role=client --fabric=" + fab +
						    " --peers=2 --duration=1.5 --json=" + json_,
					    40) +
						" < /dev/null 2>&1",
					&cout);
	kill(spid, SIGINT); /* `timeout` passes it on */
	int st = pclose(srv);
	const std::string sout = test_helpers::slurp(out_), sjs = test_helpers::slurp(sjson),
			  cjs = test_helpers::slurp(json_);
	std::remove(sjson.c_str());
	mlx5_qpn_cm_shm_fabric_unlink(fab.c_str());
	EXPECT_EQ(cst, 0) << cout;
	/* Stopped by our signal in order, or (a client slower than the cap) at its end. */
	bool by_signal = WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGINT;
	EXPECT_TRUE(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || by_signal)) << sout;
	if (by_signal) {
		EXPECT_NE(sout.find("stopped by signal 2"), std::string::npos) << sout;
	}
	ASSERT_FALSE(cjs.empty()) << cout;
	EXPECT_GT(num_after(cjs, "connections", 0), 0) << cjs;
	EXPECT_EQ(num_after(cjs, "stale_rejects", 0), 0) << cjs;
	EXPECT_EQ(num_after(cjs, "other", cjs.find("\"errors\": {")), 0) << cjs;
	/* The server process's lcores 1 and 2 are its two servers (its first workers). */
	expect_servers_served(sjs, 2, 1, sout);
}

/* 4096 QPNs at a 1 s timewait: each connection holds 3.072 s of QPNs (the client's quarantined
 * 1.024 s, the server's through its 1.024 s timewait and then quarantined), so 1333 conns/s at
 * most, far below one client lcore: one line at start says so, and the JSON carries it. */
TEST_F(TestpmdQpnCap, SaidForASmallDeviceAndALongTimewait)
{
	keys_ = ",max_qpns=4096";
	std::string out;
	const std::string js = run_batch("-l 0-1", std::string(kTw1s) + " --duration=0.3", &out);
	EXPECT_NE(out.find(
			  "qpn-testpmd: the device's QPNs cap conns/s at 1333 (4096 QPNs / 3.072 s "
			  "held per connection, timewait 1024 ms, quarantine 1024 ms), below the "
			  "~300000 of 1 client lcore(s)\n"),
		  std::string::npos)
		<< out;
	EXPECT_NEAR(num_after(js, "qpn_cap_conn_per_sec", 0), 4096 / 3.072, 0.01) << js;
	EXPECT_NEAR(num_after(js, "qpn_hold_s_per_conn", 0), 3.072, 1e-9) << js;
	EXPECT_NE(js.find("\"qpn_capped\": true"), std::string::npos) << js;
}

/* The default device at the same 1 s timewait: its 2^20 QPNs allow ~341k conns/s, above what
 * the lcores reach, and nothing is said. */
TEST_F(TestpmdQpnCap, NotSaidForTheDefaultDevice)
{
	keys_ = default_keys();
	ASSERT_EQ(keys_.rfind(",max_qpns=", 0), 0u) << keys_;
	std::string out;
	const std::string js = run_batch("-l 0-1", std::string(kTw1s) + " --duration=0.3", &out);
	EXPECT_EQ(out.find("QPNs cap conns/s"), std::string::npos) << out;
	EXPECT_NEAR(num_after(js, "qpn_cap_conn_per_sec", 0), 1048576 / 3.072, 1) << js;
	EXPECT_NE(js.find("\"qpn_capped\": false"), std::string::npos) << js;
}
