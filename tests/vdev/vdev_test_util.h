/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef VDEV_TEST_UTIL_H
#define VDEV_TEST_UTIL_H

/*
 * What the vdev tests share: the skip where this build has no vdev (DPDK's driver-SDK headers
 * could not be had: meson's warning says so), names no other test or helper uses, and the
 * files a device leaves in /dev/shm.
 */
#include <string>

#include <gtest/gtest.h>

#include "vdev/vdev_test_config.h"

#ifdef QPN_TEST_HAVE_VDEV
#define VDEV_SKIP_IF_NOT_BUILT() (void)0
#else
#define VDEV_SKIP_IF_NOT_BUILT()                                                                   \
	GTEST_SKIP()                                                                               \
		<< "no mlx5_qpn vdev in this build: DPDK's driver-SDK headers were not found "     \
		   "(devtools/dpdk-sdk-headers.sh, meson -Ddpdk_sdk_headers=DIR)"
#endif

namespace vdev_test {

/* "simvdev<pid><tag>": an emulated device name of this test process only. */
std::string sim_name(const std::string &tag);

/* Whether /dev/shm/NAME exists (the emulated device's segment is mlx5_qpn_<name>, a lease file
 * mlx5_qpn_lease_<guid as 16 hex digits>). */
bool shm_exists(const std::string &name);

} /* namespace vdev_test */

#endif
