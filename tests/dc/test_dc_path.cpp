/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The DC data path end to end on the emulated device: DCI -> DCT delivery, completions on both
 * CQs across several wraps of the CQ ring, error CQEs (wrong DC key and unknown DCT time out,
 * malformed WQE, flush after an error), a full send queue, several DCIs to one DCT, a DCI of another handle and
 * of a fork()ed child, destroy paths and a backend without a data path.
 */
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "common/mlx5_qpn_prm_wqe.h"
#include "dc/mlx5_qpn_dc_be.h"
#include "mlx5_qpn.h"
#include "mlx5_qpn_dc.h"
#include "mlx5_qpn_dc_ops.h"
#include "mlx5_qpn_dev_internal.h"
#include "sim/mlx5_qpn_sim.h"
#include "sim/sim_test_util.h"

namespace {

constexpr uint64_t KEY = 0x1122334455667788ULL;

class DcPath : public ::testing::Test {
protected:
	void SetUp() override
	{
		static std::atomic<int> seq{0};
		char b[64];
		snprintf(b, sizeof(b), "simdc%dx%d", int(getpid()), seq.fetch_add(1));
		name_ = b;
		std::string args = name_;
		args += ",quarantine_us=0";
		ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dev_), 0);
		be_ = mlx5_qpn_dev_backend(dev_);
		ASSERT_NE(be_, nullptr);
		mlx5_qpn_dc_addr a{};
		a.dlid = 1; /* the emulated device carries the route; every send needs one */
		ASSERT_EQ(mlx5_qpn_ah_create(dev_, &a, &ah_), 0);
	}
	void TearDown() override
	{
		mlx5_qpn_ah_destroy(ah_);
		mlx5_qpn_dev_close(dev_);
		mlx5_qpn_dev_purge(name_.c_str());
	}

	mlx5_qpn_sim_stats stats()
	{
		mlx5_qpn_sim_stats st;
		EXPECT_EQ(mlx5_qpn_sim_stats_get(be_, &st), 0);
		return st;
	}

	/* Run the device and poll until `want` completions arrived on cq (bounded passes, no
	 * timing). */
	std::vector<mlx5_qpn_wc> drain(mlx5_qpn_cq *cq, size_t want)
	{
		std::vector<mlx5_qpn_wc> out;
		for (int pass = 0; pass < 1000 && out.size() < want; pass++) {
			EXPECT_GE(mlx5_qpn_dev_service_run(dev_), 0);
			mlx5_qpn_wc wc[16];
			int n = mlx5_qpn_cq_poll(cq, wc, 16);
			EXPECT_GE(n, 0);
			out.insert(out.end(), wc, wc + (n > 0 ? n : 0));
		}
		return out;
	}

	std::string name_;
	mlx5_qpn_dev *dev_ = nullptr;
	mlx5_qpn_backend *be_ = nullptr;
	mlx5_qpn_ah *ah_ = nullptr;
};

std::string
read_payload(mlx5_qpn_dct *dct, uint16_t wqe_counter)
{
	char buf[MLX5_QPN_DC_MAX_INLINE];
	int n = mlx5_qpn_dct_read(dct, wqe_counter, buf, sizeof(buf));
	if (n < 0)
		return "<error " + std::to_string(-n) + ">";
	return std::string(buf, size_t(n));
}

/* "i:m" (snprintf: g++ 12 -O3 warns falsely on chained std::string +). */
std::string
tag(int i, int m)
{
	char b[32];
	snprintf(b, sizeof(b), "%d:%d", i, m);
	return b;
}

} // namespace

