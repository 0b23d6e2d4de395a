/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd's devargs helpers, which the runner and the prompt use: the quarantine is a
 * probe-time devarg of the driver, by default the CM timewait of the options.
 */
#include <cstdint>
#include <cstdio>
#include <string>

#include <mlx5_qpn/mlx5_qpn_cm.h>

#include "testpmd.h"

uint32_t
cm_timewait_ms(const run_config &cfg)
{
	return mlx5_qpn_cm_timewait_ms(cfg.plt, cfg.ack_delay);
}

/* The devargs a device is probed with: the quarantine is a probe-time devarg of the driver;
 * unless the user set it in the devargs, it is --quarantine-us, by default the CM timewait.
 * The user's devargs were checked as typed (check_devargs), so appending one pair keeps them
 * valid; the quarantine itself was checked as an option (parse_args). */
std::string
devargs_with_quarantine(const std::string &da, int64_t quarantine_us, const run_config &cfg)
{
	if (devargs_has_key(da, "quarantine_us"))
		return da;
	uint64_t q = quarantine_us >= 0 ? static_cast<uint64_t>(quarantine_us) :
					  uint64_t(cm_timewait_ms(cfg)) * 1000u;
	return da + ",quarantine_us=" + std::to_string(q);
}

/* Checked devargs have no empty pair, no '[' list and no '=' but one per pair: a split on ','
 * gives exactly the driver's pairs (the first may be the bare device name). */
bool
devargs_has_key(const std::string &da, const char *key)
{
	const std::string want = std::string(key) + "=";
	size_t at = 0;
	for (;;) {
		if (da.compare(at, want.size(), want) == 0)
			return true;
		size_t comma = da.find(',', at);
		if (comma == std::string::npos)
			return false;
		at = comma + 1;
	}
}

std::string
devargs_without_key(const std::string &da, const char *key)
{
	const std::string want = std::string(key) + "=";
	std::string out;
	size_t at = 0;
	for (;;) {
		size_t comma = da.find(',', at);
		std::string pair = da.substr(at, comma == std::string::npos ? std::string::npos :
									      comma - at);
		if (pair.compare(0, want.size(), want) != 0)
			out += (out.empty() ? "" : ",") + pair;
		if (comma == std::string::npos)
			return out;
		at = comma + 1;
	}
}

int
devargs_from_eal(run_config *cfg)
{
	int rc = eal_devs_list("qpn-testpmd", &cfg->eal_devs);
	if (rc != 0)
		return rc;
	if (!cfg->eal_devs.empty() && !cfg->devargs.empty()) {
		fprintf(stderr, "qpn-testpmd: give the devices once: --vdev=mlx5_qpn_... or "
				"--qpn-dev, not both\n");
		return -EINVAL;
	}
	for (auto &e : cfg->eal_devs)
		cfg->devargs.push_back(e.devargs);
	return 0;
}
