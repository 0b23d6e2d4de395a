/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd's checks of its options: a value refused in one line naming the option and the
 * value as typed, --qpn-dev's devargs through the driver's own check, and the checks across
 * options once all are read (--role, the quarantine). Exit status 2 on a refusal (main.cpp).
 */
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <string>

#include <mlx5_qpn/mlx5_qpn.h>

#include "opt_num.h"
#include "options.h"

namespace testpmd_opts {

/* Numeric options: app/common/opt_num.h, one line naming the option and the value as typed. */
bool
opt_u64(const char *opt, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	std::string why;
	if (opt_num_u64(v, lo, hi, out, &why))
		return true;
	fprintf(stderr, "%s\n", opt_num_error("qpn-testpmd", opt, v, why).c_str());
	return false;
}

/* Address options (--hw-peer, --hw-bind): VALID's reason in the same one line. */
bool
opt_addr(const char *opt, const char *v, bool (*valid)(const std::string &, std::string *),
	 std::string *out)
{
	std::string why;
	if (!valid(v, &why)) {
		fprintf(stderr, "%s\n", opt_num_error("qpn-testpmd", opt, v, why).c_str());
		return false;
	}
	*out = v;
	return true;
}

/*
 * A --qpn-dev value is checked as typed, before anything is added to it, so that a bad one is
 * reported as the user wrote it and under the option's name (the driver's reason, without its
 * prefix, in the same line). Nothing is probed yet, so nothing is left behind.
 */
bool
check_devargs(const char *v)
{
	char why[256];
	if (mlx5_qpn_devargs_check(v, why, sizeof(why)) == 0)
		return true;
	fprintf(stderr, "%s\n",
		opt_num_error("qpn-testpmd", "--qpn-dev", v,
			      why[0] != '\0' ? why : "refused by the driver")
			.c_str());
	return false;
}

/* Two processes (--role=client|server): the CM fabric must be the shared one and both sides
 * must open the same (one) device; the server runs the passive side whatever the engine. */
int
check_role(parse_state &st)
{
	run_config *cfg = st.cfg;
	if (cfg->role == "both")
		return 0;
	if (cfg->fabric.empty()) {
		fprintf(stderr,
			"qpn-testpmd: --role=%s needs --fabric=NAME (the same in both processes)\n",
			cfg->role.c_str());
		return -EINVAL;
	}
	if (cfg->devargs.size() != 1) {
		fprintf(stderr, "qpn-testpmd: --role=%s takes exactly one --qpn-dev\n",
			cfg->role.c_str());
		return -EINVAL;
	}
	if (cfg->role == "server") {
		if (st.engine_set && cfg->engine != "dct-accept" &&
		    cfg->engine != "dci-reconnect") {
			fprintf(stderr,
				"qpn-testpmd: --role=server runs the passive side: --engine=%s does "
				"not apply\n",
				cfg->engine.c_str());
			return -EINVAL;
		}
		cfg->engine = "dct-accept";
	} else if (cfg->engine != "dci-reconnect" && cfg->engine != "churn") {
		fprintf(stderr, "qpn-testpmd: --role=client runs the active side: use "
				"--engine=dci-reconnect or churn\n");
		return -EINVAL;
	}
	return 0;
}

/* The quarantine is given once; by default it is the CM timewait, which the CM options can make
 * longer than the driver takes: say so in the options' terms, not as a devarg the user never
 * typed. */
int
check_quarantine(const run_config *cfg)
{
	for (auto &d : cfg->devargs)
		if (devargs_has_key(d, "quarantine_us") && cfg->quarantine_us >= 0) {
			fprintf(stderr, "qpn-testpmd: give the quarantine once: --quarantine-us or "
					"the devarg quarantine_us, not both\n");
			return -EINVAL;
		}
	if (cfg->quarantine_us >= 0 || uint64_t(cm_timewait_ms(*cfg)) * 1000u <= kMaxQuarantineUs)
		return 0;
	for (auto &d : cfg->devargs)
		if (!devargs_has_key(d, "quarantine_us")) {
			fprintf(stderr,
				"qpn-testpmd: --cm-plt=%u --cm-ack-delay=%u give a CM timewait of "
				"%u ms, longer than the longest quarantine (%" PRIu64 " ms) that "
				"the default --quarantine-us would take from it: lower them, or "
				"give --quarantine-us\n",
				cfg->plt, cfg->ack_delay, cm_timewait_ms(*cfg),
				kMaxQuarantineUs / 1000);
			return -EINVAL;
		}
	return 0;
}

} /* namespace testpmd_opts */
