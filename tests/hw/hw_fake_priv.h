/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTS_HW_FAKE_PRIV_H
#define QPN_TESTS_HW_FAKE_PRIV_H

/*
 * Inside the fake rdma-core (hw_fake_glue.h): its verbs objects and the rules they share.
 * Each object is a heap struct with the ibv struct first, so its pointer is the object's.
 *
 * File map:
 *   hw_fake_glue.cpp      the table, the device and its firmware (caps, RESERVED_QPN, UARs),
 *                         Scope, live_objects(), the doorbell-order trap
 *   hw_fake_objects.cpp   PD, CQ, SRQ, MR, AH, QP lifetimes: users (EBUSY), pinned memory,
 *                         the DCI's WQE size against max_wqe_sz_sq_dc
 *   hw_fake_qp_state.cpp  ibv_modify_qp: the kernel's state machine and attribute checks
 *   hw_fake_roce.cpp      ports, the GID table, query_gid_ex, the AV an AH gets, route checks
 *   hw_fake_mem.cpp       RLIMIT_MEMLOCK and CAP_IPC_LOCK as ib_umem_get reads them
 *   hw_fake_dc.cpp        the device executing DC sends (dc_execute)
 */

#include <stdint.h>

#include <map>
#include <mutex>
#include <set>
#include <vector>

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include "hw_fake_glue.h"

namespace hwfake {
namespace priv {

/* Objects count who holds them: a PD its QPs, SRQs, MRs and AHs; a CQ its QPs; an SRQ its
 * DCTs. The kernel refuses to destroy a held object (EBUSY) and so does the fake. */
struct FakePd {
	ibv_pd pd;
	int users = 0;
};

struct FakeCq {
	ibv_cq cq;
	std::vector<uint8_t> ring;
	alignas(64) uint32_t dbrec[2];
	uint32_t pi = 0;    /* CQEs the device wrote */
	bool error = false; /* overrun: the device writes nothing more (IBV_EVENT_CQ_ERR) */
	int users = 0;
	uint64_t pinned = 0;
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
	int users = 0;
	uint64_t pinned = 0;
};

struct FakeMr {
	ibv_mr mr;
	int access = 0; /* IBV_ACCESS_* it was registered with */
	uint64_t pinned = 0;
};

/* The path a QP was given at RTR (IB_QP_AV and IB_QP_PATH_MTU). */
struct QpPath {
	bool set = false;
	bool global = false;
	uint8_t sgid_index = 0, hop_limit = 0, tclass = 0, sl = 0;
	int mtu = 0;
};

struct FakeQp {
	ibv_qp qp;
	bool dc = false, dct = false;
	int state = IBV_QPS_RESET;
	uint8_t port = 0;
	std::vector<uint8_t> sq;
	void *dbrec_page = nullptr, *reg_page = nullptr; /* DCI: one page each (trappable) */
	FakeCq *scq = nullptr, *rcq = nullptr;
	FakeCq *cq = nullptr;   /* where the DC path completes (send CQ; the DC layer uses one) */
	FakeSrq *srq = nullptr; /* DCT */
	uint64_t key = 0;       /* DCT: its DC access key */
	QpPath path;
	uint8_t timeout = 0, retry_cnt = 0; /* from RTR -> RTS */
	uint64_t pinned = 0;