TEST_F(DcPath, SendIsDeliveredAndCompletesOnBothCqs)
{
	mlx5_qpn_cq *scq = nullptr, *rcq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 4, &scq), 0);
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 4, &rcq), 0);
	ASSERT_EQ(mlx5_qpn_dct_create(dev_, rcq, KEY, &dct), 0);
	ASSERT_EQ(mlx5_qpn_dci_create(dev_, scq, 4, &dci), 0);
	uint32_t dctn = mlx5_qpn_dct_qpn(dct), qpn = mlx5_qpn_dci_qpn(dci);
	EXPECT_GT(dctn, 1u); /* never QP0/QP1 */
	EXPECT_GT(qpn, 1u);
	EXPECT_NE(dctn, qpn);

	ASSERT_EQ(mlx5_qpn_dci_post_send(dci, ah_, dctn, KEY, "hello", 5, 42), 0);
	/* Not rung yet: the device sees nothing. */
	EXPECT_EQ(mlx5_qpn_dev_service_run(dev_), 0);
	mlx5_qpn_wc wc[4];
	EXPECT_EQ(mlx5_qpn_cq_poll(rcq, wc, 4), 0);
	uint64_t db0 = stats().doorbells;
	mlx5_qpn_dci_ring(dci);
	EXPECT_EQ(mlx5_qpn_dev_service_run(dev_), 1);
	EXPECT_EQ(stats().doorbells, db0 + 1); /* the UAR register was written */

	ASSERT_EQ(mlx5_qpn_cq_poll(rcq, wc, 4), 1);
	EXPECT_EQ(wc[0].opcode, MLX5_QPN_CQE_RESP_SEND);
	EXPECT_EQ(wc[0].qpn, dctn);
	EXPECT_EQ(wc[0].src_qpn, qpn);
	EXPECT_EQ(wc[0].byte_len, 5u);
	EXPECT_EQ(wc[0].syndrome, 0);
	EXPECT_EQ(read_payload(dct, wc[0].wqe_counter), "hello");

	ASSERT_EQ(mlx5_qpn_cq_poll(scq, wc, 4), 1);
	EXPECT_EQ(wc[0].opcode, MLX5_QPN_CQE_REQ);
	EXPECT_EQ(wc[0].qpn, qpn);
	EXPECT_EQ(wc[0].wr_id, 42u);
	EXPECT_EQ(wc[0].wqe_counter, 0);
	EXPECT_EQ(mlx5_qpn_cq_poll(scq, wc, 4), 0);
	EXPECT_EQ(mlx5_qpn_cq_poll(rcq, wc, 0), 0);

	auto st = stats();
	EXPECT_EQ(st.dc_delivered, 1u);
	EXPECT_EQ(st.dc_err_cqes, 0u);
	EXPECT_EQ(st.dc_dcis, 1u);
	EXPECT_EQ(st.dc_dcts, 1u);
	EXPECT_EQ(st.dc_cqs, 2u);
	mlx5_qpn_dci_destroy(dci);
	mlx5_qpn_dct_destroy(dct);
	mlx5_qpn_cq_destroy(scq);
	mlx5_qpn_cq_destroy(rcq);
}

/* CQs of 4 entries, 40 messages of growing size: ten passes over each CQ ring (the owner bit
 * flips each pass) and WQEs of 2..6 BBs that run over the end of a 16-BB send queue. */
TEST_F(DcPath, OwnerBitAcrossCqWrapsAndSqWraps)
{
	mlx5_qpn_cq *scq = nullptr, *rcq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 2, &scq), 0);
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 2, &rcq), 0);
	ASSERT_EQ(mlx5_qpn_dct_create(dev_, rcq, KEY, &dct), 0);
	ASSERT_EQ(mlx5_qpn_dci_create(dev_, scq, 1, &dci), 0); /* 2 WQEs, 16 BBs */
	uint32_t dctn = mlx5_qpn_dct_qpn(dct);

	uint64_t next_req = 0, next_resp = 0;
	for (uint64_t i = 0; i < 40;) {
		/* Post up to 3 (the SQ takes 2: the third must wait). */
		int posted = 0;
		for (int k = 0; k < 3 && i < 40; k++) {
			std::string msg(size_t(i * 6 + 1), char('a' + i % 26));
			int rc = mlx5_qpn_dci_post_send(dci, ah_, dctn, KEY, msg.data(),
							uint32_t(msg.size()), 1000 + i);
			if (rc == -ENOBUFS)
				break;
			ASSERT_EQ(rc, 0);
			i++;
			posted++;
		}
		ASSERT_GT(posted, 0);
		mlx5_qpn_dci_ring(dci);
		auto r = drain(rcq, size_t(posted));
		ASSERT_EQ(r.size(), size_t(posted));
		for (auto &w : r) {
			ASSERT_EQ(w.opcode, MLX5_QPN_CQE_RESP_SEND);
			std::string want(size_t(next_resp * 6 + 1), char('a' + next_resp % 26));
			EXPECT_EQ(w.byte_len, want.size());
			EXPECT_EQ(read_payload(dct, w.wqe_counter), want);
			next_resp++;
		}
		auto s = drain(scq, size_t(posted));
		ASSERT_EQ(s.size(), size_t(posted));
		for (auto &w : s) {
			ASSERT_EQ(w.opcode, MLX5_QPN_CQE_REQ);
			EXPECT_EQ(w.wr_id, 1000 + next_req);
			next_req++;
		}
	}
	EXPECT_EQ(next_req, 40u);
	EXPECT_EQ(next_resp, 40u);
	mlx5_qpn_wc wc[4];
	EXPECT_EQ(mlx5_qpn_cq_poll(scq, wc, 4), 0); /* no stale CQE of an older pass */
	EXPECT_EQ(mlx5_qpn_cq_poll(rcq, wc, 4), 0);
	mlx5_qpn_dci_destroy(dci);
	mlx5_qpn_dct_destroy(dct);
	mlx5_qpn_cq_destroy(scq);
	mlx5_qpn_cq_destroy(rcq);
}

