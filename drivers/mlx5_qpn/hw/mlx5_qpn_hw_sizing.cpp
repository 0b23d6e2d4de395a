/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hardware backend's decisions (object size, step-down, caps-2 gate, QPN source) as pure
 * functions; see mlx5_qpn_hw_sizing.h for the facts each one rests on.
 */
#include "mlx5_qpn_hw_sizing.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "mlx5_qpn_prm.h"

namespace {

/* hca_cap_2 inside the capability union of a QUERY_HCA_CAP outbox (see the header). */
constexpr mlx5_qpn_prm::field cap_hca_cap_2{MLX5_QPN_HW_CAP_HCA_CAP_2_BIT, 1};
static_assert(mlx5_qpn_prm::field_ok(cap_hca_cap_2));
constexpr mlx5_qpn_prm::field cap_max_wqe_sz_sq_dc{MLX5_QPN_HW_CAP_MAX_WQE_SZ_SQ_DC_BIT, 16};
static_assert(mlx5_qpn_prm::field_ok(cap_max_wqe_sz_sq_dc));
constexpr mlx5_qpn_prm::field cap_dct{MLX5_QPN_HW_CAP_DCT_BIT, 1};
constexpr mlx5_qpn_prm::field cap_lag_dct{MLX5_QPN_HW_CAP_LAG_DCT_BIT, 2};
constexpr mlx5_qpn_prm::field out_lag_state{MLX5_QPN_HW_QUERY_LAG_STATE_BIT, 3};
static_assert(mlx5_qpn_prm::field_ok(cap_dct) && mlx5_qpn_prm::field_ok(cap_lag_dct) &&
	      mlx5_qpn_prm::field_ok(out_lag_state));

uint8_t
min_u8(uint8_t a, uint8_t b)
{
	return a < b ? a : b;
}

} /* namespace */

