/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's own devargs (its `valid_arguments`, as a DPDK PMD has them): the key
 * table the generic parser reads them by, their defaults, the checks across keys, and where
 * the device "sits" (numa, cores). The ranges follow the PRM field widths and what the
 * emulated device can model; sim_validate.cpp checks the same struct again at open, for
 * callers (tests) that fill it by hand.
 */
#include "sim_internal.h"

#include <cstddef>
#include <cstdio>

#include <rte_common.h>

using namespace mlx5_qpn_sim;

namespace {

#define SIM_KEY(f, type, lo, hi)                                                                   \
	{                                                                                          \
#f, type, lo, hi, offsetof(mlx5_qpn_sim_devargs, f),                               \
			sizeof(mlx5_qpn_sim_devargs::f)                                            \
	}
#define SIM_U32(f, lo, hi) SIM_KEY(f, MLX5_QPN_DEVARG_UINT, lo, hi)

const mlx5_qpn_devarg_key kSimKeys[] = {
	{"numa", MLX5_QPN_DEVARG_UINT, 0, 1023, offsetof(mlx5_qpn_sim_devargs, numa_node), 4},
	SIM_KEY(cores, MLX5_QPN_DEVARG_CORES, 0, 0),
	SIM_KEY(guid, MLX5_QPN_DEVARG_GUID, 1, UINT64_MAX),
	SIM_U32(ports, 1, 4),
	SIM_U32(cap_reserved_qpn, 0, 1),
	SIM_U32(log_gran, 0, 24),
	SIM_U32(log_max_alloc, 0, 24),
	SIM_U32(log_max_num, 0, 24),
	SIM_U32(log_max_qp, 1, 24),
	SIM_U32(qpn_inc, 1, 255),
	SIM_U32(qos_shift, 0, 7),
	SIM_U32(rsvd_first, 0, 0xFFFFFF),
	SIM_U32(rsvd_count, 0, 1u << 24),
	SIM_U32(aip, 0, 1),
	SIM_U32(fault_nodevx, 0, 1),
	SIM_U32(fault_fw_rate, 0, 1000000),
	SIM_U32(fault_fw_after, 0, UINT32_MAX),
	SIM_U32(fault_fw_status, 0, 0xFF),
	SIM_U32(slow_cmd_us, 0, 10 * 1000 * 1000),
	SIM_U32(limit, 0, 1u << 24),
	SIM_U32(fw_first_fit, 0, 1),
	SIM_U32(dc_err_every, 0, 1000000),
};

void
sim_args_default(void *args)
{
	auto *a = static_cast<mlx5_qpn_sim_devargs *>(args);
	a->numa_node = -1;
	a->ports = 1;
	a->cap_reserved_qpn = 1;
	a->log_gran = 0;
	a->log_max_alloc = 10;
	/* 2^20 reserved QPNs in total. PRM HCA caps 2 log_max_num_reserved_qpn is 5 bits and no
	 * public source gives a ConnectX's value; 2^20 is 1/16 of the 24-bit QPN space and 4x the
	 * 2^18 QPs of log_max_qp below (as ConnectX), enough for the QPNs a 1 s timewait holds at a
	 * few hundred thousand connections a second (doc/guides/app_reference.md §3, "QPNs a
	 * connection holds"). The shared segment does not grow with it: its QPN table covers all 24
	 * bits. */
	a->log_max_num = 20;
	a->log_max_qp = 18;
	a->qpn_inc = 1;
	a->qos_shift = 0;
	/* A ConnectX's firmware command, 10 us at least. No public source states one (rdma-core,
	 * DPDK, the kernel's mlx5 command interface and their issues searched): the figure is
	 * built from the path every command takes. The DEVX ioctl enters the kernel, which writes
	 * the command and its mailboxes and rings the command doorbell; the device DMA-reads them
	 * (a PCIe round trip each, about 1 us), its firmware runs the command on the adapter's
	 * embedded cores, writes the output back and posts an EQE whose MSI-X interrupt wakes the
	 * waiting thread (several us: interrupt and scheduler). The emulator's own work for a
	 * command is about 2 us here, faster than any of that; so every command spins 10 us, a
	 * floor, never a figure below what the hardware can do. slow_cmd_us=0 gives the emulator's
	 * work alone; qpn-testpmd --allocator-sweep runs 2 to 200 us. */
	a->slow_cmd_us = 10;
}

int
sim_args_check(const void *args)
{
	const auto *a = static_cast<const mlx5_qpn_sim_devargs *>(args);
	char v[16];
	if (a->log_gran > a->log_max_alloc) {
		snprintf(v, sizeof(v), "%u", a->log_gran);
		return mlx5_qpn_devargs_refuse("log_gran", v, "larger than log_max_alloc");
	}
	if (a->rsvd_count != 0 && a->rsvd_first + uint64_t(a->rsvd_count) > (1u << 24)) {
		snprintf(v, sizeof(v), "%u", a->rsvd_count);
		return mlx5_qpn_devargs_refuse("rsvd_count", v, "range passes QPN 0xFFFFFF");
	}
	return 0;
}

/* An emulated device sits where its devargs say. */
void
sim_where(const mlx5_qpn_devargs *da, int *numa, const char **cores)
{
	*numa = mlx5_qpn_sim_cargs(da)->numa_node;
	*cores = mlx5_qpn_sim_cargs(da)->cores;
}

} // namespace

namespace mlx5_qpn_sim {

extern const mlx5_qpn_backend_desc g_backend = {
	.name = "sim",
	.flags = MLX5_QPN_BACKEND_F_EMULATED,
	.name_prefix = "sim",
	.name_key = nullptr,
	.owner = "the emulated device (simN)",
	.ops = &mlx5_qpn_sim_ops,
	.keys = kSimKeys,
	.nb_keys = RTE_DIM(kSimKeys),
	.args_default = sim_args_default,
	.args_check = sim_args_check,
	.where = sim_where,
	.purge = mlx5_qpn_sim_purge,
};

} // namespace mlx5_qpn_sim

/* The emulated device registers itself at load, as a DPDK PMD does. */
RTE_INIT(mlx5_qpn_sim_register) { mlx5_qpn_backend_register(&g_backend); }
