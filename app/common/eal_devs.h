/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef APP_EAL_DEVS_H
#define APP_EAL_DEVS_H

/*
 * The devices an application runs on, taken from the EAL, as dpdk-testpmd runs on the ports the
 * EAL probed: every mlx5_qpn vdev (--vdev=mlx5_qpn_sim7,... or rte_dev_probe()) is a device of
 * the run. Shared by qpn-testpmd and qpn-perf.
 *
 * A vdev's name and args give the driver's devargs, as the driver says (mlx5_qpn_vdev_devargs(),
 * doc/guides/driver.md §16):
 *   mlx5_qpn_sim7,quarantine_us=5000   ->  "sim7,quarantine_us=5000"   (device sim7)
 *   mlx5_qpn0,ib=mlx5_0,cache=64        ->  "ib=mlx5_0,cache=64"        (device mlx5_0)
 */
#include <string>
#include <vector>

struct mlx5_qpn_dev;
struct rte_device;

/* The vdev of that name on the EAL's vdev bus ("mlx5_qpn_sim7"), or nullptr. Also used by the
 * vdev tests and their helper process. */
struct rte_device *eal_find_vdev(const char *name);

/* One mlx5_qpn vdev of the EAL. */
struct eal_dev {
	std::string vdev;    /* the vdev's name: "mlx5_qpn_sim7" */
	std::string devargs; /* the driver's devargs: "sim7,quarantine_us=5000" */
	std::string name;    /* the device's name: "sim7", "mlx5_0" */
};

/*
 * The mlx5_qpn vdevs the EAL was given, after rte_eal_init(), in its order, into *devs (empty:
 * none). A vdev that is not probed (the driver refused it: its line and the EAL's are above), or
 * vdevs of other drivers only, stop the application: one line on stderr (PROG: ...) and -ENODEV.
 * A vdev of another driver beside an mlx5_qpn one is left to its driver.
 */
int eal_devs_list(const char *prog, std::vector<eal_dev> *devs);

/*
 * The device of vdev D probed with DEVARGS (the driver's form, as D.devargs): the device the
 * EAL probed if its devargs are those, else D removed and probed again with them (hot-plug:
 * rte_dev_remove(), rte_dev_probe()), so that the EAL keeps owning it; in a secondary the
 * primary's device as it is. 0 and *dev; a negative errno with one line on stderr.
 */
int eal_dev_plug(const char *prog, const eal_dev &d, const std::string &devargs,
		 struct mlx5_qpn_dev **dev);

/* Remove vdev D (rte_dev_remove(): the driver closes the device); nothing in a secondary (its
 * rte_eal_cleanup() detaches). 0 (also if it is not plugged); a negative errno with one line
 * on stderr. */
int eal_dev_unplug(const char *prog, const eal_dev &d);

#endif