/* A ConnectX's DCT drops a SEND with a wrong DC key and counts it; the sender hears nothing
 * and its retries run out (0x15), it never gets an answer at once. */
TEST_F(DcPath, WrongKeyIsDroppedAndTimesOutThenFlush)
{
	mlx5_qpn_cq *scq = nullptr, *rcq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 4, &scq), 0);
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 4, &rcq), 0);
	ASSERT_EQ(mlx5_qpn_dct_create(dev_, rcq, KEY, &dct), 0);
	ASSERT_EQ(mlx5_qpn_dci_create(dev_, scq, 3, &dci), 0);
	uint32_t dctn = mlx5_qpn_dct_qpn(dct);

	ASSERT_EQ(mlx5_qpn_dci_post_send(dci, ah_, dctn, KEY + 1, "bad", 3, 7), 0);
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci, ah_, dctn, KEY, "good", 4, 8), 0);
	mlx5_qpn_dci_ring(dci);
	auto s = drain(scq, 2);
	ASSERT_EQ(s.size(), 2u);
	EXPECT_EQ(s[0].opcode, MLX5_QPN_CQE_REQ_ERR);
	EXPECT_EQ(s[0].syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR);
	EXPECT_EQ(s[0].wr_id, 7u);
	EXPECT_EQ(s[0].qpn, mlx5_qpn_dci_qpn(dci));
	/* The DCI is in error: what follows is flushed, not sent. */
	EXPECT_EQ(s[1].opcode, MLX5_QPN_CQE_REQ_ERR);
	EXPECT_EQ(s[1].syndrome, MLX5_QPN_SYND_WR_FLUSH_ERR);
	EXPECT_EQ(s[1].wr_id, 8u);
	mlx5_qpn_wc wc[4];
	EXPECT_EQ(mlx5_qpn_cq_poll(rcq, wc, 4), 0); /* nothing delivered */
	EXPECT_EQ(stats().dc_delivered, 0u);
	EXPECT_EQ(stats().dc_err_cqes, 2u);
	EXPECT_EQ(stats().dc_key_violations, 1u);

	/* A fresh DCI with the right key gets through. */
	mlx5_qpn_dci *dci2 = nullptr;
	ASSERT_EQ(mlx5_qpn_dci_create(dev_, scq, 3, &dci2), 0);
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci2, ah_, dctn, KEY, "ok", 2, 9), 0);
	mlx5_qpn_dci_ring(dci2);
	auto r = drain(rcq, 1);
	ASSERT_EQ(r.size(), 1u);
	EXPECT_EQ(r[0].src_qpn, mlx5_qpn_dci_qpn(dci2));
	EXPECT_EQ(read_payload(dct, r[0].wqe_counter), "ok");
	s = drain(scq, 1);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].opcode, MLX5_QPN_CQE_REQ);
	EXPECT_EQ(s[0].wr_id, 9u);
	mlx5_qpn_dci_destroy(dci);
	mlx5_qpn_dci_destroy(dci2);
	mlx5_qpn_dct_destroy(dct);
	mlx5_qpn_cq_destroy(scq);
	mlx5_qpn_cq_destroy(rcq);
}

