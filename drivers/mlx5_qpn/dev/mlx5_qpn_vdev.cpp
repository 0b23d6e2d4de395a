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

/* rte_vdev_register() is internal API: drivers are its only users. */
#define ALLOW_INTERNAL_API
#include <bus_vdev_driver.h>

#include "mlx5_qpn.h"
#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_dev_log.h"
#include "mlx5_qpn_devargs.h"

namespace {

constexpr const char *kPrefix = "mlx5_qpn";

/*
 * "mlx5_qpn_sim0" + "a=b" -> "sim0,a=b"; "mlx5_qpn0" + "ib=mlx5_0" -> "ib=mlx5_0", into buf
 * (MLX5_QPN_DEVARGS_MAX + 1 bytes: nothing allocated). @return 0; -E2BIG longer than any devargs
 * (one log line).
 */
int
to_devargs(const char *vdev_name, const char *args, char *buf, size_t size)
{
	const char *rest = strlen(vdev_name) > strlen(kPrefix) ? vdev_name + strlen(kPrefix) : "";
	if (rest[0] == '_')
		rest++;
	const char *a = args != nullptr ? args : "";
	/* A bare device name that a backend claims by prefix ("sim0"); else the args name it. */
	const mlx5_qpn_backend_desc *be = mlx5_qpn_backend_of_name(rest);
	int n;
	if (rest[0] != '\0' && be != nullptr && be->name_prefix != nullptr)
		n = snprintf(buf, size, "%s%s%s", rest, a[0] != '\0' ? "," : "", a);
	else
		n = snprintf(buf, size, "%s", a);
	if (n < 0 || size_t(n) >= size) {
		DEV_LOG(ERR, "vdev %s: devargs longer than %d characters (MLX5_QPN_DEVARGS_MAX)",
			vdev_name, MLX5_QPN_DEVARGS_MAX);
		return -E2BIG;
	}
	return 0;
}

int
vdev_probe(struct rte_vdev_device *vdev)
{
	char da[MLX5_QPN_DEVARGS_MAX + 1];
	int rc = to_devargs(rte_vdev_device_name(vdev), rte_vdev_device_args(vdev), da, sizeof(da));
	if (rc != 0)
		return rc;
	struct mlx5_qpn_dev *dev = nullptr;
	rc = mlx5_qpn_dev_probe(da, &dev);
	if (rc != 0)
		DEV_LOG(ERR, "vdev %s: probe failed: %s", rte_vdev_device_name(vdev),
			strerror(-rc));
	return rc;
}

int
vdev_remove(struct rte_vdev_device *vdev)
{
	char da[MLX5_QPN_DEVARGS_MAX + 1];
	if (to_devargs(rte_vdev_device_name(vdev), rte_vdev_device_args(vdev), da, sizeof(da)) != 0)
		return 0; /* never probed */
	/* The device's name as probe saw it ("sim0", or the ib= value). */
	struct mlx5_qpn_devargs parsed;
	if (mlx5_qpn_devargs_parse(da, &parsed) == 0)
		mlx5_qpn_dev_close(mlx5_qpn_dev_lookup(parsed.name));
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
