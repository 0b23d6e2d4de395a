/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_HW_DC_PATH_H
#define MLX5_QPN_HW_DC_PATH_H

/*
 * Internal to the hardware backend's DC table (mlx5_qpn_hw_dc.cpp): the local path of a DC
 * object resolved against its port (struct mlx5_qpn_dc_path, mlx5_qpn_dc.h) and the state
 * changes that carry it, shared by creation and by a DCI's recovery (mlx5_qpn_hw_dc_path.cpp).
 */

#include <infiniband/verbs.h>

#include "mlx5_qpn_dc.h"
#include "mlx5_qpn_hw_priv.h"

namespace mlx5_qpn_hw {

/** What an RTR transition of a DC object carries: its port, path MTU and address vector. */
struct dc_rtr {
	uint8_t port;
	enum ibv_mtu mtu;
	struct ibv_ah_attr ah;
};

/**
 * The RTR attributes for path (NULL: the port's default), checked as the kernel checks them.
 * what names the object in the log line. 0; -EINVAL (one line); the negated errno of
 * ibv_query_port.
 */
int dc_resolve_path(mlx5_qpn_hw_dev *dev, const struct mlx5_qpn_dc_path *path, const char *what,
		    dc_rtr *out);

/** ibv_query_port of port through the exported entry (flags included, mlx5_qpn_glue.h). 0, or
 * its negated errno with one line naming what. */
int dc_port_query(mlx5_qpn_hw_dev *dev, uint8_t port, const char *what, struct ibv_port_attr *pa);

/** One ibv_modify_qp step, its failure logged with what. 0 or a negative errno. */
int dc_modify(mlx5_qpn_hw_dev *dev, struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
	      const char *what);

/** RESET -> INIT -> RTR (-> RTS for a DCI) with rtr at RTR, the kernel's masks at each. */
int dc_to_ready(mlx5_qpn_hw_dev *dev, struct ibv_qp *qp, bool dct, const dc_rtr &rtr);

} /* namespace mlx5_qpn_hw */

#endif /* MLX5_QPN_HW_DC_PATH_H */