TEST_F(DcPath, UnknownOrDestroyedDctIsRetryExceeded)
{
	mlx5_qpn_cq *cq = nullptr;
	mlx5_qpn_dci *dci = nullptr, *dci2 = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 4, &cq), 0); /* one CQ for everything */
	ASSERT_EQ(mlx5_qpn_dct_create(dev_, cq, KEY, &dct), 0);
	ASSERT_EQ(mlx5_qpn_dci_create(dev_, cq, 2, &dci), 0);
	ASSERT_EQ(mlx5_qpn_dci_create(dev_, cq, 2, &dci2), 0);
	uint32_t dctn = mlx5_qpn_dct_qpn(dct);

	/* A number that is no DCT: the DCI's own QPN. */
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci, ah_, mlx5_qpn_dci_qpn(dci), KEY, "x", 1, 1), 0);
	mlx5_qpn_dci_ring(dci);
	auto s = drain(cq, 1);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].opcode, MLX5_QPN_CQE_REQ_ERR);
	EXPECT_EQ(s[0].syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR);
	EXPECT_EQ(s[0].wr_id, 1u);

	/* A DCT that existed and was destroyed. */
	mlx5_qpn_dct_destroy(dct);
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci2, ah_, dctn, KEY, "y", 1, 2), 0);
	mlx5_qpn_dci_ring(dci2);
	s = drain(cq, 1);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR);
	EXPECT_EQ(s[0].wr_id, 2u);
	EXPECT_EQ(stats().dc_delivered, 0u);
	mlx5_qpn_dci_destroy(dci);
	mlx5_qpn_dci_destroy(dci2);
	mlx5_qpn_cq_destroy(cq);
}

TEST_F(DcPath, FullSendQueueIsEnobufsAndArgumentsAreChecked)
{
	mlx5_qpn_cq *cq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 4, &cq), 0);
	ASSERT_EQ(mlx5_qpn_dct_create(dev_, cq, KEY, &dct), 0);
	ASSERT_EQ(mlx5_qpn_dci_create(dev_, cq, 2, &dci), 0); /* 4 WQEs */
	uint32_t dctn = mlx5_qpn_dct_qpn(dct);
	char big[MLX5_QPN_DC_MAX_INLINE + 1] = {};

	EXPECT_EQ(mlx5_qpn_dci_post_send(dci, ah_, dctn, KEY, big, MLX5_QPN_DC_MAX_INLINE + 1, 0),
		  -EINVAL);
	EXPECT_EQ(mlx5_qpn_dci_post_send(dci, ah_, dctn, KEY, nullptr, 4, 0), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dci_post_send(nullptr, ah_, dctn, KEY, big, 4, 0), -EINVAL);
	/* No route: refused here as on hardware (the emulated device is no more
	 * lenient), and nothing was written to the send queue. */
	EXPECT_EQ(mlx5_qpn_dci_post_send(dci, nullptr, dctn, KEY, "no route", 8, 0), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dev_service_run(dev_), 0);
	EXPECT_EQ(mlx5_qpn_dci_post_send(dci, ah_, 1u << 24, KEY, big, 4, 0), -EINVAL);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(mlx5_qpn_dci_post_send(dci, ah_, dctn, KEY, big, MLX5_QPN_DC_MAX_INLINE,
						 i),
			  0);
	EXPECT_EQ(mlx5_qpn_dci_post_send(dci, ah_, dctn, KEY, "z", 1, 9), -ENOBUFS);
	mlx5_qpn_dci_ring(dci);
	/* Executed but not polled: the slots are not free yet (the wr_ids live there). */
	for (int k = 0; k < 4; k++)
		EXPECT_GE(mlx5_qpn_dev_service_run(dev_), 0);
	EXPECT_EQ(mlx5_qpn_dci_post_send(dci, ah_, dctn, KEY, "z", 1, 9), -ENOBUFS);
	auto all = drain(cq, 8); /* 4 receives + 4 sends on the one CQ (16 entries) */
	ASSERT_EQ(all.size(), 8u);
	EXPECT_EQ(mlx5_qpn_dci_post_send(dci, ah_, dctn, KEY, "z", 1, 9), 0);

	EXPECT_EQ(mlx5_qpn_cq_poll(nullptr, nullptr, 1), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cq_poll(cq, nullptr, 1), -EINVAL);
	mlx5_qpn_cq *bad = nullptr;
	EXPECT_EQ(mlx5_qpn_cq_create(dev_, 0, &bad), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cq_create(dev_, 17, &bad), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cq_create(nullptr, 4, &bad), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cq_create(dev_, 4, nullptr), -EINVAL);
	mlx5_qpn_dci *bd = nullptr;
	EXPECT_EQ(mlx5_qpn_dci_create(dev_, cq, 13, &bd), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dci_create(dev_, nullptr, 2, &bd), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dci_qpn(nullptr), 0u);
	EXPECT_EQ(mlx5_qpn_dct_qpn(nullptr), 0u);
	EXPECT_EQ(mlx5_qpn_dev_service_run(nullptr), -EINVAL);
	mlx5_qpn_dci_destroy(dci);
	mlx5_qpn_dct_destroy(dct);
	mlx5_qpn_cq_destroy(cq);
}

