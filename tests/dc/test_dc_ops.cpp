/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The DC layer reaches a device through its backend's ops table alone (mlx5_qpn_dev_ops::dc):
 * a handle leads to its table, the emulated device's table carries its DC part, the hardware
 * backend's has none yet, and a table without a DC part, or without one of its ops, makes every
 * DC call -EOPNOTSUPP (checked on fake backends, so no device and no hardware are needed).
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/mlx5_qpn_prm_wqe.h"
#include "dc/mlx5_qpn_dc_be.h"
#include "hw/mlx5_qpn_hw_dc.h"
#include "hw/mlx5_qpn_hw.h"
#include "mlx5_qpn.h"
#include "mlx5_qpn_dc.h"
#include "mlx5_qpn_dc_ops.h"
#include "mlx5_qpn_dev_internal.h"
#include "mlx5_qpn_ops.h"
#include "sim/mlx5_qpn_sim.h"
#include "sim/sim_test_util.h"

namespace {

/* A backend handle as a backend lays it out: the common base first. */
struct FakeBackend {
	mlx5_qpn_backend base;
	int cq_creates = 0;
	int cq_destroys = 0;
};

/* A device with CQs but no DCI, DCT or execution step: every CQE invalid, never written. */
alignas(64) uint8_t g_ring[MLX5_QPN_CQE_SIZE << 2];
uint32_t g_dbrec[2];

int
fake_cq_create(mlx5_qpn_backend *be, uint32_t log_depth, mlx5_qpn_dc_cq_info *cq)
{
	if (log_depth > 2)
		return -EINVAL;
	reinterpret_cast<FakeBackend *>(be)->cq_creates++;
	memset(g_ring, MLX5_QPN_CQE_OPCODE_INVALID << 4, sizeof(g_ring));
	memset(cq, 0, sizeof(*cq));
	cq->ring = g_ring;
	cq->dbrec = g_dbrec;
	cq->log_depth = log_depth;
	cq->cqn = 7;
	return 0;
}

int
fake_cq_destroy(mlx5_qpn_backend *be, const mlx5_qpn_dc_cq_info *)
{
	reinterpret_cast<FakeBackend *>(be)->cq_destroys++;
	return 0;
}

const mlx5_qpn_dc_ops cq_only_dc = {
	.cq_create = fake_cq_create,
	.cq_destroy = fake_cq_destroy,
};

const mlx5_qpn_dev_ops no_dc_ops = {};
const mlx5_qpn_dev_ops cq_only_ops = {.dc = &cq_only_dc};

} // namespace

TEST(DcOps, TablesAreWired)
{
	EXPECT_EQ(mlx5_qpn_sim_ops.dc, &mlx5_qpn_sim_dc_ops);
	/* The hardware backend has its DC part (rdma-core objects, no execute step). */
	EXPECT_EQ(mlx5_qpn_hw_ops.dc, &mlx5_qpn_hw_dc_ops);
	const mlx5_qpn_dc_ops &h = mlx5_qpn_hw_dc_ops;
	EXPECT_TRUE(h.cq_create && h.cq_destroy && h.dci_create && h.dci_destroy && h.dct_create &&
		    h.dct_destroy && h.ah_create && h.ah_destroy);
	EXPECT_TRUE(h.execute == nullptr && h.poll == nullptr);
	EXPECT_TRUE(mlx5_qpn_sim_dc_ops.ah_create && mlx5_qpn_sim_dc_ops.ah_destroy);
	const mlx5_qpn_dc_ops &d = mlx5_qpn_sim_dc_ops;
	EXPECT_TRUE(d.cq_create && d.cq_destroy && d.dci_create && d.dci_destroy && d.dct_create &&
		    d.dct_destroy && d.execute && d.poll);
}

/* A handle, opened through the generic layer or directly, leads to its backend's table. */
TEST(DcOps, HandleLeadsToItsTable)
{
	sim_test::ScopedName n;
	mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe((n.name + ",quarantine_us=0").c_str(), &dev), 0);
	mlx5_qpn_backend *be = mlx5_qpn_dev_backend(dev);
	ASSERT_NE(be, nullptr);
	EXPECT_EQ(be->ops, &mlx5_qpn_sim_ops);

	auto da = sim_test::default_devargs(n.name);
	mlx5_qpn_backend *be2 = nullptr;
	ASSERT_EQ(mlx5_qpn_sim_ops.open(&da, &be2), 0);
	EXPECT_EQ(be2->ops, &mlx5_qpn_sim_ops);
	mlx5_qpn_cq *cq = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create_be(be2, 2, &cq), 0);
	mlx5_qpn_cq_destroy(cq);
	mlx5_qpn_sim_ops.close(be2);
	mlx5_qpn_dev_close(dev);
}

