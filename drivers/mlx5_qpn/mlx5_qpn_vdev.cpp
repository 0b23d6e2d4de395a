/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration as a DPDK virtual device, for DPDK builds that install the driver SDK
 * (bus_vdev_driver.h). Debian's DPDK does not, so meson compiles this file only when the header
 * is found; mlx5_qpn_dev_probe() stays the main path.
 *
 *   --vdev=mlx5_qpn_sim0,quarantine_us=2000000     the emulated device sim0
 *   --vdev=mlx5_qpn0,ib=mlx5_0                     hardware device mlx5_0
 */
#include <cerrno>
#include <cstring>
#include <string>

/* rte_vdev_register() is internal API: drivers are its only users. */
#define ALLOW_INTERNAL_API
#include <bus_vdev_driver.h>

#include "mlx5_qpn.h"
#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_dev_log.h"
#include "mlx5_qpn_devargs.h"

namespace {

constexpr const char *kPrefix = "mlx5_qpn";

/* "mlx5_qpn_sim0" + "a=b" -> "sim0,a=b"; "mlx5_qpn0" + "ib=mlx5_0" -> "ib=mlx5_0". */
std::string
to_devargs(const char *vdev_name, const char *args)
{
	std::string name(vdev_name);
	std::string rest = name.size() > strlen(kPrefix) ? name.substr(strlen(kPrefix)) : "";
	if (!rest.empty() && rest[0] == '_')
		rest.erase(0, 1);
	std::string a = args != nullptr ? args : "";
	/* A bare device name that a backend claims by prefix ("sim0"); else the args name it. */
	const mlx5_qpn_backend_desc *be = mlx5_qpn_backend_of_name(rest.c_str());
	if (!rest.empty() && be != nullptr && be->name_prefix != nullptr)
		return a.empty() ? rest : rest + "," + a;
	return a;
}

int
vdev_probe(struct rte_vdev_device *vdev)
{
	std::string da = to_devargs(rte_vdev_device_name(vdev), rte_vdev_device_args(vdev));
	struct mlx5_qpn_dev *dev = nullptr;
	int rc = mlx5_qpn_dev_probe(da.c_str(), &dev);
	if (rc != 0)
		DEV_LOG(ERR, "vdev %s: probe failed: %s", rte_vdev_device_name(vdev),
			strerror(-rc));
	return rc;
}

int
vdev_remove(struct rte_vdev_device *vdev)
{
	std::string da = to_devargs(rte_vdev_device_name(vdev), rte_vdev_device_args(vdev));
	/* The device's name as probe saw it ("sim0", or the ib= value). */
	struct mlx5_qpn_devargs parsed;
	if (mlx5_qpn_devargs_parse(da.c_str(), &parsed) == 0)
		mlx5_qpn_dev_close(mlx5_qpn_dev_get(parsed.name));
	return 0;
}

} /* namespace */

static struct rte_vdev_driver mlx5_qpn_vdev_drv = {
	.next = {},
	.driver = {},
	.probe = vdev_probe,
	.remove = vdev_remove,
	.dma_map = nullptr,
	.dma_unmap = nullptr,
	.drv_flags = 0,
};

RTE_PMD_REGISTER_VDEV(mlx5_qpn, mlx5_qpn_vdev_drv);