TEST_F(DcPath, SeveralDcisToOneDct)
{
	constexpr int NDCI = 4, NMSG = 5;
	mlx5_qpn_cq *rcq = nullptr, *scq = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 6, &rcq), 0);
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 6, &scq), 0);
	ASSERT_EQ(mlx5_qpn_dct_create(dev_, rcq, KEY, &dct), 0);
	mlx5_qpn_dci *dci[NDCI];
	std::map<uint32_t, int> by_qpn;
	for (int i = 0; i < NDCI; i++) {
		ASSERT_EQ(mlx5_qpn_dci_create(dev_, scq, 3, &dci[i]), 0);
		by_qpn[mlx5_qpn_dci_qpn(dci[i])] = i;
	}
	ASSERT_EQ(by_qpn.size(), size_t(NDCI)); /* distinct QPNs */
	for (int m = 0; m < NMSG; m++)
		for (int i = 0; i < NDCI; i++) {
			std::string msg = tag(i, m);
			ASSERT_EQ(mlx5_qpn_dci_post_send(dci[i], ah_, mlx5_qpn_dct_qpn(dct), KEY,
							 msg.data(), uint32_t(msg.size()),
							 uint64_t(i * 100 + m)),
				  0);
		}
	for (int i = 0; i < NDCI; i++)
		mlx5_qpn_dci_ring(dci[i]);
	auto r = drain(rcq, NDCI * NMSG);
	ASSERT_EQ(r.size(), size_t(NDCI * NMSG));
	std::map<int, int> next; /* per DCI, its messages arrive in order */
	for (auto &w : r) {
		ASSERT_EQ(by_qpn.count(w.src_qpn), 1u);
		int i = by_qpn[w.src_qpn];
		EXPECT_EQ(read_payload(dct, w.wqe_counter), tag(i, next[i]));
		next[i]++;
	}
	auto s = drain(scq, NDCI * NMSG);
	ASSERT_EQ(s.size(), size_t(NDCI * NMSG));
	std::map<int, int> nreq;
	for (auto &w : s) {
		int i = by_qpn.at(w.qpn);
		EXPECT_EQ(w.wr_id, uint64_t(i * 100 + nreq[i]));
		nreq[i]++;
	}
	for (int i = 0; i < NDCI; i++)
		mlx5_qpn_dci_destroy(dci[i]);
	mlx5_qpn_dct_destroy(dct);
	mlx5_qpn_cq_destroy(scq);
	mlx5_qpn_cq_destroy(rcq);
}

/* A second handle of the same emulated device (as another process would open it) sends to a
 * DCT of the probed device; closing that handle takes back its queues. */