extern "C" {

enum mlx5_qpn_hw_source
mlx5_qpn_hw_source_choose(enum mlx5_qpn_rsvd_policy policy, const struct mlx5_qpn_hw_probe *probe)
{
	if (probe == nullptr)
		return MLX5_QPN_HW_SRC_NONE;
	if (policy == MLX5_QPN_RSVD_NO)
		return MLX5_QPN_HW_SRC_ORDINARY;
	if (probe->verdict == MLX5_QPN_HW_OBJ_OK)
		return MLX5_QPN_HW_SRC_OBJECTS;
	return policy == MLX5_QPN_RSVD_YES ? MLX5_QPN_HW_SRC_NONE : MLX5_QPN_HW_SRC_ORDINARY;
}

const char *
mlx5_qpn_hw_source_name(enum mlx5_qpn_hw_source src)
{
	switch (src) {
	case MLX5_QPN_HW_SRC_OBJECTS:
		return "RESERVED_QPN objects";
	case MLX5_QPN_HW_SRC_ORDINARY:
		return "ordinary UD QPs";
	case MLX5_QPN_HW_SRC_NONE:
		break;
	}
	return "none";
}

int
mlx5_qpn_hw_probe_reason(const struct mlx5_qpn_hw_probe *p, char *buf, size_t len)
{
	if (p == nullptr || buf == nullptr || len == 0)
		return -EINVAL;
	const char *e = p->err != 0 ? strerror(-p->err) : "no status";
	switch (p->verdict) {
	case MLX5_QPN_HW_OBJ_OK:
		return snprintf(buf, len, "trial object of 2^%u QPNs created", p->trial_log);
	case MLX5_QPN_HW_OBJ_NOT_TRIED:
		return snprintf(buf, len, "not tried (reserved_qpn=no)");
	case MLX5_QPN_HW_OBJ_NO_DEVX:
		return snprintf(buf, len, "no DEVX context (%s)", e);
	case MLX5_QPN_HW_OBJ_CAPS_UNREADABLE:
		return snprintf(buf, len, "QUERY_HCA_CAP refused (%s)", e);
	case MLX5_QPN_HW_OBJ_NOT_ADVERTISED:
		return snprintf(buf, len, "general_obj_types bit 44 (RESERVED_QPN) clear");
	case MLX5_QPN_HW_OBJ_NO_CAPS2:
		return snprintf(buf, len, "no HCA caps 2 (cmd_hca_cap.hca_cap_2 clear)");
	case MLX5_QPN_HW_OBJ_CAPS2_UNREADABLE:
		return snprintf(buf, len, "QUERY_HCA_CAP(caps 2) refused (%s)", e);
	case MLX5_QPN_HW_OBJ_TRIAL_FAILED:
		return snprintf(buf, len, "trial object of 2^%u QPNs refused (%s)", p->trial_log,
				e);
	}
	return snprintf(buf, len, "unknown verdict %d", static_cast<int>(p->verdict));
}

namespace {

/* One cmd_hca_cap field of a QUERY_HCA_CAP(general) outbox, or -EINVAL for a NULL or short one. */
int
hca_cap_field(const void *out, size_t outlen, mlx5_qpn_prm::field f)
{
	if (out == nullptr || outlen < MLX5_QPN_PRM_HCA_CAP_OFFSET + mlx5_qpn_prm::field_end(f))
		return -EINVAL;
	const uint8_t *cap = static_cast<const uint8_t *>(out) + MLX5_QPN_PRM_HCA_CAP_OFFSET;
	return static_cast<int>(mlx5_qpn_prm::get(cap, f));
}

} // namespace

int
mlx5_qpn_hw_caps2_advertised(const void *out, size_t outlen)
{
	return hca_cap_field(out, outlen, cap_hca_cap_2);
}

int
mlx5_qpn_hw_caps_max_wqe_sz_sq_dc(const void *out, size_t outlen)
{
	return hca_cap_field(out, outlen, cap_max_wqe_sz_sq_dc);
}

int
mlx5_qpn_hw_caps_dct(const void *out, size_t outlen)
{
	return hca_cap_field(out, outlen, cap_dct);
}

int
mlx5_qpn_hw_caps_lag_dct(const void *out, size_t outlen)
{
	return hca_cap_field(out, outlen, cap_lag_dct);
}

int
mlx5_qpn_hw_lag_state(const void *out, size_t outlen)
{
	if (out == nullptr || outlen < mlx5_qpn_prm::field_end(out_lag_state))
		return -EINVAL;
	return static_cast<int>(
		mlx5_qpn_prm::get(static_cast<const uint8_t *>(out), out_lag_state));
}

uint32_t
mlx5_qpn_hw_dc_max_inline(uint32_t max_wqe, uint32_t cap)
{
	if (max_wqe == 0)
		return cap;
	/* 64 + align16(4 + inline) <= the limit in whole BBs: inline <= BBs - 68 (the bound is
	 * a multiple of 16, so the alignment adds nothing). */
	const uint32_t whole = max_wqe & ~63u;
	if (whole <= 64 + 4)
		return 0;
	const uint32_t inl = whole - 64 - 4;
	return inl < cap ? inl : cap;
}

uint8_t
mlx5_qpn_hw_log_max_num(uint8_t raw)
{
	/* 0 cannot be a real bound (the granularity is at least 2^0 QPNs): it is "not read". */
	if (raw == 0)
		return MLX5_QPN_PRM_MAX_LOG_RANGE;
	return min_u8(raw, MLX5_QPN_PRM_MAX_LOG_RANGE);
}

uint8_t
mlx5_qpn_hw_request_log(const struct mlx5_qpn_caps *caps, uint32_t devarg_log_range,
			uint32_t max_qpns, uint32_t limit)
{
	if (caps == nullptr)
		return 0;
	const uint8_t g = mlx5_qpn_prm_clamp_log_range(caps, 0);
	const uint8_t m = mlx5_qpn_prm_clamp_log_range(caps, MLX5_QPN_PRM_MAX_LOG_RANGE);
	uint8_t log = devarg_log_range == UINT32_MAX ?
			      m :
			      mlx5_qpn_prm_clamp_log_range(caps, devarg_log_range);
	uint64_t bound = max_qpns;
	if (limit != 0 && limit < bound)
		bound = limit;
	const uint64_t fw = 1ull << mlx5_qpn_hw_log_max_num(caps->log_max_num_reserved_qpn);
	if (fw < bound)
		bound = fw;
	/* As the generic layer's first grow: halve while a range would not fit the room. */
	while (log > g && (1ull << log) > bound)
		log--;
	return log < m ? log : m;
}

int
mlx5_qpn_hw_step_down(uint8_t cur, uint8_t granularity, int rc)
{
	if (rc == 0 || cur <= granularity)
		return -1;
	return rc == -EINVAL ? cur - 1 : granularity;
}

} /* extern "C" */
