/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Address handles of the DC data path: the route of every send. The backend makes the AV
 * (hardware: ibv_create_ah and mlx5dv_init_obj(MLX5DV_OBJ_AH); emulated device: built in
 * software); the DC layer keeps it, and the WQE builder copies it into each datagram segment.
 */
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include <rte_common.h>
#include <rte_log.h>

#include "mlx5_qpn_log.h"

#include "mlx5_qpn_dc.h"
#include "mlx5_qpn_ops.h"
#include "mlx5_qpn_prm_wqe.h"
#include "mlx5_qpn_ah.h"
#include "mlx5_qpn_dc_be.h"

extern int mlx5_qpn_dc_logtype;
#define DC_LOG(level, ...) MLX5_QPN_LOG(dc, level, __VA_ARGS__)

static_assert(MLX5_QPN_DC_AH_AV_SIZE == MLX5_QPN_DC_AV_SIZE, "AV size");

extern "C" {

int
mlx5_qpn_ah_create_be(struct mlx5_qpn_backend *be, const struct mlx5_qpn_dc_addr *addr,
		      struct mlx5_qpn_ah **ah)
{
	if ((be == nullptr) || (addr == nullptr) || (ah == nullptr))
		return -EINVAL;
	const mlx5_qpn_dc_ops *dc = be->ops != nullptr ? be->ops->dc : nullptr;
	if ((dc == nullptr) || (dc->ah_create == nullptr) || (dc->ah_destroy == nullptr)) {
		DC_LOG(ERR, "ah_create: not supported: the backend has no DC op for it");
		return -EOPNOTSUPP;
	}
	if (addr->sl > 15 || addr->flow_label > 0xfffff) {
		DC_LOG(ERR, "ah_create: sl %u or flow label 0x%x out of range", addr->sl,
		       addr->flow_label);
		return -EINVAL;
	}
	auto *a = new (std::nothrow) mlx5_qpn_ah();
	if (a == nullptr)
		return -ENOMEM;
	int rc = dc->ah_create(be, addr, &a->info);
	if (rc) {
		delete a;
		return rc;
	}
	a->be = be;
	a->dc = dc;
	*ah = a;
	return 0;
}

int
mlx5_qpn_ah_create(struct mlx5_qpn_dev *dev, const struct mlx5_qpn_dc_addr *addr,
		   struct mlx5_qpn_ah **ah)
{
	mlx5_qpn_backend *be = dev != nullptr ? mlx5_qpn_dev_backend(dev) : nullptr;

	return mlx5_qpn_ah_create_be(be, addr, ah);
}

void
mlx5_qpn_ah_destroy(struct mlx5_qpn_ah *ah)
{
	if (ah == nullptr)
		return;
	int rc = ah->dc->ah_destroy(ah->be, &ah->info);
	if (rc)
		DC_LOG(ERR, "AH: device refused to destroy it: %s", strerror(-rc));
	delete ah;
}

/* The 2.1 ABI's names: the same functions under second symbols (mlx5_qpn_dc.h). */
int mlx5_qpn_dc_ah_create(struct mlx5_qpn_dev *dev, const struct mlx5_qpn_dc_addr *addr,
			  struct mlx5_qpn_ah **ah) __attribute__((alias("mlx5_qpn_ah_create")));
void mlx5_qpn_dc_ah_destroy(struct mlx5_qpn_ah *ah) __attribute__((alias("mlx5_qpn_ah_destroy")));

} /* extern "C" */
