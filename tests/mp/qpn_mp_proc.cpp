/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn_mp_proc [EAL options] -- --dev=DEVARGS [--log=FILE] [--seed=N]
 *
 * A scripted process for the multi-process tests (tests/mp/test_mp.cpp): EAL as primary or
 * secondary (the EAL options say which), probe one device, then obey commands read from stdin,
 * one a line, answering each with one line that starts with "@ " on stdout (DPDK's own log lines
 * go to stdout too; the driver ignores everything else). EOF on stdin is "quit".
 *
 *   alloc N      allocate N QPNs one by one and hold them  -> "@ OK got rc" (rc: last error)
 *   free N       free N held QPNs (0: all)                  -> "@ OK freed"
 *   grow         mlx5_qpn_dev_grow()                        -> "@ RC rc"
 *   loop H       a thread allocates and frees at random, holding up to H, as fast as it can
 *   stop         stop the loop; what it held stays held     -> "@ OK held"
 *   stats        -> "@ STATS capacity in_use in_quarantine free grow_requests ipc_grows
 *                    dead_reclaimed ranges_reserved secondary"
 *   settle MS    drain until nothing is in use (but what this process holds) or in quarantine,
 *                at most MS ms; then as stats
 *   quit         close the device, EAL cleanup, exit 0
 *
 * The log file gets one line per event, written with one write(2) each so that a SIGKILL loses at
 * most the event in flight: "A qpn t" after an allocation returned, "f qpn t" before a free is
 * called, "F qpn t rc" after it returned; t is CLOCK_MONOTONIC in ns. So an "A" time is no
 * earlier than the hand-out, and an "f" time no later than the release: the checker's bounds.
 * Probe failure: "@ PROBE rc" and exit status 1.
 */
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <getopt.h>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>

#include "mlx5_qpn.h"

