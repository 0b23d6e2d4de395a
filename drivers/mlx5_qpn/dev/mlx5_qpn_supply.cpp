/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The three QPN supplies (struct mlx5_qpn_supply_ops): where the QPNs that feed a device's pool
 * come from. Probe picks one, proving it by a trial reservation (mlx5_qpn_probe.cpp); growing,
 * shrinking and closing then call through it without asking which one it is.
 *  - RESERVED_QPN objects: aligned ranges of 2^g QPNs, one DEVX general object each;
 *  - single QPNs: rdma-core's mlx5dv_reserved_qpn_alloc(), one QPN per call;
 *  - ordinary QPs: one QP per QPN, as UCX falls back to (the QPN is unique while the QP lives).
 * A NULL backend op is -EOPNOTSUPP, as the ops table's rule says.
 */
#include <cerrno>

#include "mlx5_qpn_dev_priv.h"

namespace {

int
objects_reserve(const mlx5_qpn_dev_ops *ops, mlx5_qpn_backend *be, uint32_t log,
		mlx5_qpn_range_obj *o)
{
	return ops->range_reserve != nullptr ? ops->range_reserve(be, log, o) : -EOPNOTSUPP;
}

int
objects_release(const mlx5_qpn_dev_ops *ops, mlx5_qpn_backend *be, const mlx5_qpn_range_obj *o)
{
	return ops->range_release != nullptr ? ops->range_release(be, o) : -EOPNOTSUPP;
}

/* A one-QPN object, as the singles and ordinary QPs give them. */
void
one_qpn(mlx5_qpn_range_obj *o, uint32_t qpn)
{
	*o = {qpn, 0, 1, 0, 0};
}

int
single_reserve(const mlx5_qpn_dev_ops *ops, mlx5_qpn_backend *be, uint32_t, mlx5_qpn_range_obj *o)
{
	uint32_t q;
	int rc = ops->qpn_reserve_one != nullptr ? ops->qpn_reserve_one(be, &q) : -EOPNOTSUPP;
	if (rc == 0)
		one_qpn(o, q);
	return rc;
}

int
single_release(const mlx5_qpn_dev_ops *ops, mlx5_qpn_backend *be, const mlx5_qpn_range_obj *o)
{
	return ops->qpn_release_one != nullptr ? ops->qpn_release_one(be, o->first_qpn) :
						 -EOPNOTSUPP;
}

int
ordinary_reserve(const mlx5_qpn_dev_ops *ops, mlx5_qpn_backend *be, uint32_t, mlx5_qpn_range_obj *o)
{
	uint32_t q;
	int rc = ops->qp_create != nullptr ? ops->qp_create(be, &q) : -EOPNOTSUPP;
	if (rc == 0)
		one_qpn(o, q);
	return rc;
}

int
ordinary_release(const mlx5_qpn_dev_ops *ops, mlx5_qpn_backend *be, const mlx5_qpn_range_obj *o)
{
	return ops->qp_destroy != nullptr ? ops->qp_destroy(be, o->first_qpn) : -EOPNOTSUPP;
}

const mlx5_qpn_supply_ops kObjects = {
	.name = "RESERVED_QPN objects",
	.source = MLX5_QPN_SRC_OBJECTS,
	.ranges = 1,
	.reserve = objects_reserve,
	.release = objects_release,
};

const mlx5_qpn_supply_ops kSingle = {
	.name = "mlx5dv_reserved_qpn_alloc",
	.source = MLX5_QPN_SRC_SINGLE,
	.ranges = 0,
	.reserve = single_reserve,
	.release = single_release,
};

const mlx5_qpn_supply_ops kOrdinary = {
	.name = "ordinary QPs",
	.source = MLX5_QPN_SRC_ORDINARY,
	.ranges = 0,
	.reserve = ordinary_reserve,
	.release = ordinary_release,
};

} /* namespace */

const struct mlx5_qpn_supply_ops *
mlx5_qpn_supply_of(enum mlx5_qpn_source source)
{
	switch (source) {
	case MLX5_QPN_SRC_OBJECTS:
		return &kObjects;
	case MLX5_QPN_SRC_SINGLE:
		return &kSingle;
	case MLX5_QPN_SRC_ORDINARY:
		return &kOrdinary;
	}
	return nullptr;
}
