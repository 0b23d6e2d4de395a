/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn_soak: multi-process churn on one emulated device, with SIGKILLs at random points and
 * firmware fault injection, judged by an independent checker (soak_check.h).
 *
 *   qpn_soak --seconds N [--procs P] [--quarantine-ms Q] [--dir D] [--json F] [--seed S]
 *
 * The driver (no EAL) keeps P worker processes running. Each worker is a DPDK primary of its
 * own (--no-huge, own --file-prefix) that probes the same emulated device — as separate
 * applications on one HCA do — and allocates, holds and frees QPNs at full speed, logging every
 * event (soak_log.h). Every 50-400 ms the driver SIGKILLs a random worker (during start-up,
 * inside a reservation with the device mutex held — commands are slowed to make that common —,
 * inside a pool call) and starts a new one; workers also close the device and exit by
 * themselves now and then. An observer process keeps the device open throughout; at the end it
 * waits out the quarantine and takes every QPN the device has (invariant 4: nothing lost).
 * Prints operations, kills, QPNs reclaimed, faults and violations; exit 0 only with 0 of them.
 */
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rte_common.h>
#include <rte_eal.h>

#include "mlx5_qpn.h"
#include "mlx5_qpn_dev_internal.h"
#include "sim/mlx5_qpn_sim.h"
#include "soak_check.h"

using namespace soak;