TEST_F(DcPath, SecondHandleSendsToOurDct)
{
	mlx5_qpn_cq *rcq = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 4, &rcq), 0);
	ASSERT_EQ(mlx5_qpn_dct_create(dev_, rcq, KEY, &dct), 0);

	auto da = sim_test::default_devargs(name_);
	mlx5_qpn_backend *be2 = nullptr;
	ASSERT_EQ(mlx5_qpn_sim_ops.open(&da, &be2), 0);
	mlx5_qpn_cq *scq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create_be(be2, 4, &scq), 0);
	ASSERT_EQ(mlx5_qpn_dci_create_cq(scq, 3, &dci), 0);
	/* A CQ of another handle cannot carry this device's QPs. */
	mlx5_qpn_dci *wrong = nullptr;
	EXPECT_EQ(mlx5_qpn_dci_create(dev_, scq, 3, &wrong), -EINVAL);

	mlx5_qpn_dc_addr a{};
	mlx5_qpn_ah *ah2 = nullptr;
	ASSERT_EQ(mlx5_qpn_ah_create_be(be2, &a, &ah2), 0);
	/* An AH of another handle is not this DCI's route. */
	EXPECT_EQ(mlx5_qpn_dci_post_send(dci, ah_, mlx5_qpn_dct_qpn(dct), KEY, "x", 1, 4), -EINVAL);
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci, ah2, mlx5_qpn_dct_qpn(dct), KEY, "other", 5, 5), 0);
	mlx5_qpn_dci_ring(dci);
	EXPECT_EQ(mlx5_qpn_dc_service_run_be(be2), 1);
	mlx5_qpn_wc wc[2];
	ASSERT_EQ(mlx5_qpn_cq_poll(rcq, wc, 2), 1);
	EXPECT_EQ(wc[0].src_qpn, mlx5_qpn_dci_qpn(dci));
	EXPECT_EQ(read_payload(dct, wc[0].wqe_counter), "other");
	ASSERT_EQ(mlx5_qpn_cq_poll(scq, wc, 2), 1);
	EXPECT_EQ(wc[0].wr_id, 5u);

	mlx5_qpn_dci_destroy(dci);
	mlx5_qpn_ah_destroy(ah2);
	mlx5_qpn_cq_destroy(scq);

	/* Queues left behind at close (created on the device directly, no local objects). */
	uint64_t qps = stats().qps_live;
	const mlx5_qpn_dc_ops &ops = *mlx5_qpn_sim_ops.dc;
	mlx5_qpn_dc_cq_info lcq;
	mlx5_qpn_dc_dci_info ldci;
	ASSERT_EQ(ops.cq_create(be2, 4, &lcq), 0);
	ASSERT_EQ(ops.dci_create(be2, &lcq, 4, nullptr, &ldci), 0);
	EXPECT_EQ(stats().dc_dcis, 1u);
	EXPECT_EQ(stats().qps_live, qps + 1);
	/* Another handle cannot destroy them. */
	EXPECT_EQ(ops.dci_destroy(be_, &ldci), -EINVAL);
	mlx5_qpn_sim_ops.close(be2);
	auto st = stats();
	EXPECT_EQ(st.dc_dcis, 0u);
	EXPECT_EQ(st.dc_cqs, 1u);
	EXPECT_EQ(st.qps_live, qps);
	mlx5_qpn_dct_destroy(dct);
	mlx5_qpn_cq_destroy(rcq);
}

/* A DCI in a fork()ed child (its own handle, no EAL) sends to a DCT of the parent: the queues
 * are in the device's shared memory. */
