/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --allocator-sweep=US,...: ours beside rdma-core's allocator over the device conditions no
 * public source pins down (BRIEF §5): the firmware command latency (each US: the emulated
 * device's slow_cmd_us), the firmware's reuse order (next-available, as rdmavt's cursor, and
 * first-fit, the lowest free block: fw_first_fit) and the CM timewait (16 ms and 1 s; the
 * quarantine follows it unless --quarantine-us says otherwise). Every point is a pair of
 * measured runs (compare.cpp's, fresh devices each) of --duration; the table says the
 * conditions they share once, at the top, and the JSON is one object:
 *   {"meta", "mode": "allocator-sweep", "engine", "conditions": {...},
 *    "points": [{"cmd_us", "fw_order", "timewait_ms", "ratio_conn_per_sec",
 *                "ours": row, "rdma-core": row}, ...]}
 * with compare.cpp's rows (keys only ever added; app/qpn-perf/qpn-perf-report draws the ratio
 * over the command latency, a line per order and timewait).
 */
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "compare.h"
#include "json_writer.h"
#include "opt_num.h"
#include "stats.h"

namespace {

/* The two timewaits: the CM's packet life time and ACK delay exponents that give them
 * (mlx5_qpn_cm_timewait_ms: 16 ms with the options' defaults, 1024 ms at 16 and 16). */
struct sweep_tw {
	uint8_t plt, ack_delay;
};
constexpr sweep_tw kTimewaits[] = {{10, 10}, {16, 16}};

/* The firmware's reuse orders, as the emulated device's fw_first_fit. */
const char *const kOrders[] = {"next-available", "first-fit"};

struct sweep_point {
	unsigned cmd_us;
	unsigned order; /* index in kOrders (= fw_first_fit) */
	uint32_t timewait_ms;
	unsigned tw; /* index in kTimewaits */
	cmp_row ours, rdma;
};

double
ratio(const sweep_point &p)
{
	return p.rdma.conns != 0 ? cmp_rate(p.ours) / cmp_rate(p.rdma) : 0.0;
}

/* Point P's devices and CM on CFG, from the user's devargs SAVED. */
void
point_apply(run_config *cfg, const std::vector<std::string> &saved, unsigned cmd_us, unsigned order,
	    const sweep_tw &tw)
{
	cfg->devargs.clear();
	for (auto &d : saved)
		cfg->devargs.push_back(d + ",slow_cmd_us=" + std::to_string(cmd_us) +
				       ",fw_first_fit=" + std::to_string(order));
	cfg->plt = tw.plt;
	cfg->ack_delay = tw.ack_delay;
}

void
print_table(FILE *f, run_ctx *ctx, const std::vector<sweep_point> &pts)
{
	fprintf(f,
		"\nqpn-testpmd: ours beside rdma-core's allocator over the device's conditions\n");
	cmp_conditions_print(f, ctx, true);
	fprintf(f, "  %8s %-14s %6s | %10s %10s %8s | %9s %9s | %9s %9s | %8s %8s\n", "timewait",
		"fw order", "cmd", "conns/s", "rdma-core", "ratio", "alloc p99", "rdma-core",
		"p99.9", "rdma-core", "stale", "rdma-core");
	for (const sweep_point &p : pts) {
		char tw[16], cmd[16];
		snprintf(tw, sizeof(tw), "%u ms", p.timewait_ms);
		snprintf(cmd, sizeof(cmd), "%u us", p.cmd_us);
		fprintf(f,
			"  %8s %-14s %6s | %10.0f %10.0f %8.2f | %9s %9s | %9s %9s | %8" PRIu64
			" %8" PRIu64 "\n",
			tw, kOrders[p.order], cmd, cmp_rate(p.ours), cmp_rate(p.rdma), ratio(p),
			fmt_ns(p.ours.alloc_ns[1]).c_str(), fmt_ns(p.rdma.alloc_ns[1]).c_str(),
			fmt_ns(p.ours.alloc_ns[2]).c_str(), fmt_ns(p.rdma.alloc_ns[2]).c_str(),
			p.ours.stale, p.rdma.stale);
	}
	fprintf(f, "  (each pair: ours, then rdma-core; ratio = ours / rdma-core conns/s)\n");
}

int
write_json(run_ctx *ctx, const qpn_engine *e, const std::vector<sweep_point> &pts)
{
	return cmp_json_write(ctx, e, "allocator-sweep", true, [&pts](json_writer &js) {
		js.key("points");
		js.arr();
		for (const sweep_point &p : pts) {
			js.obj();
			js.kv("cmd_us", uint64_t(p.cmd_us));
			js.kv("fw_order", kOrders[p.order]);
			js.kv("timewait_ms", uint64_t(p.timewait_ms));
			js.kv("ratio_conn_per_sec", ratio(p));
			for (const cmp_row *r : {&p.ours, &p.rdma}) {
				js.key(r->alloc);
				js.obj();
				cmp_row_json(js, *r);
				js.end_obj();
			}
			js.end_obj();
		}
		js.end_arr();
	});
}

} /* namespace */

int
compare_parse_sweep(run_config *cfg, const char *v)
{
	constexpr unsigned long kMaxCmdUs = 10 * 1000 * 1000; /* the device's slow_cmd_us bound */
	if (!cmp_parse_list(v, 0, kMaxCmdUs, &cfg->sweep_cmd_us)) {
		fprintf(stderr, "%s\n",
			opt_num_error("qpn-testpmd", "--allocator-sweep", v,
				      "expected up to 8 command latencies 0.." +
					      std::to_string(kMaxCmdUs) +
					      " us separated by commas, e.g. 2,10,50,200")
				.c_str());
		return -EINVAL;
	}
	return 0;
}

bool
sweep_wanted(const run_config &cfg)
{
	return !cfg.sweep_cmd_us.empty();
}

int
sweep_check(const run_config &cfg)
{
	if (!sweep_wanted(cfg))
		return 0;
	const char *why = nullptr; /* it runs both allocators, whatever --allocator says */
	if (cfg.engine != "dci-reconnect" && cfg.engine != "churn")
		why = "it applies to the engines that allocate on the active side (dci-reconnect, "
		      "churn)";
	else if (!cfg.client_lcores.empty())
		why = "it runs on every client lcore: drop --client-lcores";
	for (auto &d : cfg.devargs) {
		if (why != nullptr)
			break;
		if (d.compare(0, 3, "ib=") == 0)
			why = "it sets the emulated device's slow_cmd_us and fw_first_fit: emulated "
			      "devices only";
		else if (devargs_has_key(d, "slow_cmd_us") || devargs_has_key(d, "fw_first_fit"))
			why = "it sets the devargs slow_cmd_us and fw_first_fit itself: drop them "
			      "from --qpn-dev";
	}
	if (why == nullptr)
		return 0;
	fprintf(stderr, "qpn-testpmd: --allocator-sweep: %s\n", why);
	return -EINVAL;
}

int
run_sweep(run_ctx *ctx, const qpn_engine *e)
{
	run_config &cfg = *ctx->cfg;
	const std::vector<std::string> saved = cfg.devargs;
	const uint8_t plt = cfg.plt, ack_delay = cfg.ack_delay;
	std::vector<sweep_point> todo;
	for (const sweep_tw &tw : kTimewaits)
		for (unsigned order = 0; order < std::size(kOrders); order++)
			for (unsigned us : cfg.sweep_cmd_us) {
				point_apply(&cfg, saved, us, order, tw);
				todo.push_back(sweep_point{us,
							   order,
							   cm_timewait_ms(cfg),
							   unsigned(&tw - kTimewaits),
							   {},
							   {}});
			}
	std::vector<sweep_point> pts;
	int rc = 0;
	for (sweep_point p : todo) {
		point_apply(&cfg, saved, p.cmd_us, p.order, kTimewaits[p.tw]);
		printf("qpn-testpmd: point %zu/%zu: command %u us, %s, timewait %u ms\n",
		       pts.size() + 1, todo.size(), p.cmd_us, kOrders[p.order], p.timewait_ms);
		fflush(stdout);
		if (cmp_measure(ctx, e, "ours", 0, &p.ours) != 0 ||
		    cmp_measure(ctx, e, "rdma-core", 0, &p.rdma) != 0) {
			rc = 1;
			break;
		}
		rc |= static_cast<int>(p.ours.errors + p.rdma.errors != 0);
		pts.push_back(p);
	}
	cfg.devargs = saved;
	cfg.plt = plt;
	cfg.ack_delay = ack_delay;
	ctx->alloc_fw = false;
	if (pts.empty())
		return 1;
	print_table(stdout, ctx, pts);
	if (!cfg.json.empty()) {
		if (write_json(ctx, e, pts) != 0)
			rc = 1;
	}
	fflush(stdout);
	return rc;
}
