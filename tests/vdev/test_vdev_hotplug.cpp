/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The driver as a vdev of this test process's EAL, as an application hot-plugs it:
 * rte_dev_probe("mlx5_qpn_sim...,key=value") and rte_dev_remove(). A probe makes the device the
 * driver API finds (mlx5_qpn_dev_lookup()) with the vdev's devargs; a remove closes it, QPNs
 * still out included (they stay in quarantine); the lease (the quarantine of the QPNs let go)
 * holds across a remove and a new probe of the same name; bad input is refused in one line naming the vdev
 * and the key, and leaves nothing behind.
 */
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

/* The device iterator is experimental in DPDK 22.11. */
#define ALLOW_EXPERIMENTAL_API
#include <rte_dev.h>
#include <rte_log.h>

#include "mlx5_qpn.h"
#include "vdev_test_util.h"
#include "../../app/common/eal_devs.h" /* by path: eal_find_vdev(), the apps' own */

using vdev_test::shm_exists;
using vdev_test::sim_name;

namespace {

/* CALL's result, with the log lines it gives in *log. */
template <typename Call>
int
logged(Call call, std::string *log)
{
	char *buf = nullptr;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	FILE *saved = rte_log_get_stream();
	rte_openlog_stream(mem);
	int rc = call();
	rte_openlog_stream(saved == stderr ? nullptr : saved);
	fclose(mem);
	*log = std::string(buf != nullptr ? buf : "", len);
	free(buf);
	return rc;
}

int
probe_logged(const std::string &devstr, std::string *log)
{
	return logged([&] { return rte_dev_probe(devstr.c_str()); }, log);
}

/* Whether vdev NAME is on the bus with a driver (a refused one may stay there without: the EAL
 * keeps what it scanned). */
bool
probed(const std::string &name)
{
	struct rte_device *dev = eal_find_vdev(name.c_str());
	return dev != nullptr && rte_dev_driver(dev) != nullptr;
}

int
remove_vdev(const std::string &vdev)
{
	struct rte_device *dev = eal_find_vdev(vdev.c_str());
	return dev != nullptr ? rte_dev_remove(dev) : -ENOENT;
}

/* The driver's own lines (its log types are mlx5_qpn.*). */
std::vector<std::string>
driver_lines(const std::string &log)
{
	std::vector<std::string> out;
	size_t at = 0;
	while (at < log.size()) {
		size_t nl = log.find('\n', at);
		std::string line = log.substr(at, nl == std::string::npos ? nl : nl - at);
		if (line.rfind("mlx5_qpn", 0) == 0)
			out.push_back(line);
		at = nl == std::string::npos ? log.size() : nl + 1;
	}
	return out;
}

std::string
lease_file(uint64_t guid)
{
	char b[64];
	snprintf(b, sizeof(b), "mlx5_qpn_lease_%016" PRIx64, guid);
	return b;
}

class VdevHotplug : public ::testing::Test {
protected:
	void SetUp() override { VDEV_SKIP_IF_NOT_BUILT(); }
	void TearDown() override
	{
		for (auto &n : names_) {
			remove_vdev("mlx5_qpn_" + n);
			mlx5_qpn_dev_purge(n.c_str());
		}
	}
	std::string name(const std::string &tag)
	{
		names_.push_back(sim_name(tag));
		return names_.back();
	}
	std::vector<std::string> names_;
};

TEST_F(VdevHotplug, ProbeMakesTheDeviceAndRemoveClosesIt)
{
	const std::string n = name("hp");
	const std::string vdev = "mlx5_qpn_" + n;
	std::string log;
	ASSERT_EQ(probe_logged(vdev + ",quarantine_us=250000,max_qpns=4096", &log), 0) << log;
	struct mlx5_qpn_dev *dev = mlx5_qpn_dev_lookup(n.c_str());
	ASSERT_NE(dev, nullptr) << "the vdev's device is the one the driver API finds";
	ASSERT_NE(eal_find_vdev(vdev.c_str()), nullptr);
	struct mlx5_qpn_dev_info info;
	ASSERT_EQ(mlx5_qpn_dev_info_get(dev, &info), 0);
	EXPECT_EQ(info.quarantine_us, 250000u) << "the vdev's devargs are the device's";
	EXPECT_EQ(info.max_qpns, 4096u);
	uint32_t qpn;
	ASSERT_EQ(mlx5_qpn_reserved_alloc(dev, &qpn), 0);
	ASSERT_EQ(mlx5_qpn_reserved_dealloc(dev, qpn), 0);

	EXPECT_EQ(remove_vdev(vdev), 0);
	EXPECT_EQ(mlx5_qpn_dev_lookup(n.c_str()), nullptr) << "the remove closed the device";
	EXPECT_EQ(eal_find_vdev(vdev.c_str()), nullptr);
	/* The same name again: a new device, as the first. */
	ASSERT_EQ(probe_logged(vdev, &log), 0) << log;
	EXPECT_NE(mlx5_qpn_dev_lookup(n.c_str()), nullptr);
	EXPECT_EQ(remove_vdev(vdev), 0);
}

/* A remove with QPNs still allocated closes the device (rte_eal_cleanup() calls the same remove
 * and cannot be refused, mlx5_qpn_vdev.cpp says why) with one warning line; the QPNs stay in
 * quarantine: a new probe of the name hands none of them out. */
TEST_F(VdevHotplug, RemoveWithQpnsOutQuarantinesThem)
{
	const std::string n = name("busy");
	const std::string vdev = "mlx5_qpn_" + n;
	const std::string args = ",quarantine_us=600000000,max_qpns=2048";
	std::string log;
	ASSERT_EQ(probe_logged(vdev + args, &log), 0) << log;
	struct mlx5_qpn_dev *dev = mlx5_qpn_dev_lookup(n.c_str());
	ASSERT_NE(dev, nullptr);
	std::vector<uint32_t> out(16);
	for (auto &q : out)
		ASSERT_EQ(mlx5_qpn_reserved_alloc(dev, &q), 0);

	EXPECT_EQ(logged([&] { return remove_vdev(vdev); }, &log), 0);
	auto lines = driver_lines(log);
	ASSERT_EQ(lines.size(), 1u) << log;
	EXPECT_NE(lines[0].find("removed with 16 QPNs allocated"), std::string::npos) << lines[0];
	EXPECT_EQ(mlx5_qpn_dev_lookup(n.c_str()), nullptr);

	ASSERT_EQ(probe_logged(vdev + args, &log), 0) << log;
	dev = mlx5_qpn_dev_lookup(n.c_str());
	ASSERT_NE(dev, nullptr);
	struct mlx5_qpn_dev_stats st;
	ASSERT_EQ(mlx5_qpn_dev_stats_get(dev, &st), 0);
	EXPECT_GE(st.cooling_qpns, out.size()) << "the QPNs out at the remove still cool";
	std::vector<uint32_t> again;
	uint32_t q;
	for (int i = 0; i < 2048 && mlx5_qpn_reserved_alloc(dev, &q) == 0; i++)
		again.push_back(q);
	for (auto x : again) {
		for (auto y : out)
			EXPECT_NE(x, y) << "QPN " << y << " handed out again within its quarantine";
		mlx5_qpn_reserved_dealloc(dev, x);
	}
	mlx5_qpn_pool_cache_flush(mlx5_qpn_dev_pool(dev));
	EXPECT_EQ(remove_vdev(vdev), 0);
}

/* The lease file keeps the QPNs let go less than a quarantine ago out of the pool across a
 * remove and a new probe of the same name, as across close and probe (invariant 5). */
TEST_F(VdevHotplug, LeaseAndQuarantineHoldAcrossRemoveAndProbe)
{
	const std::string n = name("lease");
	const std::string vdev = "mlx5_qpn_" + n;
	const std::string args = ",quarantine_us=600000000";
	std::string log;
	ASSERT_EQ(probe_logged(vdev + args, &log), 0) << log;
	struct mlx5_qpn_dev *dev = mlx5_qpn_dev_lookup(n.c_str());
	ASSERT_NE(dev, nullptr);
	struct mlx5_qpn_dev_info info;
	ASSERT_EQ(mlx5_qpn_dev_info_get(dev, &info), 0);
	const uint64_t guid = info.node_guid;
	std::vector<uint32_t> qpns(64);
	for (auto &q : qpns)
		ASSERT_EQ(mlx5_qpn_reserved_alloc(dev, &q), 0);
	for (auto q : qpns)
		ASSERT_EQ(mlx5_qpn_reserved_dealloc(dev, q), 0);
	mlx5_qpn_pool_cache_flush(mlx5_qpn_dev_pool(dev));
	ASSERT_EQ(remove_vdev(vdev), 0);

	ASSERT_EQ(probe_logged(vdev + args, &log), 0) << log;
	dev = mlx5_qpn_dev_lookup(n.c_str());
	ASSERT_NE(dev, nullptr);
	ASSERT_EQ(mlx5_qpn_dev_info_get(dev, &info), 0);
	EXPECT_EQ(info.node_guid, guid) << "the same device";
	struct mlx5_qpn_dev_stats st;
	ASSERT_EQ(mlx5_qpn_dev_stats_get(dev, &st), 0);
	EXPECT_GE(st.cooling_qpns, qpns.size()) << "the QPNs let go before the remove still cool";
	/* None of them is handed out again within the quarantine. */
	std::vector<uint32_t> again;
	uint32_t q;
	for (int i = 0; i < 512 && mlx5_qpn_reserved_alloc(dev, &q) == 0; i++)
		again.push_back(q);
	for (auto x : again) {
		for (auto y : qpns)
			EXPECT_NE(x, y) << "QPN " << y << " handed out again within its quarantine";
		mlx5_qpn_reserved_dealloc(dev, x);
	}
	mlx5_qpn_pool_cache_flush(mlx5_qpn_dev_pool(dev));
	EXPECT_EQ(remove_vdev(vdev), 0);
}

/*
 * Each refusal: rte_dev_probe() fails, the driver says why in one line that names the vdev and
 * the key, and nothing is made: no device, no vdev left on the bus, no segment, no lease file.
 */
TEST_F(VdevHotplug, BadInputIsRefusedInOneLineAndLeavesNothing)
{
	const std::string n = name("bad");
	const uint64_t guid = 0x7d0e5a0000000000ull | uint64_t(getpid());
	char g[32];
	snprintf(g, sizeof(g), ",guid=0x%" PRIx64, guid);
	struct Case {
		std::string vdev, args, key;
	};
	const std::string noname = "mlx5_qpn" + std::to_string(getpid());
	const Case cases[] = {
		{"mlx5_qpn_" + n, std::string(g) + ",bogus=1", "bogus"},
		{"mlx5_qpn_" + n, std::string(g) + ",cache=12x", "cache"},
		{"mlx5_qpn_" + n, std::string(g) + ",quarantine_us=-1", "quarantine_us"},
		{"mlx5_qpn_" + n, std::string(g) + ",max_qpns=" + std::string(1100, '1'),
		 "longer than"},
		/* Names that no backend takes: the rest of the name is no device, no ib=. */
		{"mlx5_qpn_x" + n, "", "names no device"},
		{noname, "", "names no device"},
		{noname, "ib=", "ib="},
	};
	for (const auto &c : cases) {
		std::string log;
		const std::string devstr = c.vdev + (c.args.empty() ? "" : "," + c.args);
		EXPECT_NE(probe_logged(devstr, &log), 0) << devstr;
		auto lines = driver_lines(log);
		ASSERT_EQ(lines.size(), 1u) << devstr << "\n" << log;
		EXPECT_NE(lines[0].find("vdev " + c.vdev), std::string::npos) << lines[0];
		EXPECT_NE(lines[0].find(c.key), std::string::npos) << lines[0];
		EXPECT_EQ(mlx5_qpn_dev_lookup(n.c_str()), nullptr) << devstr;
		EXPECT_FALSE(probed(c.vdev)) << devstr;
		EXPECT_FALSE(shm_exists("mlx5_qpn_" + n)) << devstr;
		EXPECT_FALSE(shm_exists(lease_file(guid))) << devstr;
	}
}

/*
 * One device, one owner. A second rte_dev_probe() of a plugged vdev's name is the EAL's to
 * answer: it calls no driver (it logs "Device is already plugged" and returns 0: it then syncs
 * the secondaries), so the device keeps its devargs. A vdev whose device the application probed
 * through the driver API is refused by the driver, in one line.
 */
TEST_F(VdevHotplug, SecondVdevOfTheSameNameIsRefused)
{
	const std::string n = name("dup");
	const std::string vdev = "mlx5_qpn_" + n;
	std::string log;
	ASSERT_EQ(probe_logged(vdev + ",quarantine_us=1000", &log), 0) << log;
	struct mlx5_qpn_dev *dev = mlx5_qpn_dev_lookup(n.c_str());
	ASSERT_NE(dev, nullptr);
	probe_logged(vdev + ",quarantine_us=2000", &log);
	EXPECT_TRUE(driver_lines(log).empty()) << "the driver is not called:\n" << log;
	EXPECT_EQ(mlx5_qpn_dev_lookup(n.c_str()), dev);
	struct mlx5_qpn_dev_info info;
	ASSERT_EQ(mlx5_qpn_dev_info_get(dev, &info), 0);
	EXPECT_EQ(info.quarantine_us, 1000u) << "the first keeps its devargs";

	const std::string m = name("api");
	struct mlx5_qpn_dev *own = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(m.c_str(), &own), 0);
	EXPECT_EQ(probe_logged("mlx5_qpn_" + m, &log), -EBUSY) << log;
	auto lines = driver_lines(log);
	ASSERT_EQ(lines.size(), 1u) << log;
	EXPECT_NE(lines[0].find("vdev mlx5_qpn_" + m), std::string::npos) << lines[0];
	EXPECT_NE(lines[0].find("already probed"), std::string::npos) << lines[0];
	EXPECT_EQ(mlx5_qpn_dev_lookup(m.c_str()), own);
	mlx5_qpn_dev_close(own);
	EXPECT_EQ(remove_vdev(vdev), 0);
}

/* A hardware vdev whose ib= names no RDMA device: refused, the reason named, nothing made. */
TEST_F(VdevHotplug, HardwareVdevWithoutItsDeviceIsRefused)
{
	const std::string vdev = "mlx5_qpn" + std::to_string(getpid()) + "9";
	const std::string ib = "vdevnone" + std::to_string(getpid());
	std::string log;
	EXPECT_NE(probe_logged(vdev + ",ib=" + ib, &log), 0);
	EXPECT_NE(log.find("vdev " + vdev), std::string::npos) << log;
	EXPECT_NE(log.find(ib), std::string::npos) << log;
	EXPECT_EQ(mlx5_qpn_dev_lookup(ib.c_str()), nullptr);
	EXPECT_FALSE(probed(vdev));
}

} /* namespace */
