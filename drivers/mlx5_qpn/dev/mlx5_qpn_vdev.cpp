/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver as a DPDK virtual device: the EAL probes it from --vdev (or rte_dev_probe() at run
 * time) and removes it at rte_dev_remove() and rte_eal_cleanup(). It needs DPDK's driver-SDK
 * headers (bus_vdev_driver.h), which Debian's DPDK does not install: meson compiles this file
 * with the headers of -Ddpdk_sdk_headers (devtools/dpdk-sdk-headers.sh), doc/guides/driver.md §16.
 *
 *   --vdev=mlx5_qpn_sim0,quarantine_us=2000000     the emulated device sim0
 *   --vdev=mlx5_qpn0,ib=mlx5_0                     hardware device mlx5_0
 *
 * The vdev's name and args become the driver's devargs ("sim0,quarantine_us=2000000"), which
 * are checked whole before anything is made: a refusal is one log line naming the vdev and the
 * offending key, and leaves no segment and no lease file. A remove closes the device (in a
 * secondary: detaches), even with QPNs allocated: see vdev_remove().
 */
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

/* rte_vdev_register() is internal API: drivers are its only users. */
#define ALLOW_INTERNAL_API
#include <bus_vdev_driver.h>
#include <rte_eal.h>

#include "mlx5_qpn.h"
#include "mlx5_qpn_dev_internal.h"
#include "mlx5_qpn_dev_log.h"
#include "mlx5_qpn_devargs.h"

namespace {

/* The driver's devargs of the vdev (mlx5_qpn_vdev_devargs() makes them the same way) into buf
 * (MLX5_QPN_DEVARGS_MAX + 1 bytes: nothing allocated). @return 0; -E2BIG longer than any devargs
 * (one log line). */
int
to_devargs(const char *vdev_name, const char *args, char *buf, size_t size)
{
	int rc = mlx5_qpn_vdev_to_devargs(vdev_name, args, buf, size);
	if (rc == -E2BIG)
		DEV_LOG(ERR, "vdev %s: devargs longer than %d characters (MLX5_QPN_DEVARGS_MAX)",
			vdev_name, MLX5_QPN_DEVARGS_MAX);
	return rc;
}

/* The device name the devargs give ("sim0", or the ib= value), into name; -EINVAL with one line
 * naming the vdev and the offending key (the driver's own check, nothing touched). */
int
checked_name(const char *vdev_name, const char *da, char *name, size_t size)
{
	char why[160];
	if (mlx5_qpn_devargs_check(da, why, sizeof(why)) != 0) {
		DEV_LOG(ERR, "vdev %s: %s", vdev_name, why);
		return -EINVAL;
	}
	struct mlx5_qpn_devargs parsed;
	if (mlx5_qpn_devargs_parse(da, &parsed) != 0)
		return -EINVAL; /* the check above accepted it: not reached */
	snprintf(name, size, "%s", parsed.name);
	return 0;
}

int
vdev_probe(struct rte_vdev_device *vdev)
{
	const char *vname = rte_vdev_device_name(vdev);
	char da[MLX5_QPN_DEVARGS_MAX + 1];
	char name[MLX5_QPN_DEV_NAMESIZE];
	int rc = to_devargs(vname, rte_vdev_device_args(vdev), da, sizeof(da));
	if (rc == 0 && da[0] == '\0') {
		DEV_LOG(ERR,
			"vdev %s: names no device (mlx5_qpn_simN[,key=value...] or "
			"mlx5_qpnN,ib=DEVICE[,key=value...])",
			vname);
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = checked_name(vname, da, name, sizeof(name));
	if (rc != 0)
		return rc;
	if (mlx5_qpn_dev_lookup(name) != nullptr) {
		/* Another vdev (or the application) has it: one device, one owner. Not -EEXIST,
		 * which rte_dev_probe() takes for "this vdev is plugged already" and answers 0. */
		DEV_LOG(ERR, "vdev %s: device %s is already probed in this process", vname, name);
		return -EBUSY;
	}
	struct mlx5_qpn_dev *dev = nullptr;
	rc = mlx5_qpn_dev_probe(da, &dev);
	if (rc != 0)
		DEV_LOG(ERR, "vdev %s: probe of %s failed: %s", vname, name, strerror(-rc));
	return rc;
}

int
vdev_remove(struct rte_vdev_device *vdev)
{
	const char *vname = rte_vdev_device_name(vdev);
	char da[MLX5_QPN_DEVARGS_MAX + 1];
	char name[MLX5_QPN_DEV_NAMESIZE];
	if (to_devargs(vname, rte_vdev_device_args(vdev), da, sizeof(da)) != 0 ||
	    checked_name(vname, da, name, sizeof(name)) != 0)
		return 0; /* never probed */
	struct mlx5_qpn_dev *dev = mlx5_qpn_dev_lookup(name);
	if (dev == nullptr)
		return 0; /* the application closed it already */
	/*
	 * Never refused: rte_eal_cleanup() calls this same remove, frees the vdev whatever it
	 * answers and then unmaps the EAL memory the device's pool lives in, so a device left open
	 * there is used after its memory is gone (its control thread). QPNs still allocated are
	 * forgotten as by mlx5_qpn_dev_close(): the lease file keeps their ranges in quarantine, so
	 * a new probe hands none of them out early (invariant 5); the application's handle is gone.
	 */
	struct mlx5_qpn_dev_stats st;
	if (rte_eal_process_type() == RTE_PROC_PRIMARY && mlx5_qpn_dev_stats_get(dev, &st) == 0 &&
	    st.pool.in_use != 0)
		DEV_LOG(WARNING,
			"vdev %s: device %s removed with %" PRIu64
			" QPNs allocated: they stay in quarantine",
			vname, name, st.pool.in_use);
	mlx5_qpn_dev_close(dev);
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
/* The keys every device takes, then the emulated device's own (driver.md §3 has them all). */
#define MLX5_QPN_VDEV_PARAMS                                                                       \
	"ib=<ibv device> quarantine_us=<uint> cache=<uint> log_range=<uint> low_water=<uint> "     \
	"max_qpns=<uint> reserved_qpn=try|yes|no port=<uint> (emulated: guid=<uint> numa=<uint> "  \
	"ports=<uint> log_max_alloc=<uint> log_max_num=<uint> ...)"
RTE_PMD_REGISTER_PARAM_STRING(mlx5_qpn, MLX5_QPN_VDEV_PARAMS);
/*
 * What dpdk-pmdinfo.py reads: DPDK's build makes this string for its own drivers from the two
 * macros above (buildtools/pmdinfogen.py); an out-of-tree driver has no such step, so it is
 * written here in the same form: "PMD_INFO_STRING= " and a JSON object, in .rodata.
 */
[[gnu::used]] static const char mlx5_qpn_pmd_info[] =
	"PMD_INFO_STRING= {\"name\": \"mlx5_qpn\", \"params\": \"" MLX5_QPN_VDEV_PARAMS
	"\", \"pci_ids\": []}";