TEST(DcOps, BackendWithoutDcOpsIsEopnotsupp)
{
	FakeBackend fb{{&no_dc_ops}};
	mlx5_qpn_cq *cq = nullptr;
	EXPECT_EQ(mlx5_qpn_cq_create_be(&fb.base, 2, &cq), -EOPNOTSUPP);
	EXPECT_EQ(cq, nullptr);
	/* Refused before its arguments are looked at: a log_depth out of range too. */
	EXPECT_EQ(mlx5_qpn_cq_create_be(&fb.base, 99, &cq), -EOPNOTSUPP);
	EXPECT_EQ(mlx5_qpn_dc_service_run_be(&fb.base), -EOPNOTSUPP);

	/* A handle that names no table at all is the same. */
	FakeBackend bare{{nullptr}};
	EXPECT_EQ(mlx5_qpn_cq_create_be(&bare.base, 2, &cq), -EOPNOTSUPP);
	EXPECT_EQ(mlx5_qpn_dc_service_run_be(&bare.base), -EOPNOTSUPP);

	EXPECT_EQ(mlx5_qpn_cq_create_be(nullptr, 2, &cq), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dc_service_run_be(nullptr), -EINVAL);
}

/* A DC part with some ops missing: what it has works, the rest is -EOPNOTSUPP. */
TEST(DcOps, MissingDcOpIsEopnotsupp)
{
	FakeBackend fb{{&cq_only_ops}};
	mlx5_qpn_cq *cq = nullptr;
	EXPECT_EQ(mlx5_qpn_cq_create_be(&fb.base, 3, &cq), -EINVAL); /* the backend's answer */
	ASSERT_EQ(mlx5_qpn_cq_create_be(&fb.base, 2, &cq), 0);
	EXPECT_EQ(fb.cq_creates, 1);
	mlx5_qpn_wc wc[4];
	EXPECT_EQ(mlx5_qpn_cq_poll(cq, wc, 4), 0);

	mlx5_qpn_dci *dci = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	EXPECT_EQ(mlx5_qpn_dci_create_cq(cq, 2, &dci), -EOPNOTSUPP);
	EXPECT_EQ(mlx5_qpn_dct_create_cq(cq, 1, &dct), -EOPNOTSUPP);
	EXPECT_EQ(dci, nullptr);
	EXPECT_EQ(dct, nullptr);
	/* A table without an execute op: a device that progresses by itself, nothing to run. */
	EXPECT_EQ(mlx5_qpn_dc_service_run_be(&fb.base), 0);

	mlx5_qpn_cq_destroy(cq);
	EXPECT_EQ(fb.cq_destroys, 1);
}

