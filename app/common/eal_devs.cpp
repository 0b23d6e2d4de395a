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

bool
starts_with(const std::string &s, const char *p)
{
	return s.compare(0, strlen(p), p) == 0;
}

/* Vdev NAME with ARGS as the driver reads it (mlx5_qpn_vdev_devargs()); false if the driver
 * would not probe it (it said why when the EAL gave it the vdev). */
bool
to_eal_dev(const std::string &name, const std::string &args, eal_dev *d)
{
	char da[MLX5_QPN_DEVARGS_SIZE];
	char dev[MLX5_QPN_NAME_SIZE];
	d->vdev = name;
	if (mlx5_qpn_vdev_devargs(name.c_str(), args.c_str(), da, sizeof(da), dev, sizeof(dev)) !=
	    0)
		return false;
	d->devargs = da;
	d->name = dev;
	return true;
}

std::string
vdev_args(const struct rte_device *dev)
{
	const struct rte_devargs *da = rte_dev_devargs(dev);
	return da != nullptr && da->args != nullptr ? da->args : "";
}

/* DEVARGS (the driver's form) as the args of vdev D: without what the vdev's name gives (the
 * device "sim7" of mlx5_qpn_sim7; nothing for mlx5_qpn0, whose args name the device). */
std::string
args_of(const eal_dev &d, const std::string &devargs)
{
	char own[MLX5_QPN_DEVARGS_SIZE];
	if (mlx5_qpn_vdev_devargs(d.vdev.c_str(), nullptr, own, sizeof(own), nullptr, 0) != 0)
		return devargs; /* the name alone names no device */
	if (devargs == own)
		return "";
	if (starts_with(devargs, (std::string(own) + ",").c_str()))
		return devargs.substr(strlen(own) + 1);
	return devargs;
}

} /* namespace */

struct rte_device *
eal_find_vdev(const char *name)
{
	struct rte_dev_iterator it;
	struct rte_device *dev;
	RTE_DEV_FOREACH(dev, "bus=vdev", &it)
	{
		if (strcmp(name, rte_dev_name(dev)) == 0)
			return dev;
	}
	return nullptr;
}

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
		eal_dev d;
		if (!to_eal_dev(name, vdev_args(dev), &d) || drv == nullptr ||
		    strcmp(rte_driver_name(drv), kDriver) != 0 ||
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
	struct rte_device *dev = eal_find_vdev(d.vdev.c_str());
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
	if (rte_eal_process_type() != RTE_PROC_PRIMARY || eal_find_vdev(d.vdev.c_str()) == nullptr)
		return 0;
	int rc = rte_eal_hotplug_remove("vdev", d.vdev.c_str());
	if (rc != 0)
		fprintf(stderr, "%s: vdev %s: remove failed: %s\n", prog, d.vdev.c_str(),
			strerror(rc < 0 ? -rc : rc));
	return rc;
}
