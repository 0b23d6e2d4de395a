/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn_vdev_proc [EAL options]
 *
 * A DPDK application for the vdev tests (tests/vdev/test_vdev_proc.cpp) that uses the driver only
 * as a DPDK application does: its devices come from the EAL (--vdev, rte_dev_probe()), primary
 * or secondary as the EAL options say. It obeys commands read from stdin, one a line, each
 * answered with one line that starts with "@ " on stdout. EOF on stdin is "quit".
 *
 *   dev NAME        -> "@ DEV name guid secondary" for the probed device NAME ("sim7"), or
 *                      "@ NODEV"
 *   plug DEVSTR     rte_dev_probe(DEVSTR)              -> "@ RC rc"
 *   unplug VDEV     rte_dev_remove() of vdev VDEV      -> "@ RC rc" (-ENOENT: no such vdev)
 *   alloc NAME      one QPN of device NAME, held       -> "@ RC rc"
 *   free NAME       every held QPN back to device NAME -> "@ RC rc"
 *   quit            rte_eal_cleanup() (it removes every vdev), exit 0
 */
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

/* The device iterator is experimental in DPDK 22.11. */
#define ALLOW_EXPERIMENTAL_API
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>

#include "../../app/common/eal_devs.h" /* by path: eal_find_vdev(), the apps' own */
#include "mlx5_qpn.h"

#if defined(__SANITIZE_THREAD__)
/*
 * This process, and no other of the suite, exercises DPDK's hot-plug IPC between a primary and
 * a secondary: the EAL's mp thread hands each request to its interrupt thread through
 * rte_eal_alarm_set(), which then probes or removes the vdev (our probe and close run there)
 * and edits the EAL's bus and devargs lists; the main thread's rte_eal_cleanup() later walks
 * and frees the same. All of that is synchronised inside the uninstrumented EAL (its
 * spinlocks, its IPC), in frames without symbols, so ThreadSanitizer reports races between
 * these threads that are not there (a strdup'ed request freed by the other thread; the pool's
 * memory, written by the probe in the interrupt thread, freed at cleanup). Their only handle is
 * the module, and a module-wide entry in config/tsan.supp would hide every race of every EAL
 * worker lcore in every process (any stack of a worker starts in librte_eal): so it is here,
 * for this helper only. TSan adds these to the file of TSAN_OPTIONS.
 */
extern "C" const char *
__tsan_default_suppressions()
{
	return "race:librte_eal.so.23\n";
}
#endif

namespace {

std::vector<uint32_t> g_held;

void
obey(const char *cmd, const char *arg)
{
	if (strcmp(cmd, "dev") == 0) {
		struct mlx5_qpn_dev *d = mlx5_qpn_dev_lookup(arg);
		struct mlx5_qpn_dev_info info;
		if (d == nullptr || mlx5_qpn_dev_info_get(d, &info) != 0) {
			printf("@ NODEV\n");
			return;
		}
		printf("@ DEV %s %016" PRIx64 " %d\n", info.name, info.node_guid, info.secondary);
	} else if (strcmp(cmd, "plug") == 0) {
		printf("@ RC %d\n", rte_dev_probe(arg));
	} else if (strcmp(cmd, "unplug") == 0) {
		struct rte_device *dev = eal_find_vdev(arg);
		printf("@ RC %d\n", dev != nullptr ? rte_dev_remove(dev) : -ENOENT);
	} else if (strcmp(cmd, "alloc") == 0) {
		struct mlx5_qpn_dev *d = mlx5_qpn_dev_lookup(arg);
		uint32_t qpn = 0;
		int rc = d != nullptr ? mlx5_qpn_reserved_alloc(d, &qpn) : -ENODEV;
		if (rc == 0)
			g_held.push_back(qpn);
		printf("@ RC %d\n", rc);
	} else if (strcmp(cmd, "free") == 0) {
		struct mlx5_qpn_dev *d = mlx5_qpn_dev_lookup(arg);
		int rc = d != nullptr ? 0 : -ENODEV;
		for (size_t i = 0; d != nullptr && i < g_held.size(); i++)
			if (mlx5_qpn_reserved_dealloc(d, g_held[i]) != 0)
				rc = -EINVAL;
		if (d != nullptr)
			g_held.clear();
		printf("@ RC %d\n", rc);
	} else {
		printf("@ ERR unknown command %s\n", cmd);
	}
}

} /* namespace */

int
main(int argc, char **argv)
{
	setvbuf(stdout, nullptr, _IOLBF, 0);
	if (rte_eal_init(argc, argv) < 0) {
		printf("@ EAL %d\n", rte_errno);
		return 1;
	}
	printf("@ READY\n");
	char line[512];
	while (fgets(line, sizeof(line), stdin) != nullptr) {
		line[strcspn(line, "\n")] = '\0';
		char *arg = strchr(line, ' ');
		if (arg != nullptr)
			*arg++ = '\0';
		if (strcmp(line, "quit") == 0)
			break;
		obey(line, arg != nullptr ? arg : "");
	}
	rte_eal_cleanup();
	return 0;
}
