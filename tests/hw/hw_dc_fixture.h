/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTS_HW_DC_FIXTURE_H
#define QPN_TESTS_HW_DC_FIXTURE_H

/*
 * A fake device (hw_fake_glue.h) opened through the hardware backend, InfiniBand or RoCE, with
 * one CQ, a DCI and a DCT made with given paths, an AH, and the device run until the DCI's
 * completions come (the fake's clock advanced between passes, so that a lost SEND's transport
 * timeout passes). Shared by test_hw_roce.cpp and test_hw_recover.cpp.
 */

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "common/mlx5_qpn_prm_wqe.h"
#include "dc/mlx5_qpn_dc_be.h"
#include "hw/mlx5_qpn_hw.h"
#include "hw/mlx5_qpn_hw_dc.h"
#include "hw_fake_glue.h"
#include "hw_test_util.h"
#include "mlx5_qpn.h"
#include "mlx5_qpn_dc.h"

namespace hwdc {

constexpr uint64_t KEY = 0x5eed0fdc0ffee000ull;

/* The route to the peer as rdma_cm would resolve it: on RoCE the IPv4-mapped RoCE v2 GID
 * (use_roce's index 3), hop limit 64; on InfiniBand a LID. */
inline mlx5_qpn_dc_addr
peer_addr(bool roce)
{
	mlx5_qpn_dc_addr a{};
	a.dlid = roce ? 0 : 0x12;
	if (!roce)
		return a;
	a.is_global = 1;
	a.sgid_index = 3;
	a.hop_limit = 64;
	static const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 10};
	for (int i = 0; i < 16; i++)
		a.dgid[i] = gid[i];
	return a;
}

struct Dev {
	hwfake::Scope scope;
	hwtest::LogCapture cap;
	mlx5_qpn_backend *be = nullptr;
	mlx5_qpn_cq *cq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	mlx5_qpn_ah *ah = nullptr;
	uint32_t dctn = 0;

	/* max_wqe_sz_sq_dc: the firmware's largest DC send WQE (0: the fake's default); host: the
	 * fake's settings made before the probe reads them (NULL: none). */
	explicit Dev(bool roce, uint16_t max_wqe_sz_sq_dc = 0,
		     void (*host)(hwfake::FakeDevice &) = nullptr)
	{
		if (roce)
			hwfake::use_roce(hwfake::fake());
		if (max_wqe_sz_sq_dc != 0)
			hwfake::fake().max_wqe_sz_sq_dc = max_wqe_sz_sq_dc;
		if (host != nullptr)
			host(hwfake::fake());
		mlx5_qpn_devargs da{};
		snprintf(da.name, sizeof(da.name), "mlx5_fake");
		da.reserved_qpn = MLX5_QPN_RSVD_NO;
		da.log_range = UINT32_MAX;
		da.max_qpns = 65536;
		EXPECT_EQ(mlx5_qpn_hw_ops.open(&da, &be), 0);
		if (be != nullptr) {
			EXPECT_EQ(mlx5_qpn_cq_create_be(be, 5, &cq), 0);
		}
	}
	/* The DCI and the DCT with their paths (NULL: the port's default) and the AH to the
	 * peer: 0, or the first failure's negative errno. */
	int make(const mlx5_qpn_dc_path *dci_path, const mlx5_qpn_dc_path *dct_path, bool roce)
	{
		if (cq == nullptr)
			return -ENODEV;
		int rc = mlx5_qpn_dct_create_cq_path(cq, KEY, dct_path, &dct);
		if (rc == 0)
			rc = mlx5_qpn_dci_create_cq_path(cq, 3, dci_path, &dci);
		mlx5_qpn_dc_addr a = peer_addr(roce);
		if (rc == 0)
			rc = mlx5_qpn_ah_create_be(be, &a, &ah);
		if (rc == 0)
			dctn = mlx5_qpn_dct_qpn(dct);
		return rc;
	}
	~Dev()
	{
		mlx5_qpn_ah_destroy(ah);
		mlx5_qpn_dct_destroy(dct);
		mlx5_qpn_dci_destroy(dci);
		mlx5_qpn_cq_destroy(cq);
		if (be != nullptr)
			mlx5_qpn_hw_ops.close(be);
		EXPECT_EQ(hwfake::live_objects(), 0);
	}

	/* Post and ring one SEND to our DCT. */
	int send(uint64_t key, uint64_t wr_id)
	{
		int rc = mlx5_qpn_dci_post_send(dci, ah, dctn, key, "dc", 2, wr_id);
		if (rc == 0)
			mlx5_qpn_dci_ring(dci);
		return rc;
	}

	/* Run the device until `want` requester completions of the DCI were polled (at most
	 * `per_poll` a poll), the fake's clock advanced 100 ms after each pass: a lost SEND's
	 * transport timeout (about 0.54 s for the DCI's timeout 14 and 7 retries) passes within
	 * a few passes. Responder completions are counted in *rx. Bounded, no wall time. */
	std::vector<mlx5_qpn_wc> run(size_t want, int *rx = nullptr, unsigned per_poll = 16)
	{
		std::vector<mlx5_qpn_wc> out;
		for (int pass = 0; pass < 40 && out.size() < want; pass++) {
			hwfake::dc_execute();
			mlx5_qpn_wc wc[16];
			int n = mlx5_qpn_cq_poll(cq, wc, per_poll < 16 ? per_poll : 16);
			for (int i = 0; i < n; i++) {
				if (wc[i].opcode == MLX5_QPN_CQE_RESP_SEND ||
				    wc[i].opcode == MLX5_QPN_CQE_RESP_ERR) {
					if (rx != nullptr)
						(*rx)++;
					continue;
				}
				out.push_back(wc[i]);
			}
			if (out.size() < want)
				hwfake::advance_us(100000);
		}
		return out;
	}
};

} // namespace hwdc

#endif /* QPN_TESTS_HW_DC_FIXTURE_H */
