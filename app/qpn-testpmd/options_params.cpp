/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd's run parameters that a number sets, by their option's name: the command line
 * (--NAME=VALUE) and the prompt's `set NAME VALUE` check them here, alike; and `show config`,
 * which prints every run parameter.
 */
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "opt_num.h"
#include "options.h"

namespace {

/* The run parameters that a number sets, by their option's name: the command line and the
 * prompt's `set NAME VALUE` check them here, alike. */
struct num_param {
	const char *name;
	uint64_t lo, hi; /* integers; the decimals' bounds are in config_set */
	unsigned run_config::*u;
	uint64_t run_config::*u64;
	uint8_t run_config::*u8;
	double run_config::*dec;
};

constexpr uint64_t kMaxConns = 1000000000000000ull;

const num_param num_params[] = {
	{"duration", 0, 0, nullptr, nullptr, nullptr, &run_config::duration_s},
	{"connections", 1, kMaxConns, nullptr, &run_config::connections, nullptr, nullptr},
	{"inflight", 1, 64, &run_config::inflight, nullptr, nullptr, nullptr},
	{"peers", 1, 32, &run_config::peers, nullptr, nullptr, nullptr},
	{"burst", 1, 64, &run_config::burst, nullptr, nullptr, nullptr},
	{"hold", 0, 1 << 20, &run_config::hold, nullptr, nullptr, nullptr},
	{"msgs-per-conn", 0, 64, &run_config::msgs_per_conn, nullptr, nullptr, nullptr},
	{"seed", 1, 1000000000000000000ull, nullptr, &run_config::seed, nullptr, nullptr},
	{"cm-plt", 0, 31, nullptr, nullptr, &run_config::plt, nullptr},
	{"cm-ack-delay", 0, 31, nullptr, nullptr, &run_config::ack_delay, nullptr},
	{"stats-period", 0, 0, nullptr, nullptr, nullptr, &run_config::stats_period_s},
	{"server-lcores", 1, kMaxServerLcores, &run_config::server_lcores, nullptr, nullptr,
	 nullptr},
};

} /* namespace */

const char config_names[] =
	"duration#connections#inflight#peers#burst#hold#msgs-per-conn#seed#cm-plt#cm-ack-delay#"
	"stats-period#server-lcores";

int
config_set(run_config *cfg, const char *name, const char *value, std::string *why)
{
	for (const num_param &p : num_params) {
		if (strcmp(p.name, name) != 0)
			continue;
		if (p.dec != nullptr) {
			const bool dur = p.dec == &run_config::duration_s;
			double d;
			if (!opt_num_decimal(value, dur ? 0.01 : 0, 86400, &d, why))
				return -EINVAL;
			cfg->*p.dec = d;
			return 0;
		}
		uint64_t v;
		if (!opt_num_u64(value, p.lo, p.hi, &v, why))
			return -EINVAL;
		if (p.u != nullptr)
			cfg->*p.u = static_cast<unsigned>(v);
		else if (p.u64 != nullptr)
			cfg->*p.u64 = v;
		else
			cfg->*p.u8 = static_cast<uint8_t>(v);
		return 0;
	}
	*why = "no such parameter";
	return -ENOENT;
}

const char *
duration_note(const run_config &cfg)
{
	return cfg.interactive ? " (batch mode only: at the prompt a run lasts until stop)" : "";
}

void
config_show(FILE *f, const run_config &cfg)
{
	fprintf(f, "engine %s, role %s, fabric %s, devices:", cfg.engine.c_str(), cfg.role.c_str(),
		cfg.fabric.empty() ? "(in-process)" : cfg.fabric.c_str());
	for (auto &d : cfg.devargs)
		fprintf(f, " %s", d.c_str());
	fprintf(f, "\n");
	for (const num_param &p : num_params) {
		if (p.dec == &run_config::duration_s)
			fprintf(f, "  %-14s %g%s\n", p.name, cfg.*p.dec, duration_note(cfg));
		else if (p.dec != nullptr)
			fprintf(f, "  %-14s %g\n", p.name, cfg.*p.dec);
		else if (p.u != nullptr)
			fprintf(f, "  %-14s %u\n", p.name, cfg.*p.u);
		else if (p.u64 != nullptr)
			fprintf(f, "  %-14s %" PRIu64 "%s\n", p.name, cfg.*p.u64,
				p.u64 == &run_config::connections && cfg.connections == 0 ?
					" (none: run for the duration)" :
					"");
		else
			fprintf(f, "  %-14s %u\n", p.name, unsigned(cfg.*p.u8));
	}
	fprintf(f, "  %-14s %s\n", "quarantine-us",
		cfg.quarantine_us < 0 ? "(the CM timewait)" :
					std::to_string(cfg.quarantine_us).c_str());
	fprintf(f, "  %-14s %s (timewait %u ms)\n", "cm-policy",
		cfg.policy == MLX5_QPN_CM_POLICY_STRICT ? "strict" : "live", cm_timewait_ms(cfg));
	fprintf(f, "  %-14s %s\n", "json", cfg.json.empty() ? "(none)" : cfg.json.c_str());
	fprintf(f, "  %-14s %s\n", "force-shared-qpn", cfg.force_shared_qpn ? "on" : "off");
	fprintf(f, "  %-14s %s\n", "idle-yield", cfg.idle_yield ? "on" : "off");
	fprintf(f, "  %-14s %s\n", "co-poll", cfg.co_poll ? "on" : "off");
	fprintf(f, "  %-14s %s\n", "allocator", cfg.allocator.c_str());
	std::string counts;
	for (unsigned n : cfg.client_lcores) {
		if (!counts.empty())
			counts += ',';
		counts += std::to_string(n);
	}
	fprintf(f, "  %-14s %s\n", "client-lcores",
		counts.empty() ? "(every client lcore of the layout)" : counts.c_str());
	fprintf(f, "  %-14s %s\n", "destroy-sim", cfg.destroy_sim ? "on" : "off");
	fprintf(f, "  %-14s %s\n", "hw-peer", cfg.hw_peer.empty() ? "(none)" : cfg.hw_peer.c_str());
	fprintf(f, "  %-14s %u\n", "hw-port", cfg.hw_port);
	fprintf(f, "  %-14s %s\n", "hw-bind",
		cfg.hw_bind.empty() ? "(the device's netdev)" : cfg.hw_bind.c_str());
}
