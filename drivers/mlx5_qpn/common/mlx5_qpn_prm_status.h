/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_PRM_STATUS_H
#define MLX5_QPN_PRM_STATUS_H

/**
 * @file
 * Internal: mlx5 command interface status codes (PRM "Command Interface Status") and the errno
 * each maps to, as the kernel's mlx5_core and rdma-core report them to users. Shared by the
 * hardware backend (decoding DEVX outboxes) and the emulated device (faking them).
 */

#include <cerrno>
#include <cstdint>

#ifdef __cplusplus
extern "C" {
#endif

enum mlx5_qpn_cmd_status {
	MLX5_QPN_CMD_STAT_OK = 0x0,
	MLX5_QPN_CMD_STAT_INT_ERR = 0x1,
	MLX5_QPN_CMD_STAT_BAD_OP_ERR = 0x2,
	MLX5_QPN_CMD_STAT_BAD_PARAM_ERR = 0x3,
	MLX5_QPN_CMD_STAT_BAD_SYS_STATE_ERR = 0x4,
	MLX5_QPN_CMD_STAT_BAD_RES_ERR = 0x5,
	MLX5_QPN_CMD_STAT_RES_BUSY = 0x6,
	MLX5_QPN_CMD_STAT_NOT_READY = 0x7,
	MLX5_QPN_CMD_STAT_LIM_ERR = 0x8,
	MLX5_QPN_CMD_STAT_BAD_RES_STATE_ERR = 0x9,
	MLX5_QPN_CMD_STAT_IX_ERR = 0xa,
	MLX5_QPN_CMD_STAT_NO_RES_ERR = 0xf,
	MLX5_QPN_CMD_STAT_BAD_QP_STATE_ERR = 0x10,
	MLX5_QPN_CMD_STAT_BAD_PKT_ERR = 0x30,
	MLX5_QPN_CMD_STAT_BAD_SIZE_OUTS_CQES_ERR = 0x40,
	MLX5_QPN_CMD_STAT_BAD_INP_LEN_ERR = 0x50,
	MLX5_QPN_CMD_STAT_BAD_OUTP_LEN_ERR = 0x51,
};

/**
 * Positive errno for a command status (0 for OK). The table is the kernel's cmd_status_to_err()
 * (drivers/net/ethernet/mellanox/mlx5/core/cmd.c) and rdma-core's mlx5_cmd_status_to_err()
 * (providers/mlx5/mlx5.c, applied by mlx5_get_cmd_status_err() when a DEVX call fails with
 * EREMOTEIO); both give EINVAL for a bad index (0x0A), not ENOMEM: an index the firmware
 * rejects is a caller error, not exhaustion. NOT_READY (0x07) is the kernel's (added in 2024:
 * EAGAIN, the firmware is transiently not ready); rdma-core's table has no entry for it yet
 * and would give its default, EIO.
 */
static inline int
mlx5_qpn_cmd_status_to_errno(uint8_t status)
{
	switch (status) {
	case MLX5_QPN_CMD_STAT_OK:
		return 0;
	case MLX5_QPN_CMD_STAT_INT_ERR:
		return EIO;
	case MLX5_QPN_CMD_STAT_BAD_OP_ERR:
		return EINVAL;
	case MLX5_QPN_CMD_STAT_BAD_PARAM_ERR:
		return EINVAL;
	case MLX5_QPN_CMD_STAT_BAD_SYS_STATE_ERR:
		return EIO;
	case MLX5_QPN_CMD_STAT_BAD_RES_ERR:
		return EINVAL;
	case MLX5_QPN_CMD_STAT_RES_BUSY:
		return EBUSY;
	case MLX5_QPN_CMD_STAT_NOT_READY:
		return EAGAIN;
	case MLX5_QPN_CMD_STAT_LIM_ERR:
		return ENOMEM;
	case MLX5_QPN_CMD_STAT_BAD_RES_STATE_ERR:
		return EINVAL;
	case MLX5_QPN_CMD_STAT_IX_ERR:
		return EINVAL;
	case MLX5_QPN_CMD_STAT_NO_RES_ERR:
		return EAGAIN;
	case MLX5_QPN_CMD_STAT_BAD_QP_STATE_ERR:
		return EINVAL;
	case MLX5_QPN_CMD_STAT_BAD_PKT_ERR:
		return EINVAL;
	case MLX5_QPN_CMD_STAT_BAD_SIZE_OUTS_CQES_ERR:
		return EINVAL;
	case MLX5_QPN_CMD_STAT_BAD_INP_LEN_ERR:
		return EIO;
	case MLX5_QPN_CMD_STAT_BAD_OUTP_LEN_ERR:
		return EIO;
	default:
		return EIO;
	}
}

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_PRM_STATUS_H */
