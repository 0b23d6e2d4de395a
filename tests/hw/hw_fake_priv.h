/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTS_HW_FAKE_PRIV_H
#define QPN_TESTS_HW_FAKE_PRIV_H

/*
 * Inside the fake rdma-core (hw_fake_glue.h): its verbs objects, shared by hw_fake_glue.cpp
 * (the glue table) and hw_fake_dc.cpp (the device executing DC sends). Each object is a heap
 * struct with the ibv struct first, so its pointer is the object's.
 */

#include <stdint.h>

#include <map>
#include <vector>

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

namespace hwfake {
namespace priv {

struct FakeCq {
	ibv_cq cq;
	std::vector<uint8_t> ring;
	alignas(64) uint32_t dbrec[2];
	uint32_t pi = 0; /* CQEs the device wrote */
};

/* An SRQ as libmlx5 makes one: a linked list of max_wr + 1 WQEs (rounded up to a power of
 * two) of 32 bytes, WQE i leading to i + 1, head 0, tail the last; the device takes posted WQEs
 * from hw_head along the list, up to the doorbell record's count. */
struct FakeSrq {
	ibv_srq srq;
	std::vector<uint8_t> wqes;
	alignas(64) uint32_t dbrec[2];
	uint32_t n = 0;
	uint16_t hw_head = 0;
	uint16_t hw_taken = 0; /* WQEs consumed (compared with the record's count) */
};

struct FakeMr {
	ibv_mr mr;
};

struct FakeQp {
	ibv_qp qp;
	bool dc, dct;
	std::vector<uint8_t> sq;
	void *dbrec_page, *reg_page; /* DCI: one page each, so a write to either can be trapped */
	FakeCq *cq = nullptr;        /* send and receive CQ (the DC layer uses one) */
	FakeSrq *srq = nullptr;      /* DCT */
	uint64_t key = 0;            /* DCT: its DC access key */
	uint32_t sq_ci = 0;          /* DCI: BBs the device executed */
};

struct FakeAh {
	ibv_ah ah;
	mlx5_wqe_av av;
};

/* DCIs by QP number, DCTs by DCT number (from RTR), MRs by lkey. */
extern std::map<uint32_t, FakeQp *> g_dcis, g_dcts;
extern std::map<uint32_t, FakeMr *> g_mrs;

} // namespace priv
} // namespace hwfake

#endif /* QPN_TESTS_HW_FAKE_PRIV_H */