/* The emulated device's AH: its own AV, optional on a post, and never another device's. */
TEST(DcOps, EmulatedAhRoutesAndIsCheckedAgainstTheDevice)
{
	sim_test::ScopedName n;
	mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe((n.name + ",quarantine_us=0").c_str(), &dev), 0);
	mlx5_qpn_dev_info info{};
	ASSERT_EQ(mlx5_qpn_dev_info_get(dev, &info), 0);
	EXPECT_EQ(info.port, 1); /* the emulated device's handle serves its first port */
	mlx5_qpn_cq *cq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create(dev, 4, &cq), 0);
	ASSERT_EQ(mlx5_qpn_dct_create(dev, cq, 5, &dct), 0);
	ASSERT_EQ(mlx5_qpn_dci_create(dev, cq, 2, &dci), 0);
	mlx5_qpn_dc_addr addr{};
	addr.dlid = 7;
	mlx5_qpn_ah *ah = nullptr;
	addr.sl = 16;
	EXPECT_EQ(mlx5_qpn_ah_create(dev, &addr, &ah), -EINVAL);
	addr.sl = 1;
	addr.flow_label = 1u << 20;
	EXPECT_EQ(mlx5_qpn_ah_create(dev, &addr, &ah), -EINVAL);
	addr.flow_label = 0;
	EXPECT_EQ(mlx5_qpn_ah_create(nullptr, &addr, &ah), -EINVAL);
	ASSERT_EQ(mlx5_qpn_ah_create(dev, &addr, &ah), 0);

	const uint32_t dctn = mlx5_qpn_dct_qpn(dct);
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci, ah, dctn, 5, "ah", 2, 11), 0);
	/* No AH: refused, as on hardware (tests/hw: HwDc.AhIsRdmaCoresAndItsAvGoesIntoTheWqe). */
	EXPECT_EQ(mlx5_qpn_dci_post_send(dci, nullptr, dctn, 5, "no", 2, 12), -EINVAL);
	mlx5_qpn_dci_ring(dci);
	EXPECT_EQ(mlx5_qpn_dev_service_run(dev), 1);
	mlx5_qpn_wc wc[8];
	int got = mlx5_qpn_cq_poll(cq, wc, 8);
	ASSERT_EQ(got, 2); /* one send: a requester and a responder completion */
	for (int i = 0; i < got; i++)
		EXPECT_EQ(wc[i].syndrome, 0);

	/* An AH of another handle of the same emulated device is not this DCI's. */
	auto da = sim_test::default_devargs(n.name);
	mlx5_qpn_backend *be2 = nullptr;
	ASSERT_EQ(mlx5_qpn_sim_ops.open(&da, &be2), 0);
	mlx5_qpn_ah *ah2 = nullptr;
	ASSERT_EQ(mlx5_qpn_ah_create_be(be2, &addr, &ah2), 0);
	EXPECT_EQ(mlx5_qpn_dci_post_send(dci, ah2, dctn, 5, "x", 1, 13), -EINVAL);
	mlx5_qpn_ah_destroy(ah2);
	mlx5_qpn_sim_ops.close(be2);

	/* A backend without AH ops. */
	FakeBackend fb{{&cq_only_ops}};
	EXPECT_EQ(mlx5_qpn_ah_create_be(&fb.base, &addr, &ah2), -EOPNOTSUPP);

	mlx5_qpn_ah_destroy(ah);
	mlx5_qpn_ah_destroy(nullptr);
	mlx5_qpn_dci_destroy(dci);
	mlx5_qpn_dct_destroy(dct);
	mlx5_qpn_cq_destroy(cq);
	mlx5_qpn_dev_close(dev);
}

/* The 2.1 ABI's names of the AH calls, of the DCT's QPN and of the AH's struct tag stay usable
 * for one ABI: each call is the same function as its successor, and an AH made through the old
 * names routes a send as one made through the new names does. */
TEST(DcOps, DeprecatedNamesAreTheSameFunctions)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	EXPECT_EQ(&mlx5_qpn_dc_ah_create, &mlx5_qpn_ah_create);
	EXPECT_EQ(&mlx5_qpn_dc_ah_destroy, &mlx5_qpn_ah_destroy);
	EXPECT_EQ(&mlx5_qpn_dct_number, &mlx5_qpn_dct_qpn);
	sim_test::ScopedName n;
	mlx5_qpn_dev *dev = nullptr;
	ASSERT_EQ(mlx5_qpn_dev_probe((n.name + ",quarantine_us=0").c_str(), &dev), 0);
	mlx5_qpn_cq *cq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create(dev, 4, &cq), 0);
	ASSERT_EQ(mlx5_qpn_dct_create(dev, cq, 5, &dct), 0);
	ASSERT_EQ(mlx5_qpn_dci_create(dev, cq, 2, &dci), 0);
	EXPECT_EQ(mlx5_qpn_dct_number(dct), mlx5_qpn_dct_qpn(dct));
	EXPECT_NE(mlx5_qpn_dct_number(dct), 0u);
	mlx5_qpn_dc_addr addr{};
	addr.dlid = 7;
	struct mlx5_qpn_dc_ah *ah = nullptr; /* the old tag names the same type */
	addr.sl = 16;
	EXPECT_EQ(mlx5_qpn_dc_ah_create(dev, &addr, &ah), -EINVAL);
	addr.sl = 1;
	ASSERT_EQ(mlx5_qpn_dc_ah_create(dev, &addr, &ah), 0);
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci, ah, mlx5_qpn_dct_number(dct), 5, "old", 3, 1), 0);
	mlx5_qpn_dci_ring(dci);
	mlx5_qpn_wc wc[4];
	int got = 0;
	for (int i = 0; i < 100 && got < 2; i++)
		got += std::max(0, mlx5_qpn_cq_poll(cq, wc + got, 4 - got));
	ASSERT_EQ(got, 2); /* the requester and the responder completion */
	EXPECT_EQ(wc[0].syndrome, 0);
	EXPECT_EQ(wc[1].syndrome, 0);
	mlx5_qpn_dc_ah_destroy(ah);
	mlx5_qpn_dc_ah_destroy(nullptr);
#pragma GCC diagnostic pop
	mlx5_qpn_dci_destroy(dci);
	mlx5_qpn_dct_destroy(dct);
	mlx5_qpn_cq_destroy(cq);
	mlx5_qpn_dev_close(dev);
}