	/* DCI execution state. */
	uint32_t sq_ci = 0;    /* BBs the device consumed */
	uint64_t uar_last = 0; /* the register's content the device last took */
	bool db_valid = false; /* a doorbell for this QP was seen since RESET */
	uint16_t db_idx = 0;   /* the WQE index it named */
	bool waiting = false;  /* the head WQE was dropped: retries until the timeout */
	uint64_t wait_since_us = 0;
};

struct FakeAh {
	ibv_ah ah;
	mlx5_wqe_av av;
};

/* DCIs by QP number, DCTs by DCT number (from RTR), MRs by lkey. */
extern std::map<uint32_t, FakeQp *> g_dcis, g_dcts;
extern std::map<uint32_t, FakeMr *> g_mrs;

/* Every object handed out and not destroyed (freed at the end of a Scope, so that a test
 * that leaks does not make the fake leak). */
struct Live {
	std::set<FakePd *> pds;
	std::set<FakeCq *> cqs;
	std::set<FakeSrq *> srqs;
	std::set<FakeMr *> mrs;
	std::set<FakeQp *> qps;
	std::set<FakeAh *> ahs;
};
extern Live g_live;

/* The last CQ created and the AV of the last AH (hw_fake_glue.h: last_cq_ring, last_av). */
extern FakeCq *g_last_cq;
extern mlx5_wqe_av g_last_av;

/* One lock over the registries and counters: the driver's control thread creates and destroys
 * UD QPs while a test thread calls the fake too. */
extern std::mutex g_mu;

/* hw_fake_glue.cpp: queue IBV_EVENT_CQ_ERR for cq on its context (g_mu held). */
void raise_cq_error(ibv_cq *cq);

/* hw_fake_objects.cpp: the glue entries of the verbs objects. */
ibv_pd *alloc_pd(ibv_context *c);
int dealloc_pd(ibv_pd *pd);
ibv_cq *create_cq(ibv_context *c, int cqe, void *, ibv_comp_channel *, int);
int destroy_cq(ibv_cq *cq);
ibv_qp *create_qp(ibv_pd *pd, ibv_qp_init_attr *attr);
ibv_qp *dv_create_qp(ibv_context *, ibv_qp_init_attr_ex *a, mlx5dv_qp_init_attr *dv);
int destroy_qp(ibv_qp *qp);
ibv_srq *create_srq(ibv_pd *pd, ibv_srq_init_attr *a);
int destroy_srq(ibv_srq *s);
ibv_mr *reg_mr(ibv_pd *pd, void *addr, size_t len, int access);
int dereg_mr(ibv_mr *mr);
ibv_ah *create_ah(ibv_pd *pd, ibv_ah_attr *a);
int destroy_ah(ibv_ah *ah);
int dv_init_obj(mlx5dv_obj *o, uint64_t type);
/* Free every object still live (the end of a Scope). */
void free_leftovers(void);

/* hw_fake_qp_state.cpp */
int modify_qp(ibv_qp *qp, ibv_qp_attr *a, int mask);
/* Back to RESET: what the device and libmlx5 clear (see hw_fake_glue.h, "After RESET"). */
void qp_reset(FakeQp *f);

/* hw_fake_roce.cpp */
int query_port(ibv_context *c, uint8_t port, _compat_ibv_port_attr *pa);
int query_gid_ex(ibv_context *c, uint32_t port, uint32_t index, ibv_gid_entry *e, uint32_t flags,
		 size_t entry_size);
/* The GID table entry at index, or NULL (out of range or empty). */
const FakeDevice::FakeGid *gid_at(uint32_t index);
/* The checks the kernel's rdma_check_ah_attr and rdma_fill_sgid_attr make of an AV (port,
 * GRH on RoCE, with sgid_checked a valid source GID when global): 0 or EINVAL. libmlx5 builds
 * an InfiniBand AH without the kernel (no source GID check); a RoCE AH and a QP's AV pass
 * through it. */
int check_ah_attr(const ibv_ah_attr *a, bool sgid_checked);
/* libmlx5's mlx5_create_ah: the AV for attributes check_ah_attr() accepted. */
void build_av(const ibv_ah_attr *a, mlx5_wqe_av *av);
/* IBV_MTU_* of the ports. */
int port_active_mtu(void);
/* The route check of a SEND on RoCE (hw_fake_glue.h, dc_execute): true if delivered. */
bool roce_route_ok(const uint8_t *wqe_av, const FakeQp *dct);

/* hw_fake_mem.cpp: pin bytes rounded to pages (0, or ENOMEM past RLIMIT_MEMLOCK without
 * CAP_IPC_LOCK), and give them back. */
int pin(uint64_t bytes, uint64_t *pinned);
void unpin(uint64_t *pinned);
uint64_t pages_of(const void *addr, uint64_t len);

} // namespace priv
} // namespace hwfake

#endif /* QPN_TESTS_HW_FAKE_PRIV_H */
