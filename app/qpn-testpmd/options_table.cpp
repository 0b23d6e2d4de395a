/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd's options, one row each (as testpmd's lgopts and usage are one list): the table
 * getopt, --help and the checks read, and the setters of the options that are not run
 * parameters (those go through config_set(), options_params.cpp).
 */
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <mlx5_qpn/mlx5_qpn_cm.h>

#include "opt_num.h"
#include "options.h"

namespace testpmd_opts {

namespace {

int
set_help(parse_state &, const opt_row &, const char *)
{
	return 1;
}

int
set_flag(parse_state &st, const opt_row &o, const char *)
{
	st.cfg->*o.flag = true;
	return 0;
}

/* A run parameter given as an option: config_set, and its one line naming the option. */
int
set_param(parse_state &st, const opt_row &o, const char *v)
{
	std::string why;
	if (config_set(st.cfg, o.name, v, &why) == 0)
		return 0;
	fprintf(stderr, "%s\n",
		opt_num_error("qpn-testpmd", ("--" + std::string(o.name)).c_str(), v, why).c_str());
	return -EINVAL;
}

/* A string option's refusal: the one line, the value escaped (opt_shown()). */
int
refuse(const opt_row &o, const char *v, const std::string &expected)
{
	fprintf(stderr, "%s\n",
		opt_num_error("qpn-testpmd", ("--" + std::string(o.name)).c_str(), v, expected)
			.c_str());
	return -EINVAL;
}

/* A device is given once: a second --qpn-dev with the same name would probe it again in this
 * process, which the driver refuses at run time; it is a command-line mistake. */
int
set_dev(parse_state &st, const opt_row &o, const char *v)
{
	if (!check_devargs(v))
		return -EINVAL;
	const std::string name = std::string(v).substr(0, std::string(v).find(','));
	for (const std::string &d : st.cfg->devargs)
		if (d.substr(0, d.find(',')) == name)
			return refuse(o, v, "device " + name + " given twice; each device once");
	st.cfg->devargs.push_back(v);
	return 0;
}

} /* namespace */

/* Its row lists the engines in --help (options_usage.cpp). */
int
set_engine(parse_state &st, const opt_row &, const char *v)
{
	st.cfg->engine = v;
	st.engine_set = true;
	return 0;
}

namespace {

int
set_json(parse_state &st, const opt_row &, const char *v)
{
	st.cfg->json = v;
	return 0;
}

int
set_quarantine(parse_state &st, const opt_row &o, const char *v)
{
	return opt_uint("--quarantine-us", v, o.lo, o.hi, &st.cfg->quarantine_us) ? 0 : -EINVAL;
}

int
set_hw_port(parse_state &st, const opt_row &o, const char *v)
{
	return opt_uint("--hw-port", v, o.lo, o.hi, &st.cfg->hw_port) ? 0 : -EINVAL;
}

int
set_hw_peer(parse_state &st, const opt_row &, const char *v)
{
	return opt_addr("--hw-peer", v, hw_peer_valid, &st.cfg->hw_peer) ? 0 : -EINVAL;
}

int
set_hw_bind(parse_state &st, const opt_row &, const char *v)
{
	return opt_addr("--hw-bind", v, hw_bind_valid, &st.cfg->hw_bind) ? 0 : -EINVAL;
}

int
set_policy(parse_state &st, const opt_row &o, const char *v)
{
	if (strcmp(v, "live") == 0) {
		st.cfg->policy = MLX5_QPN_CM_POLICY_LIVE;
	} else if (strcmp(v, "strict") == 0) {
		st.cfg->policy = MLX5_QPN_CM_POLICY_STRICT;
	} else {
		return refuse(o, v, "expected live or strict");
	}
	return 0;
}

int
set_role(parse_state &st, const opt_row &o, const char *v)
{
	if (strcmp(v, "both") != 0 && strcmp(v, "client") != 0 && strcmp(v, "server") != 0)
		return refuse(o, v, "expected both, client or server");
	st.cfg->role = v;
	return 0;
}

int
set_fabric(parse_state &st, const opt_row &o, const char *v)
{
	if (v[0] == '\0' || strlen(v) > MLX5_QPN_CM_SHM_NAMESIZE ||
	    strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
		    strlen(v))
		return refuse(o, v,
			      "1.." + std::to_string(MLX5_QPN_CM_SHM_NAMESIZE) +
				      " characters from [A-Za-z0-9_.-]");
	st.cfg->fabric = v;
	return 0;
}

/* --allocator, --client-lcores, --allocator-sweep: compare*.cpp's. */
int
set_allocator(parse_state &st, const opt_row &, const char *v)
{
	return compare_parse_allocator(st.cfg, v);
}

int
set_client_lcores(parse_state &st, const opt_row &, const char *v)
{
	return compare_parse_client_lcores(st.cfg, v);
}

int
set_sweep(parse_state &st, const opt_row &, const char *v)
{
	return compare_parse_sweep(st.cfg, v);
}

} /* namespace */

/* clang-format off */
const opt_row opt_table[] = {
	{"qpn-dev", 0, "DEVARGS", 0, 0, set_dev, nullptr,
	 "device (repeatable; default " QPN_TESTPMD_DEFAULT_DEV "),\n"
	 "e.g. sim0,max_qpns=4096\n"
	 "or ib=mlx5_0 (hardware; see doc/guides/app_reference.md)"},
	{"engine", 0, "NAME", 0, 0, set_engine, nullptr, "engine (default dci-reconnect):"},
	{"duration", 0, "SEC", 0, 0, set_param, nullptr, "run time (default 3)"},
	{"connections", 0, "N", 0, 0, set_param, nullptr,
	 "stop after N connections in total (alloc: per lcore)"},
	{"peers", 0, "N", 0, 0, set_param, nullptr,
	 "DC targets, each a CM node of its own (default 1, max 32)"},
	{"server-lcores", 0, "N", 0, 0, set_param, nullptr,
	 "lcores the peers are split among on the passive side\n"
	 "(default 1, max 16; at most --peers, one client lcore left)"},
	{"idle-yield", 0, nullptr, 0, 0, set_flag, &run_config::idle_yield,
	 "server lcores yield the CPU after an idle round (more\n"
	 "lcores than CPUs; default: spin)"},
	{"co-poll", 0, nullptr, 0, 0, set_flag, &run_config::co_poll,
	 "no server lcore: the first --server-lcores client lcores\n"
	 "each poll one server in their own loop"},
	{"allocator", 0, "A", 0, 0, set_allocator, nullptr,
	 "ours | rdma-core | both: the active side's QPNs from the\n"
	 "pool (default ours) or rdma-core's algorithm on the device;\n"
	 "both: one run each, side by side (batch mode)"},
	{"client-lcores", 0, "N,...", 0, 0, set_client_lcores, nullptr,
	 "one run per count of client lcores, e.g. 1,2,4 (batch mode;\n"
	 "default: one run on every client lcore)"},
	{"allocator-sweep", 0, "US,...", 0, 0, set_sweep, nullptr,
	 "both allocators at each firmware command latency US\n"
	 "(e.g. 2,10,50,200), both reuse orders, timewaits 16 ms\n"
	 "and 1 s (emulated devices, batch mode)"},
	{"msgs-per-conn", 0, "N", 0, 0, set_param, nullptr,
	 "SENDs per connection (default 4; 0: none)"},
	{"inflight", 0, "N", 0, 0, set_param, nullptr,
	 "connections open at once per client lcore (default 4)"},
	{"quarantine-us", 0, "N", 0, kMaxQuarantineUs, set_quarantine, nullptr,
	 "quarantine of released QPNs (default: the CM timewait)"},
	{"cm-policy", 0, "P", 0, 0, set_policy, nullptr,
	 "live | strict (default strict: pairs held through timewait)"},
	{"cm-plt", 0, "N", 0, 0, set_param, nullptr, "CM packet life time exponent (default 10)"},
	{"cm-ack-delay", 0, "N", 0, 0, set_param, nullptr,
	 "CA ACK delay exponent (default 10); with the default\n"
	 "both give a timewait of 16 ms"},
	{"force-shared-qpn", 0, nullptr, 0, 0, set_flag, &run_config::force_shared_qpn,
	 "negative control: two connections share one QPN"},
	{"seed", 0, "N", 0, 0, set_param, nullptr, "random seed of churn (default 1)"},
	{"burst", 0, "N", 0, 0, set_param, nullptr, "alloc engine: QPNs per burst (default 8)"},
	{"hold", 0, "N", 0, 0, set_param, nullptr, "alloc engine: QPNs held per lcore (default 64)"},
	{"json", 0, "FILE", 0, 0, set_json, nullptr, "write the summary as JSON"},
	{"stats-period", 0, "S", 0, 0, set_param, nullptr,
	 "a progress line every S seconds (default 1; 0: none)"},
	{"destroy-sim", 0, nullptr, 0, 0, set_flag, &run_config::destroy_sim,
	 "remove the emulated devices' shared memory at exit"},
	{"hw-peer", 0, "IP:PORT", 0, 0, set_hw_peer, nullptr,
	 "hardware mode, active side: the passive qpn-testpmd"},
	{"hw-port", 0, "PORT", 1, 65535, set_hw_port, nullptr,
	 "hardware mode, passive side: port to listen on (18515)"},
	{"hw-bind", 0, "IP", 0, 0, set_hw_bind, nullptr,
	 "hardware mode: the probed device's IPv4 address to listen\n"
	 "on / connect from (default: the first IPv4 address of the\n"
	 "device's netdev)"},
	{"role", 0, "R", 0, 0, set_role, nullptr,
	 "both | client | server (default both: one process); client\n"
	 "and server are two processes sharing --fabric and the device"},
	{"fabric", 0, "NAME", 0, 0, set_fabric, nullptr,
	 "CM over the shared-memory fabric NAME (default: in-process)"},
	{"interactive", 'i', nullptr, 0, 0, set_flag, &run_config::interactive,
	 "interactive prompt"},
	{"help", 'h', nullptr, 0, 0, set_help, nullptr, "this text"},
};
/* clang-format on */

const size_t opt_count = sizeof(opt_table) / sizeof(opt_table[0]);

} /* namespace testpmd_opts */
