/* SPDX-License-Identifier: BSD-3-Clause */
/* Telemetry: the /mlx5_qpn/ commands answered over DPDK's telemetry socket, as a user queries them. */
#include <gtest/gtest.h>

#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <rte_eal.h>

#include "mlx5_qpn.h"

namespace {

/* One request on a fresh connection (the socket greets each client with a JSON banner first). */
std::string
telemetry(const std::string &cmd)
{
	std::string path = std::string(rte_eal_get_runtime_dir()) + "/dpdk_telemetry.v2";
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (fd < 0)
		return "";
	struct sockaddr_un sun = {};
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path.c_str());
	std::string out;
	char buf[16384];
	if (connect(fd, reinterpret_cast<struct sockaddr *>(&sun), sizeof(sun)) == 0 &&
	    read(fd, buf, sizeof(buf)) > 0 &&
	    write(fd, cmd.c_str(), cmd.size()) == static_cast<ssize_t>(cmd.size())) {
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		if (n > 0)
			out.assign(buf, static_cast<size_t>(n));
	}
	close(fd);
	return out;
}

} // namespace

TEST(DevTelemetry, PoolAndDeviceCommands)
{
	std::string name = "simtel" + std::to_string(getpid());
	struct mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe(
			  (name + ",quarantine_us=0,log_max_alloc=4,max_qpns=32").c_str(), &dev),
		  0);
	uint32_t q[3];
	ASSERT_EQ(mlx5_qpn_reserved_alloc_bulk(dev, q, 3), 0);

	std::string list = telemetry("/mlx5_qpn/dev/list");
	if (list.empty()) {
		mlx5_qpn_dev_close(dev);
		mlx5_qpn_dev_purge(name.c_str());
		GTEST_SKIP() << "no telemetry socket in this EAL configuration";
	}
	EXPECT_NE(list.find(name), std::string::npos) << list;
	std::string info = telemetry("/mlx5_qpn/dev/info," + name);
	EXPECT_NE(info.find("\"backend\":\"sim\""), std::string::npos) << info;
	EXPECT_NE(info.find("\"emulated\":1"), std::string::npos) << info;
	EXPECT_NE(info.find("\"source\":\"objects\""), std::string::npos) << info;
	std::string st = telemetry("/mlx5_qpn/dev/stats," + name);
	EXPECT_NE(st.find("\"in_use\":3"), std::string::npos) << st;
	/* The driver's own counters sit beside the pool's: back-off, cooling, lease, multi-process. */
	for (const char *k : {"\"backoff_skips\":0", "\"cooling_qpns\":0", "\"cooled_ranges\":0",
			      "\"lease_errors\":0", "\"mp_grow_requests\":0", "\"mp_ipc_grows\":0",
			      "\"mp_dead_reclaimed\":0"})
		EXPECT_NE(st.find(k), std::string::npos) << k << " in " << st;
	std::string pools = telemetry("/mlx5_qpn/pool/list");
	EXPECT_NE(pools.find("qpn_" + name), std::string::npos) << pools;
	std::string ps = telemetry("/mlx5_qpn/pool/stats,qpn_" + name);
	EXPECT_NE(ps.find("\"allocs\":3"), std::string::npos) << ps;
	/* Unknown names are errors, not crashes. */
	std::string bad = telemetry("/mlx5_qpn/dev/stats,nosuchdev");
	EXPECT_EQ(bad.find("\"in_use\""), std::string::npos) << bad;

	mlx5_qpn_reserved_dealloc_bulk(dev, q, 3);
	mlx5_qpn_dev_close(dev);
	mlx5_qpn_dev_purge(name.c_str());
}