namespace {

/*
 * The device every process opens. Commands are slowed so that kills often land inside one, and
 * the emulated firmware hands out the lowest free block (fw_first_fit), so a range destroyed at a
 * death comes straight back to the next process — as firmware may — and only the lease keeps
 * its QPNs out of use for the quarantine.
 */
constexpr uint32_t kLogMaxNum = 16; /* the device reserves at most 2^16 QPNs in total */

std::string
devargs(const std::string &dev, uint64_t q_ms, bool observer)
{
	char b[512];
	snprintf(b, sizeof(b),
		 "%s,quarantine_us=%" PRIu64 ",cache=16,log_max_alloc=10,log_gran=4,"
		 "log_max_num=%u,max_qpns=%u,fault_fw_rate=11,slow_cmd_us=50,fw_first_fit=1",
		 dev.c_str(), q_ms * 1000, kLogMaxNum, observer ? (1u << kLogMaxNum) : 8192u);
	return b;
}

std::atomic<bool> g_stop{false};
std::atomic<bool> g_final{false};
void
on_term(int)
{
	g_stop.store(true);
}
void
on_usr1(int)
{
	g_final.store(true);
}

class LogFile {
public:
	explicit LogFile(const std::string &path)
	{
		fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	}
	~LogFile()
	{
		if (fd_ >= 0)
			close(fd_);
	}
	bool ok() const { return fd_ >= 0; }
	void put(Op op, uint32_t qpn, uint64_t t = 0)
	{
		Rec r{op, qpn, t != 0 ? t : now_ns()};
		/* One write per record: a kill cannot tear it. */
		while (write(fd_, &r, sizeof(r)) < 0 && errno == EINTR)
			;
	}

private:
	int fd_ = -1;
};

int
eal_init(const char *prog)
{
	std::string prefix = "--file-prefix=soak" + std::to_string(getpid());
	const char *argv[] = {prog,
			      "--no-huge",
			      "--no-pci",
			      "-m",
			      "64",
			      "-l",
			      "0",
			      prefix.c_str(),
			      "--log-level=lib.eal:error",
			      "--log-level=mlx5_qpn*:error"};
	return rte_eal_init(int(RTE_DIM(argv)), const_cast<char **>(argv));
}

/* ---- worker ------------------------------------------------------------------------------- */

int
worker(const std::string &log_path, const std::string &da, uint64_t seed, uint64_t max_ops)
{
	LogFile log(log_path);
	if (!log.ok())
		return 10;
	log.put(kStart, 0);
	signal(SIGTERM, on_term);
	if (eal_init("qpn_soak_worker") < 0)
		return 11;
	struct mlx5_qpn_dev *dev = nullptr;
	int rc = mlx5_qpn_dev_probe(da.c_str(), &dev);
	if (rc != 0) {
		/* Injected firmware faults can refuse a probe: a clean, counted exit. */
		rte_eal_cleanup();
		return 20;
	}
	log.put(kProbed, 0);
	std::mt19937_64 rng(seed);
	std::vector<uint32_t> held;
	const size_t hold_max = 64 + rng() % 512;
	uint64_t ops = 0;
	int err = 0;
	while (!g_stop.load(std::memory_order_relaxed) && ops < max_ops) {
		bool do_alloc = held.empty() || (held.size() < hold_max && (rng() & 1));
		if (do_alloc && (rng() % 16) == 0) {
			uint32_t q[8];
			rc = mlx5_qpn_reserved_alloc_bulk(dev, q, 8);
			if (rc == 0) {
				uint64_t t = now_ns();
				for (uint32_t x : q) {
					log.put(kAllocEnd, x, t);
					held.push_back(x);
				}
			}
		} else if (do_alloc) {
			uint32_t q;
			rc = mlx5_qpn_reserved_alloc(dev, &q);
			if (rc == 0) {
				log.put(kAllocEnd, q);
				held.push_back(q);
			}
		} else {
			size_t i = rng() % held.size();
			uint32_t q = held[i];
			held[i] = held.back();
			held.pop_back();
			log.put(kFreeBegin, q);
			rc = mlx5_qpn_reserved_dealloc(dev, q);
			if (rc != 0) {
				fprintf(stderr,
					"qpn_soak worker: free of held QPN 0x%x refused: %s\n", q,
					strerror(-rc));
				err = 30;
				break;
			}
		}
		if (rc != 0 && rc != -EAGAIN && rc != -ENOSPC && rc != -ENOMEM && rc != -EIO &&
		    rc != -EBUSY) {
			fprintf(stderr, "qpn_soak worker: unexpected error %s\n", strerror(-rc));
			err = 31;
			break;
		}
		ops++;
	}
	log.put(kCloseBegin, 0);
	mlx5_qpn_dev_close(dev);
	rte_eal_cleanup();
	return err;
}

/* ---- observer: keeps the device open, then checks that nothing was lost -------------------- */

int
observer(const std::string &log_path, const std::string &da, uint64_t q_ms,
	 const std::string &result_path)
{
	LogFile log(log_path);
	signal(SIGUSR1, on_usr1);
	if (!log.ok() || eal_init("qpn_soak_observer") < 0)
		return 10;
	struct mlx5_qpn_dev *dev = nullptr;
	/* The first opener sets the device up; firmware faults may refuse the first tries. */
	int rc = -EAGAIN;
	for (int i = 0; i < 1000 && rc != 0; i++) {
		rc = mlx5_qpn_dev_probe(da.c_str(), &dev);
		if (rc != 0)
			usleep(1000);
	}
	if (rc != 0)
		return 12;
	log.put(kProbed, 0);
	while (!g_final.load())
		pause();
	/* Every worker is gone: after the quarantine (and the lease's cooling) the whole device
	 * must come back, to this process. */
	const uint32_t expect = 1u << kLogMaxNum;
	uint32_t got = 0;
	const uint64_t deadline = now_ns() + q_ms * 1000000ull * 4 + 20000000000ull;
	while (got < expect && now_ns() < deadline) {
		uint32_t q;
		rc = mlx5_qpn_reserved_alloc(dev, &q);
		if (rc == 0) {
			log.put(kAllocEnd, q);
			got++;
		} else {
			usleep(1000);
		}
	}
	struct mlx5_qpn_sim_stats st = {};
	mlx5_qpn_sim_stats_get(mlx5_qpn_dev_backend(dev), &st);
	FILE *f = fopen(result_path.c_str(), "w");
	if (f != nullptr) {
		fprintf(f, "%u %u %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", got, expect,
			st.faults_injected, st.reclaimed_objs, st.repairs);
		fclose(f);
	}
	log.put(kCloseBegin, 0);
	mlx5_qpn_dev_close(dev);
	rte_eal_cleanup();
	return got == expect ? 0 : 40;
}

/* ---- driver ------------------------------------------------------------------------------- */

struct Slot {
	pid_t pid = 0;
	size_t life = 0;
};

pid_t
spawn(const char *self, std::vector<std::string> args, const std::string &err_path)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	int fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	std::vector<char *> argv;
	argv.push_back(const_cast<char *>(self));
	for (auto &a : args)
		argv.push_back(a.data());
	argv.push_back(nullptr);
	execv("/proc/self/exe", argv.data());
	_exit(127);
}

