/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hardware backend's purge hook through mlx5_qpn_dev_purge(), against the fake rdma-core:
 * the hardware keeps nothing of its own, so a purge resolves the name to the device's node GUID
 * (ibv_get_device_list, ibv_get_device_guid) and removes that GUID's lease file, which a crashed
 * process leaves; a name no device has is refused and removes nothing; a device probed in this
 * process is busy. As the emulated device's purge (LeaseClose.* in tests/lease/).
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "hw/mlx5_qpn_hw.h"
#include "hw_fake_glue.h"
#include "hw_test_util.h"
#include "lease/mlx5_qpn_lease.h"
#include "mlx5_qpn.h"

namespace {

using hwfake::fake;

/* A GUID of this process's own: other test processes use the fake's default one. */
uint64_t
own_guid(uint32_t salt)
{
	return 0x0002c9fc00000000ull | (uint64_t(salt & 0xffu) << 24) |
	       (static_cast<uint32_t>(getpid()) & 0xffffffu);
}

std::string
lease_name(uint64_t guid)
{
	char n[64];
	qpn::lease::name_of(guid, n, sizeof(n));
	return n;
}

/* A lease file of the GUID as a crashed process leaves it (a purge removes it by name, whatever
 * it holds). */
void
plant_lease(uint64_t guid)
{
	int fd = shm_open(lease_name(guid).c_str(), O_RDWR | O_CREAT, 0600);
	ASSERT_GE(fd, 0);
	close(fd);
}

bool
lease_exists(uint64_t guid)
{
	int fd = shm_open(lease_name(guid).c_str(), O_RDONLY, 0);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* Removes what a failed test leaves. */
struct LeaseGone {
	uint64_t guid;
	~LeaseGone() { shm_unlink(lease_name(guid).c_str()); }
};

} // namespace

/* A hardware name's purge removes the lease file of the device's GUID, by either spelling of the
 * name, and nothing else; with nothing left it says -ENOENT. */
TEST(HwPurge, RemovesTheLeaseFileOfTheDevicesGuid)
{
	hwfake::Scope scope;
	const uint64_t guid = own_guid(1), other = own_guid(2);
	LeaseGone g1{guid}, g2{other};
	fake().guid = guid;
	plant_lease(guid);
	plant_lease(other);
	EXPECT_EQ(mlx5_qpn_dev_purge("mlx5_fake"), 0);
	EXPECT_FALSE(lease_exists(guid));
	EXPECT_TRUE(lease_exists(other)) << "another device's lease file was removed";
	EXPECT_EQ(mlx5_qpn_dev_purge("mlx5_fake"), -ENOENT);

	plant_lease(guid);
	EXPECT_EQ(mlx5_qpn_dev_purge("ib=mlx5_fake"), 0);
	EXPECT_FALSE(lease_exists(guid));
	EXPECT_EQ(mlx5_qpn_dev_purge("ib=mlx5_fake"), -ENOENT);
	EXPECT_TRUE(lease_exists(other));
	EXPECT_EQ(hwfake::live_objects(), 0); /* no context was opened for it */
	EXPECT_EQ(fake().contexts_open, 0);
}

/* The hook alone: -ENOENT (nothing of the backend's own) with the GUID the device reports. */
TEST(HwPurge, HookNamesTheGuidAndRemovesNothingItself)
{
	hwfake::Scope scope;
	const uint64_t guid = own_guid(3);
	LeaseGone g{guid};
	fake().guid = guid;
	plant_lease(guid);
	uint64_t got = 0;
	EXPECT_EQ(mlx5_qpn_hw_purge("mlx5_fake", &got), -ENOENT);
	EXPECT_EQ(got, guid);
	EXPECT_TRUE(lease_exists(guid)); /* the lease file is the generic layer's */
	got = 1;
	EXPECT_EQ(mlx5_qpn_hw_purge("mlx5_none", &got), -ENODEV);
	EXPECT_EQ(got, 0u);
}

/* A name no device has, or a malformed one, is refused in one line and removes nothing. */
TEST(HwPurge, UnknownOrMalformedNameRemovesNothing)
{
	hwfake::Scope scope;
	const uint64_t guid = own_guid(4);
	LeaseGone g{guid};
	fake().guid = guid;
	plant_lease(guid);
	{
		hwtest::LogCapture log;
		EXPECT_EQ(mlx5_qpn_dev_purge("mlx5_none"), -ENODEV);
		const std::string text = log.text();
		EXPECT_EQ(hwtest::count_lines(text), 1u) << text;
		EXPECT_NE(text.find("no RDMA device \"mlx5_none\" (1 devices found)"),
			  std::string::npos)
			<< text;
	}
	EXPECT_EQ(mlx5_qpn_dev_purge("ib=mlx5_none"), -ENODEV);
	EXPECT_EQ(mlx5_qpn_dev_purge("ib="), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dev_purge("ib=mlx5 fake"), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dev_purge("ib=mlx5_fake_with_a_name_of_32_chars"), -EINVAL);
	EXPECT_TRUE(lease_exists(guid));
}

/* A device probed in this process is busy: its lease file stays; once closed, the purge
 * removes whatever the close left. */
TEST(HwPurge, ProbedHereIsBusy)
{
	hwfake::Scope scope;
	const uint64_t guid = own_guid(5);
	LeaseGone g{guid};
	fake().guid = guid;
	mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe("ib=mlx5_fake,reserved_qpn=try,quarantine_us=0,max_qpns=1024",
				     &dev),
		  0);
	ASSERT_TRUE(lease_exists(guid)); /* the probe opened it */
	EXPECT_EQ(mlx5_qpn_dev_purge("ib=mlx5_fake"), -EBUSY);
	EXPECT_EQ(mlx5_qpn_dev_purge("mlx5_fake"), -EBUSY);
	EXPECT_TRUE(lease_exists(guid));
	mlx5_qpn_dev_close(dev);
	const bool left = lease_exists(guid);
	EXPECT_EQ(mlx5_qpn_dev_purge("mlx5_fake"), left ? 0 : -ENOENT);
	EXPECT_FALSE(lease_exists(guid));
	EXPECT_EQ(hwfake::live_objects(), 0);
}
