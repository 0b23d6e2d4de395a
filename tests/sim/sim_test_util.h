/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TEST_SIM_UTIL_H
#define QPN_TEST_SIM_UTIL_H

/* Helpers of the emulated-device tests: devargs with the documented defaults, unique device
 * names (so that parallel test processes never share a device) removed at the end. */

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

#include "mlx5_qpn.h"
#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_devargs.h"
#include "sim/mlx5_qpn_sim_devargs.h"
#include "mlx5_qpn_ops.h"
#include "sim/mlx5_qpn_sim.h"

namespace sim_test {

inline std::string
unique_name()
{
	static std::atomic<unsigned> n{0};
	return "sim_t" + std::to_string(getpid()) + "_" + std::to_string(n++);
}

/* The emulated device's own keys inside devargs. */
inline mlx5_qpn_sim_devargs &
sim_args(mlx5_qpn_devargs &da)
{
	return *mlx5_qpn_sim_args(&da);
}

inline const mlx5_qpn_sim_devargs &
sim_args(const mlx5_qpn_devargs &da)
{
	return *mlx5_qpn_sim_cargs(&da);
}

/* The defaults documented in mlx5_qpn_devargs.h and sim/mlx5_qpn_sim_devargs.h for an emulated
 * device. */
inline mlx5_qpn_devargs
default_devargs(const std::string &name)
{
	mlx5_qpn_devargs da;
	std::memset(&da, 0, sizeof(da));
	da.backend = mlx5_qpn_backend_find("sim");
	std::snprintf(da.name, sizeof(da.name), "%s", name.c_str());
	da.reserved_qpn = MLX5_QPN_RSVD_TRY;
	da.quarantine_us = 2000000;
	da.cache = 64;
	da.low_water = 128;
	da.max_qpns = 65536;
	mlx5_qpn_sim_devargs &a = sim_args(da);
	a.numa_node = -1;
	a.ports = 1;
	a.cap_reserved_qpn = 1;
	a.log_gran = 0;
	a.log_max_alloc = 10;
	a.log_max_num = 16;
	a.log_max_qp = 18;
	a.qpn_inc = 1;
	a.qos_shift = 0;
	return da;
}

/* A device name whose segment and lease file are removed when the test ends. */
struct ScopedName {
	std::string name = unique_name();
	~ScopedName() { mlx5_qpn_dev_purge(name.c_str()); }
};

} // namespace sim_test

#endif
