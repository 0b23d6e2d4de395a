/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTS_HW_FAKE_GLUE_H
#define QPN_TESTS_HW_FAKE_GLUE_H

/*
 * A fake rdma-core for the hardware backend: a glue table whose entry points answer like one
 * mlx5 device ("mlx5_fake") with configurable caps and firmware behaviour, and count every
 * call, so that the backend's calls "happen" on a machine without a ConnectX. The firmware
 * part speaks the project's PRM layouts (the same ones test_hw_fidelity.cpp checks against
 * rdma-core's definitions). Install with hwfake::Scope; one at a time.
 *
 * The fake is strict: it refuses what the device, its kernel driver and libmlx5 refuse, with
 * their errno (test_hw_fake_rules.cpp shows each rule):
 *  - ibv_modify_qp: the state machine and masks of the kernel (DCI, DCT, UD), the port, the
 *    path MTU, the AV (EINVAL; rdma-core returns the positive errno); refused calls change
 *    nothing and are recorded with their rc;
 *  - RoCE ports (use_roce()): a GID table with types, _ibv_query_gid_ex (EINVAL out of the
 *    table, ENODATA for an empty entry), AHs and QP AVs that need a GRH and a GID of the table;
 *  - execution (dc_execute()): see there;
 *  - destroying a held object (a CQ with a QP on it, an SRQ under a DCT, a PD with anything
 *    on it): EBUSY, the object intact;
 *  - pinned memory past RLIMIT_MEMLOCK without CAP_IPC_LOCK: ENOMEM;
 *  - a DCI whose WQE exceeds the firmware's max_wqe_sz_sq_dc: EINVAL;
 *  - the settings of hosts that differ (FakeDevice, "Hosts"): a port that requires a GRH, no
 *    DC transport, an active RoCE LAG without lag_dct, the older kernel's DCI rules;
 *  - a CQ the device overran: a CQ error event, nothing more written to it;
 *  - a receive that fails at the responder: the sender NAKed (REMOTE_INV_REQ or REMOTE_OP
 *    error) and its DCI in ERR.
 */

#include <stdint.h>
#include <sys/resource.h>

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
		int rc;                  /* what ibv_modify_qp returned (0 or a positive errno) */
	};
	std::vector<DvQp> dv_qps;
	std::vector<Modify> modifies; /* every call, refused ones too */
	/* The path of every DCI and DCT that reached RTR (IB_QP_AV, IB_QP_PATH_MTU). */
	struct RtrPath {
		uint32_t qpn; /* the DCI's QP number, the DCT's number */
		bool dct;
		bool is_global;
		uint8_t sgid_index, hop_limit, traffic_class, sl;
		int path_mtu;
	};
	std::vector<RtrPath> rtr_paths;
	std::vector<struct ibv_ah_attr> ah_attrs;
	int srqs_live = 0, ahs_live = 0, init_objs = 0;
	int srq_max_wr = 0;
	uint32_t bf_size = 256;     /* mlx5dv_qp.bf.size handed out (0: NC doorbell) */
	int dv_create_qp_errno = 0; /* non-zero: mlx5dv_create_qp fails with it */
	/* Non-zero: a modify into state refuse_modify_to fails with it (a firmware refusal, e.g.
	 * ENOMEM, after the kernel's checks passed), changing nothing. */
	int refuse_modify_errno = 0;
	int refuse_modify_to = -1;
	int mrs_live = 0, mrs_made = 0, mr_access = 0;

	/* Ports: InfiniBand, or RoCE (use_roce()). Every port has the same GID table. */
	bool roce = false; /* link_layer IBV_LINK_LAYER_ETHERNET on every port */
	struct FakeGid {
		uint8_t raw[16];
		uint32_t type; /* enum ibv_gid_type: IBV_GID_TYPE_IB, _ROCE_V1, _ROCE_V2 */
	};
	std::vector<FakeGid> gids; /* index = position; all-zero raw: an empty entry */
	uint8_t active_mtu = IBV_MTU_4096;
	int route_hops = 1; /* routers between the two ends on the fabric */

	/* Firmware limits (QUERY_HCA_CAP). */
	uint16_t max_wqe_sz_sq_dc = 512; /* bytes of one DCI WQE (the kernel refuses larger) */

	/* Hosts: what differs between real devices, kernels and fabrics (driver.md §13). */
	/* IBV_QPF_GRH_REQUIRED in every port's flags (an IB VF, some fabrics): an AV without a
	 * GRH is refused, AH and QP alike (mlx5_create_ah; rdma_check_ah_attr). */
	bool grh_required = false;
	bool dct_cap = true;     /* cmd_hca_cap.dct: clear, no DCI or DCT (EOPNOTSUPP) */
	bool lag_active = false; /* RoCE LAG (a bond): QUERY_LAG's lag_state != 0 */
	uint8_t lag_dct = 0;     /* cmd_hca_cap.lag_dct: 0, no DCT under an active LAG */
	/* The kernel before DCI->RESET and the AV at DCI INIT->RTR were allowed (5.2):
	 * modify_dci_qp_is_ok refuses both with EINVAL. */
	bool old_dci_rules = false;
	bool neigh_fail = false; /* RoCE: the kernel's neighbour lookup of an AH fails */
	int cq_errors = 0;       /* CQs the device overran (each raised IBV_EVENT_CQ_ERR) */
	int naks = 0;            /* receives that failed: the requester was NAKed */

	/* Pinned memory (ib_umem_get): bytes of MRs and queue buffers, rounded up to pages. */
	uint64_t pinned = 0;

	/* The device executing DC sends (dc_execute()). */
	bool scatter32 = false; /* payloads of <= 32 bytes go into the CQE (inline scatter) */
	/* Non-zero: the next receive completes in error with this syndrome, and its sender is
	 * NAKed (REMOTE_OP_ERR). */
	uint8_t resp_err = 0;
	int executed = 0, rnr = 0;
	int flushed = 0;        /* WQEs completed with WR_FLUSH_ERR (the DCI in ERR) */
	int dropped = 0;        /* SENDs lost on the fabric or at the target (once per WQE) */
	int key_violations = 0; /* SENDs a DCT dropped for a wrong DC key */
	uint64_t now_us = 0;    /* the device's clock (advance_us()); nothing reads the wall's */
};

