/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTS_HW_FAKE_CAPS_H
#define QPN_TESTS_HW_FAKE_CAPS_H

/*
 * HCA cap fields the fake firmware reports beyond those the driver reads today, written as
 * the project writes PRM fields (common/mlx5_qpn_prm.h: bit offset from the start of
 * cmd_hca_cap, width).
 */

#include "common/mlx5_qpn_prm.h"

namespace hwfake {

/*
 * max_wqe_sz_sq_dc[0x10]: the largest DCI send WQE in bytes. The kernel's
 * include/linux/mlx5/mlx5_ifc.h and rdma-core's providers/mlx5/mlx5_ifc.h, struct
 * mlx5_ifc_cmd_hca_cap_bits: DW 0x2c0 / 32 = 22 holds max_flow_counter_31_16[0x10] then
 * max_wqe_sz_sq_dc[0x10], so the field is bits 0x2d0..0x2df.
 */
inline constexpr mlx5_qpn_prm::field cap_max_wqe_sz_sq_dc{0x2d0, 16};
static_assert(mlx5_qpn_prm::field_ok(cap_max_wqe_sz_sq_dc));

/*
 * dct[0x1] and lag_dct[0x2] (rdma-core's providers/mlx5/mlx5_ifc.h, struct
 * mlx5_ifc_cmd_hca_cap_bits: ... sho 0x217, tph 0x218, rf 0x219, dct 0x21a; reserved_at_270[0x6]
 * then lag_dct at 0x276), and QUERY_LAG (opcode 0x842): the outbox's 64-bit header, then
 * mlx5_ifc_lagc_bits, whose lag_state[0x3] follows reserved_at_0[0x1d]: bit 0x5d.
 */
inline constexpr mlx5_qpn_prm::field cap_dct{0x21a, 1};
inline constexpr mlx5_qpn_prm::field cap_lag_dct{0x276, 2};
inline constexpr uint16_t cmd_query_lag = 0x842;
inline constexpr mlx5_qpn_prm::field query_lag_state{0x5d, 3};
static_assert(mlx5_qpn_prm::field_ok(cap_dct) && mlx5_qpn_prm::field_ok(cap_lag_dct) &&
	      mlx5_qpn_prm::field_ok(query_lag_state));

} // namespace hwfake

#endif /* QPN_TESTS_HW_FAKE_CAPS_H */