TEST_F(DcPath, ForkedChildSendsToParentDct)
{
	mlx5_qpn_cq *rcq = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 4, &rcq), 0);
	ASSERT_EQ(mlx5_qpn_dct_create(dev_, rcq, KEY, &dct), 0);
	uint32_t dctn = mlx5_qpn_dct_qpn(dct);
	int up[2];
	ASSERT_EQ(pipe(up), 0);
	auto da = sim_test::default_devargs(name_);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(up[0]);
		int code = 1;
		uint32_t qpn = 0;
		mlx5_qpn_backend *be = nullptr;
		mlx5_qpn_cq *cq = nullptr;
		mlx5_qpn_dci *dci = nullptr;
		mlx5_qpn_ah *cah = nullptr;
		mlx5_qpn_dc_addr a{};
		if (mlx5_qpn_sim_ops.open(&da, &be) == 0 &&
		    mlx5_qpn_cq_create_be(be, 4, &cq) == 0 &&
		    mlx5_qpn_dci_create_cq(cq, 2, &dci) == 0 &&
		    mlx5_qpn_ah_create_be(be, &a, &cah) == 0 &&
		    mlx5_qpn_dci_post_send(dci, cah, dctn, KEY, "from child", 10, 77) == 0) {
			qpn = mlx5_qpn_dci_qpn(dci);
			mlx5_qpn_dci_ring(dci);
			mlx5_qpn_wc wc;
			for (int pass = 0; pass < 1000; pass++) {
				mlx5_qpn_dc_service_run_be(be);
				if (mlx5_qpn_cq_poll(cq, &wc, 1) == 1) {
					code = (wc.opcode == MLX5_QPN_CQE_REQ && wc.wr_id == 77) ?
						       0 :
						       2;
					break;
				}
			}
			mlx5_qpn_dci_destroy(dci);
			mlx5_qpn_cq_destroy(cq);
		}
		if (be)
			mlx5_qpn_sim_ops.close(be);
		if (write(up[1], &qpn, sizeof(qpn)) != sizeof(qpn))
			code = 3;
		_exit(code);
	}
	close(up[1]);
	uint32_t child_qpn = 0;
	EXPECT_EQ(read(up[0], &child_qpn, sizeof(child_qpn)), ssize_t(sizeof(child_qpn)));
	close(up[0]);
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(WEXITSTATUS(status), 0);
	mlx5_qpn_wc wc[2];
	ASSERT_EQ(mlx5_qpn_cq_poll(rcq, wc, 2), 1);
	EXPECT_EQ(wc[0].opcode, MLX5_QPN_CQE_RESP_SEND);
	EXPECT_EQ(wc[0].src_qpn, child_qpn);
	EXPECT_EQ(read_payload(dct, wc[0].wqe_counter), "from child");
	EXPECT_EQ(stats().dc_dcis, 0u); /* the child destroyed its DCI */
	mlx5_qpn_dct_destroy(dct);
	mlx5_qpn_cq_destroy(rcq);
}

/* A malformed WQE written straight into the SQ (as a buggy provider would) completes in error
 * with the PRM syndrome, and the DCI is flushed afterwards. */
TEST_F(DcPath, MalformedWqeIsLocalQpOperationError)
{
	const mlx5_qpn_dc_ops &ops = *mlx5_qpn_sim_ops.dc;
	mlx5_qpn_dc_cq_info cq;
	mlx5_qpn_dc_dci_info dci;
	ASSERT_EQ(ops.cq_create(be_, 3, &cq), 0);
	ASSERT_EQ(ops.dci_create(be_, &cq, 4, nullptr, &dci), 0);
	auto *sq = static_cast<uint8_t *>(dci.sq);
	ASSERT_EQ(mlx5_qpn_wqe_build_dc_send(sq, 0, dci.qpn, 5, KEY, "abc", 3, 0x08), 5);
	sq[3] = 0x08; /* RDMA WRITE: not supported on this path */
	ASSERT_EQ(mlx5_qpn_wqe_build_dc_send(sq + 128, 2, dci.qpn, 5, KEY, "abc", 3, 0x08), 5);
	std::atomic_ref<uint32_t>(dci.dbrec[MLX5_QPN_SND_DBR])
		.store(rte_cpu_to_be_32(4), std::memory_order_release);
	EXPECT_EQ(ops.execute(be_), 2);
	auto *ring = static_cast<const uint8_t *>(cq.ring);
	mlx5_qpn_cqe_fields f;
	ASSERT_TRUE(mlx5_qpn_cqe_is_sw_owned(ring[63], 0, 3));
	mlx5_qpn_cqe_parse(ring, ring[63], &f);
	EXPECT_EQ(f.opcode, MLX5_QPN_CQE_REQ_ERR);
	EXPECT_EQ(f.syndrome, MLX5_QPN_SYND_LOCAL_QP_OP_ERR);
	EXPECT_EQ(f.qpn, dci.qpn);
	EXPECT_EQ(f.wqe_counter, 0);
	ASSERT_TRUE(mlx5_qpn_cqe_is_sw_owned(ring[64 + 63], 1, 3));
	mlx5_qpn_cqe_parse(ring + 64, ring[64 + 63], &f);
	EXPECT_EQ(f.syndrome, MLX5_QPN_SYND_WR_FLUSH_ERR);
	EXPECT_EQ(f.wqe_counter, 2);
	EXPECT_FALSE(mlx5_qpn_cqe_is_sw_owned(ring[128 + 63], 2, 3));
	/* A CQ with a QP on it cannot be destroyed. */
	EXPECT_EQ(ops.cq_destroy(be_, &cq), -EBUSY);
	EXPECT_EQ(ops.dci_destroy(be_, &dci), 0);
	EXPECT_EQ(ops.dci_destroy(be_, &dci), -EINVAL); /* twice */
	EXPECT_EQ(ops.cq_destroy(be_, &cq), 0);
}

