/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mlx5_qpn vdevs of the EAL as an application's devices (eal_devs.h).
 */
#include "eal_devs.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

/* The device iterator (RTE_DEV_FOREACH) is experimental in DPDK 22.11: this file only. */
#define ALLOW_EXPERIMENTAL_API
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_eal.h>

#include <mlx5_qpn/mlx5_qpn.h>

namespace {

/* The vdev bus gives a vdev to the driver whose name its name starts with. */
constexpr char kDriver[] = "mlx5_qpn";
/* The emulated device's names; any other device is named by ib= in the args. */
constexpr char kSimPrefix[] = "sim";

bool
starts_with(const std::string &s, const char *p)
{
	return s.compare(0, strlen(p), p) == 0;
}

/* The driver's devargs and device name of vdev NAME with ARGS (eal_devs.h, driver.md §16). */
eal_dev
to_eal_dev(const std::string &name, const std::string &args)
{
	eal_dev d;
	d.vdev = name;
	std::string rest = name.substr(strlen(kDriver));
	if (starts_with(rest, "_"))
		rest.erase(0, 1);
	if (starts_with(rest, kSimPrefix)) {
		d.name = rest;
		d.devargs = rest + (args.empty() ? "" : "," + args);
		return d;
	}
	d.devargs = args;
	for (size_t at = 0; at < args.size();) {
		size_t comma = args.find(',', at);
		std::string pair = args.substr(at, comma == std::string::npos ? comma : comma - at);
		if (starts_with(pair, "ib="))
			d.name = pair.substr(3);
		at = comma == std::string::npos ? args.size() : comma + 1;
	}
	return d;
}

/* The vdev of that name on the EAL's vdev bus, or nullptr. */
struct rte_device *
find_vdev(const std::string &name)
{
	struct rte_dev_iterator it;
	struct rte_device *dev;
	RTE_DEV_FOREACH(dev, "bus=vdev", &it)
	{
		if (name == rte_dev_name(dev))
			return dev;
	}
	return nullptr;
}

std::string
vdev_args(const struct rte_device *dev)
{
	const struct rte_devargs *da = rte_dev_devargs(dev);
	return da != nullptr && da->args != nullptr ? da->args : "";
}

/* DEVARGS (the driver's form) as the args of vdev D: without the leading device name. */
std::string
args_of(const eal_dev &d, const std::string &devargs)
{
	if (devargs == d.name)
		return "";
	if (starts_with(devargs, (d.name + ",").c_str()) && starts_with(d.name, kSimPrefix))
		return devargs.substr(d.name.size() + 1);
	return devargs;
}

} /* namespace */

int
eal_devs_list(const char *prog, std::vector<eal_dev> *devs)
{
	struct rte_dev_iterator it;
	struct rte_device *dev;
	std::string others;
	devs->clear();
	RTE_DEV_FOREACH(dev, "bus=vdev", &it)
	{
		const std::string name = rte_dev_name(dev);
		const struct rte_driver *drv = rte_dev_driver(dev);
		if (!starts_with(name, kDriver)) {
			others += (others.empty() ? "" : ", ") + name;
			continue;
		}
		eal_dev d = to_eal_dev(name, vdev_args(dev));
		if (drv == nullptr || strcmp(rte_driver_name(drv), kDriver) != 0 ||
		    mlx5_qpn_dev_lookup(d.name.c_str()) == nullptr) {
			fprintf(stderr,
				"%s: vdev %s was not probed (the driver's line above says why): not "
				"running without it\n",
				prog, name.c_str());
			return -ENODEV;
		}
		devs->push_back(d);
	}
	if (devs->empty() && !others.empty()) {
		fprintf(stderr,
			"%s: no mlx5_qpn device among the vdevs (%s): give "
			"--vdev=mlx5_qpn_simN[,key=value...] or --vdev=mlx5_qpnN,ib=DEVICE\n",
			prog, others.c_str());
		return -ENODEV;
	}
	return 0;
}

int
eal_dev_plug(const char *prog, const eal_dev &d, const std::string &devargs,
	     struct mlx5_qpn_dev **out)
{
	const std::string args = args_of(d, devargs);
	struct rte_device *dev = find_vdev(d.vdev);
	*out = nullptr;
	/* A secondary's vdevs are the primary's (a hot-plug from here would act on every process):
	 * taken as they are. */
	const bool primary = rte_eal_process_type() == RTE_PROC_PRIMARY;
	if (primary && dev != nullptr && vdev_args(dev) != args) {
		int rc = eal_dev_unplug(prog, d);
		if (rc != 0)
			return rc;
		dev = nullptr;
	}
	if (dev == nullptr) {
		int rc = rte_eal_hotplug_add("vdev", d.vdev.c_str(), args.c_str());
		if (rc != 0) {
			fprintf(stderr, "%s: vdev %s: probe with \"%s\" failed: %s\n", prog,
				d.vdev.c_str(), args.c_str(), strerror(rc < 0 ? -rc : rc));
			return rc < 0 ? rc : -rc;
		}
	}
	*out = mlx5_qpn_dev_lookup(d.name.c_str());
	if (*out == nullptr) {
		fprintf(stderr, "%s: vdev %s is plugged but device %s is not probed\n", prog,
			d.vdev.c_str(), d.name.c_str());
		return -ENODEV;
	}
	return 0;
}

int
eal_dev_unplug(const char *prog, const eal_dev &d)
{
	/* In a secondary, rte_eal_cleanup() detaches it; a remove would remove it everywhere. */
	if (rte_eal_process_type() != RTE_PROC_PRIMARY || find_vdev(d.vdev) == nullptr)
		return 0;
	int rc = rte_eal_hotplug_remove("vdev", d.vdev.c_str());
	if (rc != 0)
		fprintf(stderr, "%s: vdev %s: remove failed: %s\n", prog, d.vdev.c_str(),
			strerror(rc < 0 ? -rc : rc));
	return rc;
}