namespace {

int g_log = -1;
struct mlx5_qpn_dev *g_dev;
std::mutex g_held_mutex;
std::vector<uint32_t> g_held; /* QPNs this process holds (loop thread's included once stopped) */

uint64_t
now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void
log_event(char kind, uint32_t qpn, int rc = 0)
{
	if (g_log < 0)
		return;
	char line[64];
	int n = kind == 'F' ?
			snprintf(line, sizeof(line), "F %u %" PRIu64 " %d\n", qpn, now_ns(), rc) :
			snprintf(line, sizeof(line), "%c %u %" PRIu64 "\n", kind, qpn, now_ns());
	if (write(g_log, line, size_t(n)) != n)
		_exit(3);
}

int
alloc_one(uint32_t *q)
{
	int rc = mlx5_qpn_reserved_alloc(g_dev, q);
	if (rc == 0)
		log_event('A', *q);
	return rc;
}

int
free_one(uint32_t q)
{
	log_event('f', q);
	int rc = mlx5_qpn_reserved_dealloc(g_dev, q);
	log_event('F', q, rc);
	return rc;
}

void reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void
reply(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("@ ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	fflush(stdout);
	va_end(ap);
}

void
stats_line(const char *tag)
{
	struct mlx5_qpn_dev_stats st;
	struct mlx5_qpn_dev_info in;
	mlx5_qpn_dev_stats_get(g_dev, &st);
	mlx5_qpn_dev_info_get(g_dev, &in);
	reply("%s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
	      " %" PRIu64 " %d",
	      tag, st.pool.capacity, st.pool.in_use, st.pool.in_quarantine, st.pool.free,
	      st.mp_grow_requests, st.mp_ipc_grows, st.mp_dead_reclaimed, st.ranges_reserved,
	      in.secondary);
}

/* The random loop: hold up to `hold` QPNs, alloc (3 in 4) or free (1 in 4) at random. What it
 * holds at stop goes to g_held. */
std::atomic<bool> g_loop_stop;
void
loop_body(unsigned hold, uint64_t seed)
{
	std::mt19937_64 rng(seed);
	std::vector<uint32_t> mine;
	while (!g_loop_stop.load(std::memory_order_relaxed)) {
		bool do_alloc = mine.empty() || (mine.size() < hold && (rng() & 3) != 0);
		if (do_alloc) {
			uint32_t q;
			if (alloc_one(&q) == 0)
				mine.push_back(q);
			else
				usleep(50); /* dry or all in quarantine: keep what it holds */
			continue;
		}
		size_t i = rng() % mine.size();
		uint32_t q = mine[i];
		mine[i] = mine.back();
		mine.pop_back();
		free_one(q);
	}
	std::lock_guard<std::mutex> g(g_held_mutex);
	g_held.insert(g_held.end(), mine.begin(), mine.end());
}

} /* namespace */

int
main(int argc, char **argv)
{
	setvbuf(stdout, nullptr, _IOLBF, 0);
	int eal = rte_eal_init(argc, argv);
	if (eal < 0) {
		reply("EAL %d", -rte_errno);
		return 1;
	}
	argc -= eal;
	argv += eal;
	std::string dev = "sim0", logf;
	uint64_t seed = uint64_t(getpid());
	static const struct option opts[] = {
		{"dev", required_argument, nullptr, 'd'},
		{"log", required_argument, nullptr, 'l'},
		{"seed", required_argument, nullptr, 's'},
		{nullptr, 0, nullptr, 0},
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, nullptr)) != -1) {
		if (c == 'd')
			dev = optarg;
		else if (c == 'l')
			logf = optarg;
		else if (c == 's')
			seed = strtoull(optarg, nullptr, 0);
		else
			return 2;
	}
	if (!logf.empty()) {
		g_log = open(logf.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (g_log < 0)
			return 2;
	}
	int rc = mlx5_qpn_dev_probe(dev.c_str(), &g_dev);
	if (rc != 0) {
		reply("PROBE %d", rc);
		rte_eal_cleanup();
		return 1;
	}
	reply("READY %d", int(getpid()));

	std::thread loop;
	char line[256];
	while (fgets(line, sizeof(line), stdin) != nullptr) {
		char cmd[32] = {};
		unsigned long n = 0;
		sscanf(line, "%31s %lu", cmd, &n);
		if (strcmp(cmd, "alloc") == 0) {
			unsigned long got = 0;
			int last = 0;
			for (unsigned long i = 0; i < n; i++) {
				uint32_t q;
				int r = alloc_one(&q);
				if (r != 0) {
					last = r;
					continue;
				}
				got++;
				std::lock_guard<std::mutex> g(g_held_mutex);
				g_held.push_back(q);
			}
			reply("OK %lu %d", got, last);
		} else if (strcmp(cmd, "free") == 0) {
			std::vector<uint32_t> v;
			{
				std::lock_guard<std::mutex> g(g_held_mutex);
				size_t k = n == 0 || n > g_held.size() ? g_held.size() : n;
				v.assign(g_held.end() - long(k), g_held.end());
				g_held.resize(g_held.size() - k);
			}
			for (uint32_t q : v)
				free_one(q);
			reply("OK %zu", v.size());
		} else if (strcmp(cmd, "grow") == 0) {
			reply("RC %d", mlx5_qpn_dev_grow(g_dev));
		} else if (strcmp(cmd, "loop") == 0) {
			g_loop_stop.store(false);
			loop = std::thread(loop_body, unsigned(n ? n : 16), seed);
			reply("OK");
		} else if (strcmp(cmd, "stop") == 0) {
			g_loop_stop.store(true);
			if (loop.joinable())
				loop.join();
			std::lock_guard<std::mutex> g(g_held_mutex);
			reply("OK %zu", g_held.size());
		} else if (strcmp(cmd, "stats") == 0) {
			stats_line("STATS");
		} else if (strcmp(cmd, "settle") == 0) {
			uint64_t end = now_ns() + uint64_t(n) * 1000000ull;
			struct mlx5_qpn_pool *pool = mlx5_qpn_dev_pool(g_dev);
			size_t mine;
			{
				std::lock_guard<std::mutex> g(g_held_mutex);
				mine = g_held.size();
			}
			for (;;) {
				mlx5_qpn_pool_drain(pool);
				struct mlx5_qpn_pool_stats st;
				mlx5_qpn_pool_stats_get(pool, &st);
				if ((st.in_use == mine && st.in_quarantine == 0) || now_ns() >= end)
					break;
				usleep(10000);
			}
			stats_line("STATS");
		} else if (strcmp(cmd, "quit") == 0) {
			break;
		} else {
			reply("ERR unknown command %s", cmd);
		}
	}
	g_loop_stop.store(true);
	if (loop.joinable())
		loop.join();
	/* A clean exit leaves the pool to its owner: give this thread's cache back first. */
	mlx5_qpn_pool_cache_flush(mlx5_qpn_dev_pool(g_dev));
	mlx5_qpn_dev_close(g_dev);
	rte_eal_cleanup();
	return 0;
}