TEST_F(DcPath, DestroyPathsReturnEverything)
{
	auto st0 = stats();
	mlx5_qpn_cq *cq = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 5, &cq), 0);
	ASSERT_EQ(mlx5_qpn_dct_create(dev_, cq, KEY, &dct), 0);
	ASSERT_EQ(mlx5_qpn_dci_create(dev_, cq, 4, &dci), 0);
	auto st1 = stats();
	EXPECT_EQ(st1.qps_live, st0.qps_live + 2); /* DCI and DCT numbers are table QPs */
	EXPECT_EQ(st1.dc_cqs, 1u);

	mlx5_qpn_cq_destroy(cq); /* refused: QPs still use it */
	EXPECT_EQ(stats().dc_cqs, 1u);
	/* Posted, rung, never executed: destroying the DCI drops it. */
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci, ah_, mlx5_qpn_dct_qpn(dct), KEY, "q", 1, 1), 0);
	mlx5_qpn_dci_ring(dci);
	mlx5_qpn_dci_destroy(dci);
	EXPECT_EQ(mlx5_qpn_dev_service_run(dev_), 0);
	mlx5_qpn_dct_destroy(dct);
	mlx5_qpn_cq_destroy(cq);
	auto st2 = stats();
	EXPECT_EQ(st2.qps_live, st0.qps_live);
	EXPECT_EQ(st2.dc_cqs, 0u);
	EXPECT_EQ(st2.dc_dcis, 0u);
	EXPECT_EQ(st2.dc_dcts, 0u);
	EXPECT_EQ(st2.dc_wqes, 0u);
	mlx5_qpn_cq_destroy(nullptr);
	mlx5_qpn_dci_destroy(nullptr);
	mlx5_qpn_dct_destroy(nullptr);

	/* Many create/destroy rounds reuse the queue memory (no leak in the arena). */
	for (int i = 0; i < 200; i++) {
		/* The CQ covers every WQE of its DCI (mlx5_qpn_dci_create: -ENOSPC otherwise). */
		ASSERT_EQ(mlx5_qpn_cq_create(dev_, 12, &cq), 0) << i;
		ASSERT_EQ(mlx5_qpn_dci_create(dev_, cq, 12, &dci), 0) << i;
		mlx5_qpn_dci_destroy(dci);
		mlx5_qpn_cq_destroy(cq);
	}
	EXPECT_EQ(stats().dc_cqs, 0u);
}

/* A backend without a data path (the hardware one; here the emulated device with its data path
 * switched off) refuses with -EOPNOTSUPP. */
TEST_F(DcPath, BackendWithoutDataPathIsEopnotsupp)
{
	mlx5_qpn_cq *cq = nullptr;
	ASSERT_EQ(mlx5_qpn_cq_create(dev_, 4, &cq), 0);
	ASSERT_EQ(mlx5_qpn_sim_dc_enable(be_, 0), 0);
	mlx5_qpn_cq *cq2 = nullptr;
	mlx5_qpn_dci *dci = nullptr;
	mlx5_qpn_dct *dct = nullptr;
	EXPECT_EQ(mlx5_qpn_cq_create(dev_, 4, &cq2), -EOPNOTSUPP);
	EXPECT_EQ(mlx5_qpn_dci_create(dev_, cq, 4, &dci), -EOPNOTSUPP);
	EXPECT_EQ(mlx5_qpn_dct_create(dev_, cq, KEY, &dct), -EOPNOTSUPP);
	EXPECT_EQ(mlx5_qpn_dev_service_run(dev_), -EOPNOTSUPP);
	EXPECT_EQ(mlx5_qpn_sim_dc_enable(be_, 2), -EINVAL);
	ASSERT_EQ(mlx5_qpn_sim_dc_enable(be_, 1), 0);
	EXPECT_EQ(mlx5_qpn_dev_service_run(dev_), 0);
	mlx5_qpn_cq_destroy(cq);
	EXPECT_EQ(stats().dc_cqs, 0u);
}
