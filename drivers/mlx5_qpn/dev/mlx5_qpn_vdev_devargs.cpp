/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a vdev of this driver means: its name and args as the driver's devargs and device name
 * (mlx5_qpn_vdev_devargs(), mlx5_qpn.h). The vdev driver (mlx5_qpn_vdev.cpp, built only with the
 * DPDK driver-SDK headers) probes with it; an application uses the same function to find the
 * device the EAL probed for a vdev, so the mapping lives in one place and needs no SDK header.
 *
 *   mlx5_qpn_sim7 + quarantine_us=5000  ->  "sim7,quarantine_us=5000"  (device sim7)
 *   mlx5_qpn0     + ib=mlx5_0,cache=64   ->  "ib=mlx5_0,cache=64"       (device mlx5_0)
 *
 * A suffix that a backend claims by prefix ("sim7": the emulated device's names) is the device;
 * any other suffix ("0", "_a") only tells vdevs apart, and the args name the device (ib=).
 */
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "mlx5_qpn.h"
#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_dev_internal.h"
#include "mlx5_qpn_devargs.h"

namespace {

constexpr const char kPrefix[] = "mlx5_qpn";
static_assert(MLX5_QPN_DEVARGS_SIZE == MLX5_QPN_DEVARGS_MAX + 1);
static_assert(MLX5_QPN_NAME_SIZE == MLX5_QPN_DEV_NAMESIZE);
static_assert(sizeof(mlx5_qpn_dev_info::name) == MLX5_QPN_NAME_SIZE);

} /* namespace */

int
mlx5_qpn_vdev_to_devargs(const char *vdev_name, const char *args, char *buf, size_t size)
{
	if (vdev_name == nullptr || buf == nullptr || size == 0 ||
	    strncmp(vdev_name, kPrefix, sizeof(kPrefix) - 1) != 0)
		return -EINVAL;
	const char *rest = vdev_name + sizeof(kPrefix) - 1;
	if (rest[0] == '_')
		rest++;
	const char *a = args != nullptr ? args : "";
	const mlx5_qpn_backend_desc *be = mlx5_qpn_backend_of_name(rest);
	int n;
	if (rest[0] != '\0' && be != nullptr && be->name_prefix != nullptr)
		n = snprintf(buf, size, "%s%s%s", rest, a[0] != '\0' ? "," : "", a);
	else
		n = snprintf(buf, size, "%s", a);
	if (n < 0 || size_t(n) >= size) {
		buf[0] = '\0';
		return -E2BIG;
	}
	return 0;
}

int
mlx5_qpn_vdev_devargs(const char *vdev_name, const char *args, char *devargs, size_t size,
		      char *name, size_t name_size)
{
	char da[MLX5_QPN_DEVARGS_MAX + 1];
	int rc = mlx5_qpn_vdev_to_devargs(vdev_name, args, da, sizeof(da));
	if (rc != 0)
		return rc;
	/* The driver's own check (the grammar, the keys, a device named at all). */
	if (da[0] == '\0' || mlx5_qpn_devargs_check(da, nullptr, 0) != 0)
		return -EINVAL;
	struct mlx5_qpn_devargs parsed;
	if (mlx5_qpn_devargs_parse(da, &parsed) != 0)
		return -EINVAL; /* the check above accepted it: not reached */
	if ((devargs != nullptr && strlen(da) >= size) ||
	    (name != nullptr && strlen(parsed.name) >= name_size))
		return -E2BIG;
	if (devargs != nullptr)
		memcpy(devargs, da, strlen(da) + 1);
	if (name != nullptr)
		memcpy(name, parsed.name, strlen(parsed.name) + 1);
	return 0;
}