/**
 * Make d a RoCE device: every port Ethernet, the GID table as an mlx5 RoCE port has it:
 * [0] fe80::<EUI-64 of the GUID> RoCE v1, [1] the same RoCE v2, [2] ::ffff:192.0.2.10 RoCE v1,
 * [3] ::ffff:192.0.2.10 RoCE v2 (the IPv4-mapped v2 entry is index 3, not 0).
 */
void use_roce(FakeDevice &d);

/** Advance the device's clock (transport timeouts in dc_execute()). */
void advance_us(uint64_t us);

/**
 * For a test that shows a locked-memory refusal: lowers RLIMIT_MEMLOCK's soft limit to bytes
 * and drops CAP_IPC_LOCK from the calling thread's effective set (capset; the tests run as
 * root), restoring both when it goes. Capabilities are per thread; while a guard lives the
 * fake counts the capability as absent on every thread, so that a pin made on a driver's
 * control thread is refused too, as in a process that lacks it.
 */
class MemlockLimit {
public:
	explicit MemlockLimit(uint64_t bytes);
	~MemlockLimit();
	MemlockLimit(const MemlockLimit &) = delete;
	MemlockLimit &operator=(const MemlockLimit &) = delete;
	bool ok() const { return ok_; } /* false: the limit or the capability could not be set */

private:
	struct rlimit old_;
	bool limit_set_ = false;
	bool cap_dropped_ = false;
	bool ok_ = false;
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
 * The device's execution step for every fake DCI, as a ConnectX does it:
 *  - a DCI executes only in RTS (in RESET, INIT and RTR its WQEs wait) and in ERR flushes;
 *  - a WQE runs only when the doorbell record covers it AND the UAR register (the 8 bytes at
 *    reg: the first 8 of the last rung WQE's control segment) names this DCI's QPN and a
 *    WQE index at or beyond it; a record without a register write runs nothing;
 *  - each SEND goes to its DCT (by number) through the DCT's SRQ (the next posted WQE along
 *    the list, its data segment's lkey and buffer checked against a live MR): a responder CQE
 *    on the DCT's CQ (wqe_counter = SRQ WQE index, byte_cnt, source QPN), a requester CQE on
 *    the DCI's. A SEND that finds no posted receive stays (RNR: counted, retried next call);
 *  - a SEND that is lost — no such DCT, a wrong DC key (counted in key_violations), on RoCE a
 *    source GID that is not in the table or whose type differs from the DCT's, a hop limit of
 *    the AV or of the DCT's path below route_hops, RoCE v1 across routers — is dropped
 *    (counted once) and the DCI retries until its transport timeout has passed on the fake
 *    clock (4.096 us * 2^timeout * (retry_cnt + 1), from its RTS modify; timeout 0 never
 *    expires), then completes it with TRANSPORT_RETRY_EXC_ERR (0x15); the WQEs behind wait;
 *  - after an error completion the DCI is in ERR: every later rung WQE completes with
 *    WR_FLUSH_ERR (0x05), in order, without being sent, until it is modified to RESET;
 *  - a WQE whose control segment does not carry the DCI's QPN and the index the device
 *    expects (a stale WQE, e.g. a producer counter not restarted after RESET) completes with
 *    LOCAL_QP_OP_ERR, as a malformed one does.
 *
 * After RESET (ibv_modify_qp to RESET): the device's SQ consumer counter and its view of the
 * doorbell go back to 0, and the fake, as libmlx5's mlx5_modify_qp does, zeroes the QP's
 * doorbell record (both slots) and clears the register's content. The driver must then
 * restart its SQ producer counter at 0: the first WQE after RESET has index 0 and sits at
 * BB 0 of the ring, and the record counts from 0 again.
 * @return WQEs completed (sent, failed or flushed).
 */
int dc_execute();

/** The SRQ doorbell record of the DCT numbered dctn (posted count), or -1. */
int srq_posted(uint32_t dctn);

/** The fake's state (one per process; reset by Scope). */
FakeDevice &fake();

/** The fake table. */
const struct mlx5_qpn_glue *fake_glue();

/** The same table without mlx5dv_reserved_qpn_alloc/dealloc (NULL), as the glue resolves an
 * rdma-core older than 34. */
const struct mlx5_qpn_glue *fake_glue_without_reserved_qpn();

/** Installs the fake as the process's glue for its lifetime, from a fresh FakeDevice; at its
 * end, removes the lease file of a GUID the test set (mlx5_qpn_dev_purge("mlx5_fake"); not of
 * the default GUID, which other processes may use) and frees whatever the code under test left
 * behind (live_objects() says what that was). */
class Scope {
public:
	Scope();
	explicit Scope(const struct mlx5_qpn_glue *table); /* one of the tables above */
	~Scope();
	Scope(const Scope &) = delete;
	Scope &operator=(const Scope &) = delete;
};

/** Every verbs/DEVX object the fake handed out and nobody destroyed yet. */
int live_objects();

} // namespace hwfake

#endif /* QPN_TESTS_HW_FAKE_GLUE_H */
