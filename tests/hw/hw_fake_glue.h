/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTS_HW_FAKE_GLUE_H
#define QPN_TESTS_HW_FAKE_GLUE_H

/*
 * A fake rdma-core for the hardware backend: a glue table whose entry points answer like one
 * mlx5 device ("mlx5_fake") with configurable caps and firmware behaviour, and count every
 * call, so that the backend's calls "happen" on a machine without a ConnectX. The firmware
 * part speaks the project's PRM layouts (the same ones test_hw_fidelity.cpp checks against
 * rdma-core's definitions). Install with FakeGlue::Scope; one at a time.
 */

#include <stdint.h>

#include <string>
#include <vector>

#include "hw/mlx5_qpn_glue.h"

namespace hwfake {

/** What the fake device is and does; counters of what it was asked. */
struct FakeDevice {
	/* Configuration. */
	bool devx = true;      /* mlx5dv_open_device(DEVX) succeeds */
	bool caps_ok = true;   /* QUERY_HCA_CAP(general) succeeds */
	bool bit44 = true;     /* general_obj_types advertises RESERVED_QPN */
	bool hca_cap_2 = true; /* cmd_hca_cap.hca_cap_2 */
	uint8_t gran = 7, max_alloc = 10, max_num = 0;
	uint8_t fw_max_log = 24;   /* larger log_obj_range: BAD_PARAM_ERR */
	uint8_t create_status = 0; /* non-zero: every object creation fails with it */
	uint64_t guid = 0x0002c90300fa4e00ull;
	uint8_t ports = 1;              /* phys_port_cnt */
	std::vector<int> ports_queried; /* ibv_query_port's port numbers */

	/* What happened. */
	int caps_queries = 0, caps2_queries = 0;
	std::vector<uint8_t> create_logs; /* log_obj_range of every creation attempt */
	int objs_live = 0, objs_destroyed = 0;
	int single_calls = 0;
	int uars_live = 0, uars_freed = 0;
	int pds_live = 0, cqs_live = 0, qps_live = 0, qps_destroyed = 0;
	std::vector<int> cq_depths;
	int bad_qp_attrs = 0; /* create_qp calls not UD on one CQ */
	int contexts_open = 0, closes = 0;
	uint32_t next_qpn = 0x2a0, next_obj = 0;

	/* The DC data path (mlx5dv_create_qp, ibv_modify_qp, SRQs, AHs, mlx5dv_init_obj). */
	struct DvQp {
		uint32_t qp_type, comp_mask, max_send_wr, max_inline, max_send_sge;
		uint64_t dv_comp_mask;
		uint32_t dc_type;
		uint64_t key;
		bool srq, one_cq;
	};
	struct Modify {
		uint32_t qpn; /* qp_num at the call (a DCT's is 0 until RTR) */
		int state, mask, port, mtu, min_rnr;
		struct ibv_qp_attr attr; /* the whole call */
	};
	std::vector<DvQp> dv_qps;
	std::vector<Modify> modifies;
	std::vector<struct ibv_ah_attr> ah_attrs;
	int srqs_live = 0, ahs_live = 0, init_objs = 0;
	int srq_max_wr = 0;
	uint32_t bf_size = 256;     /* mlx5dv_qp.bf.size handed out (0: NC doorbell) */
	int dv_create_qp_errno = 0; /* non-zero: mlx5dv_create_qp fails with it */
	int mrs_live = 0, mrs_made = 0, mr_access = 0;

	/* The device executing DC sends (dc_execute()). */
	bool scatter32 = false; /* payloads of <= 32 bytes go into the CQE (inline scatter) */
	uint8_t resp_err = 0;   /* non-zero: the next receive completes in error, this syndrome */
	int executed = 0, rnr = 0;
};

/** The doorbell pages of a fake DCI (what mlx5dv_init_obj(QP) hands out), by its QP number. */
struct DciPages {
	uint8_t *sq;      /* the SQ ring */
	uint32_t *dbrec;  /* its own page */
	uint64_t *reg;    /* the UAR register, in its own page */
	void *dbrec_page; /* page-aligned */
	void *reg_page;
};
bool dci_pages(uint32_t qpn, DciPages *p);

/** The ring and doorbell record of the last CQ the fake created (64-byte CQEs). */
uint8_t *last_cq_ring();
uint32_t *last_cq_dbrec();

/** The AV the fake's ibv_create_ah built (rdma-core's layout) for the AH of the last call. */
const struct mlx5_wqe_av &last_av();

/**
 * Run fn with the doorbell record and UAR pages of a DCI write-protected and return the order
 * in which they were first written ('D' record, 'U' register), by trapping the write faults:
 * the DC layer's code runs unchanged, nothing is added to its fast path.
 */
std::string doorbell_order_fn(const DciPages &p, void (*fn)(void *), void *arg);

template <typename Fn>
std::string
doorbell_order(const DciPages &p, Fn fn)
{
	return doorbell_order_fn(
		p, [](void *a) { (*static_cast<Fn *>(a))(); }, &fn);
}

/**
 * The device's execution step for every fake DCI: each rung SEND WQE goes to its DCT (by
 * number, DC key checked) through the DCT's SRQ as an mlx5 device does it (the next posted WQE
 * along the list, its data segment's lkey and buffer checked against a live MR), a responder
 * CQE on the DCT's CQ (wqe_counter = SRQ WQE index, byte_cnt, source QPN) and a requester CQE
 * on the DCI's. A SEND that finds no posted receive stays (RNR: counted, retried next call).
 * @return WQEs executed.
 */
int dc_execute();

/** The SRQ doorbell record of the DCT numbered dctn (posted count), or -1. */
int srq_posted(uint32_t dctn);

/** The fake's state (one per process; reset by Scope). */
FakeDevice &fake();

/** The fake table. */
const struct mlx5_qpn_glue *fake_glue();

/** Installs the fake as the process's glue for its lifetime, from a fresh FakeDevice. */
class Scope {
public:
	Scope();
	~Scope();
	Scope(const Scope &) = delete;
	Scope &operator=(const Scope &) = delete;
};

/** Every verbs/DEVX object the fake handed out and nobody destroyed yet. */
int live_objects();

} // namespace hwfake

#endif /* QPN_TESTS_HW_FAKE_GLUE_H */