void
usage()
{
	fprintf(stderr, "usage: qpn_soak --seconds N [--procs P] [--quarantine-ms Q] [--dir D] "
			"[--json FILE] [--seed S] [--dev simNAME]\n");
}

bool
parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	if (s == nullptr || *s < '0' || *s > '9')
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

} /* namespace */

int
main(int argc, char **argv)
{
	/* Roles started by the driver. */
	if (argc >= 2 && strcmp(argv[1], "--worker") == 0 && argc == 6)
		return worker(argv[2], argv[3], strtoull(argv[4], nullptr, 10),
			      strtoull(argv[5], nullptr, 10));
	if (argc >= 2 && strcmp(argv[1], "--observer") == 0 && argc == 6)
		return observer(argv[2], argv[3], strtoull(argv[4], nullptr, 10), argv[5]);

	uint64_t seconds = 0, procs = 3, q_ms = 50, seed = uint64_t(getpid());
	std::string dir = "/tmp/qpn_soak." + std::to_string(getpid()), json;
	/* A device of its own: two soaks at once must not share one (their settings differ). */
	std::string dev = "simsoak" + std::to_string(getpid());
	for (int i = 1; i < argc; i += 2) { /* every option takes a value */
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
		bool ok = v != nullptr;
		if (strcmp(a, "--seconds") == 0)
			ok = ok && parse_u64(v, 1, 86400, &seconds);
		else if (strcmp(a, "--procs") == 0)
			ok = ok && parse_u64(v, 1, 32, &procs);
		else if (strcmp(a, "--quarantine-ms") == 0)
			ok = ok && parse_u64(v, 1, 60000, &q_ms);
		else if (strcmp(a, "--seed") == 0)
			ok = ok && parse_u64(v, 0, UINT64_MAX, &seed);
		else if (strcmp(a, "--dir") == 0 && ok)
			dir = v;
		else if (strcmp(a, "--json") == 0 && ok)
			json = v;
		else if (strcmp(a, "--dev") == 0 && ok && strncmp(v, "sim", 3) == 0)
			dev = v;
		else
			ok = false;
		if (!ok) {
			fprintf(stderr, "qpn_soak: bad argument %s%s%s\n", a, v ? " " : "",
				v ? v : "");
			usage();
			return 2;
		}
	}
	if (seconds == 0) {
		usage();
		return 2;
	}
	if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
		fprintf(stderr, "qpn_soak: cannot create %s: %s\n", dir.c_str(), strerror(errno));
		return 1;
	}
	signal(SIGINT, on_term);
	signal(SIGTERM, on_term);
	std::mt19937_64 rng(seed);
	std::vector<Life> lives;
	std::vector<std::string> logs;
	auto new_life = [&]() {
		lives.emplace_back();
		logs.push_back(dir + "/life" + std::to_string(lives.size() - 1) + ".log");
		return lives.size() - 1;
	};
	const std::string err_path = dir + "/stderr.txt";
	const std::string result_path = dir + "/observer.txt";

	size_t obs_life = new_life();
	pid_t obs = spawn(argv[0],
			  {"--observer", logs[obs_life], devargs(dev, q_ms, true),
			   std::to_string(q_ms), result_path},
			  err_path);
	/* Let the observer set the device up before the workers race for it. */
	for (int i = 0; i < 5000 && read_log(logs[obs_life]).empty(); i++)
		usleep(1000);

	auto start = [&](Slot &s) {
		s.life = new_life();
		s.pid = spawn(argv[0],
			      {"--worker", logs[s.life], devargs(dev, q_ms, false),
			       std::to_string(rng()), std::to_string(20000 + rng() % 2000000)},
			      err_path);
	};
	std::vector<Slot> slots(procs);
	for (auto &s : slots)
		start(s);

	uint64_t kills = 0, exits = 0, refused_probes = 0, worker_errors = 0;
	const uint64_t t_end = now_ns() + seconds * 1000000000ull;
	uint64_t next_kill = now_ns() + 50000000ull + rng() % 350000000ull;
	/* Kills are at random points, start-up included; but where start-up is slow (a sanitizer
	 * build on a loaded machine) kills every 50-400 ms would only ever hit processes that have
	 * not reached the device, and the soak would test nothing. So while the victims have not
	 * logged one operation, the interval stretches (x2 per such kill, up to x16). */
	uint64_t stretch = 1;
	bool ending = false; /* the orderly end has sent its SIGTERMs */
	uint64_t next_progress = now_ns() + 10000000000ull;
	auto reap = [&](Slot &s, int st) {
		if (WIFEXITED(st)) {
			int code = WEXITSTATUS(st);
			if (code == 0)
				lives[s.life].exited_clean = true, exits++;
			else if (code == 20)
				refused_probes++;
			else
				worker_errors++;
		} else if (WIFSIGNALED(st) && ending && WTERMSIG(st) == SIGTERM) {
			exits++; /* ours: it was still starting (its handler not set yet) */
		} else if (WIFSIGNALED(st)) {
			worker_errors++; /* a signal we did not send: a crash, a sanitizer abort */
			fprintf(stderr, "qpn_soak: worker %zu died of signal %d\n", s.life,
				WTERMSIG(st));
		}
		s.pid = 0;
	};
	while (!g_stop.load() && now_ns() < t_end) {
		for (auto &s : slots) {
			int st;
			if (s.pid != 0 && waitpid(s.pid, &st, WNOHANG) == s.pid)
				reap(s, st);
			if (s.pid == 0)
				start(s);
		}
		uint64_t now = now_ns();
		if (now >= next_kill) {
			Slot &s = slots[rng() % slots.size()];
			struct stat sb;
			bool worked = stat(logs[s.life].c_str(), &sb) == 0 &&
				      size_t(sb.st_size) >
					      2 * sizeof(Rec); /* start, probed, one op */
			stretch = worked ? 1 : std::min<uint64_t>(stretch * 2, 16);
			lives[s.life].kill_ns = now_ns(); /* before the kill: death >= this */
			kill(s.pid, SIGKILL);
			int st;
			waitpid(s.pid, &st, 0);
			if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
				kills++;
				s.pid = 0;
			} else {
				lives[s.life].kill_ns = 0; /* it had exited already */
				reap(s, st);
			}
			next_kill = now_ns() + stretch * (50000000ull + rng() % 350000000ull);
		}
		if (now >= next_progress) {
			printf("qpn_soak: %" PRIu64 " s left, %" PRIu64
			       " kills, %zu processes so far\n",
			       uint64_t((t_end - now) / 1000000000ull), kills, lives.size() - 1);
			fflush(stdout);
			next_progress = now + 10000000000ull;
		}
		usleep(2000);
	}
	/* Orderly end: the workers close the device, then the observer takes everything back. */
	ending = true;
	for (auto &s : slots)
		if (s.pid != 0)
			kill(s.pid, SIGTERM);
	for (auto &s : slots) {
		int st;
		if (s.pid != 0 && waitpid(s.pid, &st, 0) == s.pid)
			reap(s, st);
	}
	kill(obs, SIGUSR1);
	int obs_st = 0;
	waitpid(obs, &obs_st, 0);

	/* Everyone has closed the device: remove it and its lease file. */
	mlx5_qpn_dev_purge(dev.c_str());
	for (size_t i = 0; i < lives.size(); i++)
		lives[i].recs = read_log(logs[i]);
	Report r = check(lives, q_ms * 1000000ull);
	unsigned got = 0, expect = 0;
	uint64_t faults = 0, reclaimed_objs = 0, repairs = 0;
	FILE *f = fopen(result_path.c_str(), "r");
	bool have_obs = f != nullptr && fscanf(f, "%u %u %" SCNu64 " %" SCNu64 " %" SCNu64, &got,
					       &expect, &faults, &reclaimed_objs, &repairs) == 5;
	if (f != nullptr)
		fclose(f);
	bool lost = !have_obs || got != expect;
	double min_delay_ms = r.min_reclaim_delay_ns == UINT64_MAX ? -1.0 :
								     r.min_reclaim_delay_ns / 1e6;
	/* Each death's return: kill -> the first hand-out of its QPNs to another process. */
	std::vector<uint64_t> ret = r.return_delays_ns;
	std::sort(ret.begin(), ret.end());
	auto ret_ms = [&](size_t i) { return ret.empty() ? -1.0 : ret[i] / 1e6; };
	const double ret_min = ret_ms(0), ret_med = ret_ms(ret.size() / 2),
		     ret_max = ret_ms(ret.empty() ? 0 : ret.size() - 1);

	printf("soak: %" PRIu64 " s, %" PRIu64 " workers, quarantine %" PRIu64 " ms, seed %" PRIu64
	       "\n",
	       seconds, procs, q_ms, seed);
	printf("soak: %" PRIu64 " operations (%" PRIu64 " allocs, %" PRIu64
	       " frees) in %zu processes; "
	       "%" PRIu64 " killed, %" PRIu64 " closed, %" PRIu64
	       " probes refused by injected faults\n",
	       r.allocs + r.frees, r.allocs, r.frees, lives.size() - 1, kills, exits,
	       refused_probes);
	printf("soak: %" PRIu64
	       " QPNs of killed processes handed out again; of those held at a kill, the "
	       "first %.1f ms after it; %" PRIu64 " device objects reclaimed, %" PRIu64
	       " device repairs\n",
	       r.reclaimed, min_delay_ms, reclaimed_objs, repairs);
	printf("soak: %zu of %" PRIu64
	       " deaths' QPNs handed out again; kill -> first hand-out min %.1f, median %.1f, "
	       "max %.1f ms (quarantine %" PRIu64 " ms)\n",
	       ret.size(), kills, ret_min, ret_med, ret_max, q_ms);
	printf("soak: %" PRIu64 " firmware faults injected; capacity back at the end %u/%u\n",
	       faults, got, expect);
	for (size_t i = 0; i < r.violations.size() && i < 10; i++) {
		const Violation &v = r.violations[i];
		printf("soak: VIOLATION qpn 0x%06x: let go at %" PRIu64
		       " by process %zu, handed out at %" PRIu64 " to process %zu (%s)\n",
		       v.qpn, v.let_go_ns, v.first_life, v.handed_ns, v.second_life,
		       v.overlap ? "two live holders" : "inside the quarantine");
	}
	printf("soak: %zu violations, %" PRIu64 " worker errors%s\n", r.violations.size(),
	       worker_errors, lost ? ", QPNs LOST" : "");
	if (!json.empty()) {
		FILE *j = fopen(json.c_str(), "w");
		if (j != nullptr) {
			fprintf(j,
				"{\"seconds\": %" PRIu64 ", \"workers\": %" PRIu64
				", \"quarantine_ms\": %" PRIu64 ", \"seed\": %" PRIu64
				", \"operations\": %" PRIu64 ", \"processes\": %zu, "
				"\"kills\": %" PRIu64 ", \"closes\": %" PRIu64
				", \"reclaimed_qpns\": %" PRIu64
				", \"min_reclaim_delay_ms\": %.3f, \"faults\": %" PRIu64
				", \"violations\": %zu, "
				"\"worker_errors\": %" PRIu64
				", \"capacity_back\": %u, \"capacity\": %u, "
				"\"deaths_returned\": %zu, \"return_ms\": {\"min\": %.3f, "
				"\"median\": %.3f, \"max\": %.3f}}\n",
				seconds, procs, q_ms, seed, r.allocs + r.frees, lives.size() - 1,
				kills, exits, r.reclaimed, min_delay_ms, faults,
				r.violations.size(), worker_errors, got, expect, ret.size(),
				ret_min, ret_med, ret_max);
			fclose(j);
		}
	}
	bool ok = r.violations.empty() && worker_errors == 0 && !lost && WIFEXITED(obs_st);
	if (ok) {
		for (auto &l : logs)
			unlink(l.c_str());
		unlink(err_path.c_str());
		unlink(result_path.c_str());
		rmdir(dir.c_str());
	} else {
		printf("soak: logs kept in %s\n", dir.c_str());
	}
	return ok ? 0 : 1;
}
