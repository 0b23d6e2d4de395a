/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A DCI's ERR state and its recovery on the emulated device: a SEND nobody answers (wrong DC
 * key, unknown DCT, an injected loss) times out with 0x15 on a later execution pass, the WQEs
 * behind it flush with 0x05, the DC layer sees the DCI in ERR and refuses new WQEs (-EIO);
 * mlx5_qpn_dci_recover() waits for every outstanding WQE (-EBUSY), then brings the DCI back
 * through RESET with its queue at counter 0, and a send to a valid DCT completes again. Also
 * the dc_err_every devarg and the path checks of the emulated device.
 */
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "common/mlx5_qpn_prm_wqe.h"
#include "mlx5_qpn.h"
#include "mlx5_qpn_dc.h"
#include "mlx5_qpn_dc_ops.h"
#include "mlx5_qpn_dev_internal.h"
#include "sim/mlx5_qpn_sim.h"

namespace {

constexpr uint64_t KEY = 0x0badc0ffee0ddf00ULL;

class DcRecover : public ::testing::Test {
protected:
	void SetUp() override { ASSERT_NO_FATAL_FAILURE(open("")); }
	void TearDown() override { close(); }

	void open(const char *extra)
	{
		static std::atomic<int> seq{0};
		char b[64];
		snprintf(b, sizeof(b), "simrc%dx%d", int(getpid()), seq.fetch_add(1));
		name_ = b;
		std::string args = name_ + ",quarantine_us=0" + extra;
		ASSERT_EQ(mlx5_qpn_dev_probe(args.c_str(), &dev_), 0);
		be_ = mlx5_qpn_dev_backend(dev_);
		mlx5_qpn_dc_addr a{};
		a.dlid = 1;
		ASSERT_EQ(mlx5_qpn_ah_create(dev_, &a, &ah_), 0);
		ASSERT_EQ(mlx5_qpn_cq_create(dev_, 5, &scq_), 0);
		ASSERT_EQ(mlx5_qpn_cq_create(dev_, 5, &rcq_), 0);
		ASSERT_EQ(mlx5_qpn_dct_create(dev_, rcq_, KEY, &dct_), 0);
		ASSERT_EQ(mlx5_qpn_dci_create(dev_, scq_, 3, &dci_), 0);
		dctn_ = mlx5_qpn_dct_qpn(dct_);
	}
	void close()
	{
		mlx5_qpn_dci_destroy(dci_);
		mlx5_qpn_dct_destroy(dct_);
		mlx5_qpn_cq_destroy(scq_);
		mlx5_qpn_cq_destroy(rcq_);
		mlx5_qpn_ah_destroy(ah_);
		mlx5_qpn_dev_close(dev_);
		mlx5_qpn_dev_purge(name_.c_str());
		dci_ = nullptr;
		dct_ = nullptr;
		scq_ = rcq_ = nullptr;
		ah_ = nullptr;
		dev_ = nullptr;
		be_ = nullptr;
	}

	mlx5_qpn_sim_stats stats()
	{
		mlx5_qpn_sim_stats st;
		EXPECT_EQ(mlx5_qpn_sim_stats_get(be_, &st), 0);
		return st;
	}

	/* Run the device and poll cq (at most `per_poll` CQEs a poll) until `want` arrived
	 * (bounded passes, no timing). */
	std::vector<mlx5_qpn_wc> drain(mlx5_qpn_cq *cq, size_t want, unsigned per_poll = 16)
	{
		std::vector<mlx5_qpn_wc> out;
		for (int pass = 0; pass < 1000 && out.size() < want; pass++) {
			EXPECT_GE(mlx5_qpn_dev_service_run(dev_), 0);
			mlx5_qpn_wc wc[16];
			unsigned n = std::min<unsigned>(per_poll, unsigned(want - out.size()));
			int k = mlx5_qpn_cq_poll(cq, wc, n);
			EXPECT_GE(k, 0);
			out.insert(out.end(), wc, wc + (k > 0 ? k : 0));
		}
		return out;
	}

	/* One SEND to the DCT with key, rung, and its requester completion. */
	mlx5_qpn_wc send_one(uint64_t key, uint64_t wr_id)
	{
		mlx5_qpn_wc w{};
		EXPECT_EQ(mlx5_qpn_dci_post_send(dci_, ah_, dctn_, key, "m", 1, wr_id), 0);
		mlx5_qpn_dci_ring(dci_);
		auto s = drain(scq_, 1);
		EXPECT_EQ(s.size(), 1u);
		if (!s.empty())
			w = s[0];
		return w;
	}

	std::string name_;
	mlx5_qpn_dev *dev_ = nullptr;
	mlx5_qpn_backend *be_ = nullptr;
	mlx5_qpn_ah *ah_ = nullptr;
	mlx5_qpn_cq *scq_ = nullptr, *rcq_ = nullptr;
	mlx5_qpn_dct *dct_ = nullptr;
	mlx5_qpn_dci *dci_ = nullptr;
	uint32_t dctn_ = 0;
};

} // namespace

/* A wrong DC key is dropped by the DCT (counted), not answered: the sender's WQE times out
 * with 0x15 on a later execution pass, never in the pass that sent it. */
TEST_F(DcRecover, WrongKeyIsDroppedAndTimesOutOnALaterPass)
{
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci_, ah_, dctn_, KEY ^ 1, "bad", 3, 11), 0);
	mlx5_qpn_dci_ring(dci_);
	EXPECT_EQ(mlx5_qpn_dev_service_run(dev_), 0); /* sent, no answer yet */
	auto st = stats();
	EXPECT_EQ(st.dc_dropped, 1u);
	EXPECT_EQ(st.dc_key_violations, 1u);
	EXPECT_EQ(st.dc_err_cqes, 0u);
	EXPECT_EQ(mlx5_qpn_dci_state(dci_), MLX5_QPN_DCI_READY);
	/* The poll runs the next execution step, a later pass: the retries ran out. */
	mlx5_qpn_wc wc[4];
	ASSERT_EQ(mlx5_qpn_cq_poll(scq_, wc, 4), 1);
	EXPECT_EQ(stats().dc_err_cqes, 1u);
	EXPECT_EQ(wc[0].opcode, MLX5_QPN_CQE_REQ_ERR);
	EXPECT_EQ(wc[0].syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY);
	EXPECT_EQ(wc[0].wr_id, 11u);
	EXPECT_EQ(mlx5_qpn_cq_poll(rcq_, wc, 4), 0); /* nothing delivered */
	EXPECT_EQ(mlx5_qpn_dci_state(dci_), MLX5_QPN_DCI_ERROR);
	EXPECT_STREQ(mlx5_qpn_wc_syndrome_str(wc[0].syndrome),
		     "transport retry counter exceeded (no answer from the target)");
}

/* The error CQE moves the DCI to ERR: the WQEs behind the failed one flush (0x05, their own
 * wr_ids, nothing delivered), and a new post is refused with -EIO. */
TEST_F(DcRecover, ErrorCqeMovesDciToErrAndLaterWqesFlush)
{
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci_, ah_, dctn_, KEY ^ 1, "bad", 3, 1), 0);
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci_, ah_, dctn_, KEY, "good", 4, 2), 0);
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci_, ah_, dctn_, KEY, "good", 4, 3), 0);
	mlx5_qpn_dci_ring(dci_);
	auto s = drain(scq_, 3);
	ASSERT_EQ(s.size(), 3u);
	EXPECT_EQ(s[0].syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY);
	EXPECT_EQ(s[0].wr_id, 1u);
	for (int i = 1; i < 3; i++) {
		EXPECT_EQ(s[i].opcode, MLX5_QPN_CQE_REQ_ERR);
		EXPECT_EQ(s[i].syndrome, MLX5_QPN_SYND_WR_FLUSH);
		EXPECT_EQ(s[i].wr_id, uint64_t(i + 1));
	}
	EXPECT_EQ(mlx5_qpn_dci_state(dci_), MLX5_QPN_DCI_ERROR);
	EXPECT_EQ(mlx5_qpn_dci_post_send(dci_, ah_, dctn_, KEY, "x", 1, 4), -EIO);
	mlx5_qpn_wc wc[4];
	EXPECT_EQ(mlx5_qpn_cq_poll(rcq_, wc, 4), 0);
	EXPECT_EQ(stats().dc_delivered, 0u);
	EXPECT_EQ(stats().dc_err_cqes, 3u);
}

/* Recovery: -EBUSY while WQEs posted before the error are outstanding; then RESET -> RTS, the
 * queue restarts at WQE counter 0, and a send to a valid DCT is delivered and completes. */
TEST_F(DcRecover, RecoverWaitsForOutstandingWqesThenSendsAgain)
{
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci_, ah_, dctn_, KEY ^ 1, "bad", 3, 1), 0);
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci_, ah_, dctn_, KEY, "good", 4, 2), 0);
	mlx5_qpn_dci_ring(dci_);
	auto s = drain(scq_, 1, 1); /* the error CQE alone */
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY);
	EXPECT_EQ(mlx5_qpn_dci_state(dci_), MLX5_QPN_DCI_ERROR);
	EXPECT_EQ(mlx5_qpn_dci_recover(dci_), -EBUSY); /* the flush of wr_id 2 is not polled */
	s = drain(scq_, 1);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].syndrome, MLX5_QPN_SYND_WR_FLUSH);
	EXPECT_EQ(s[0].wr_id, 2u);
	EXPECT_EQ(mlx5_qpn_dci_recover(dci_), 0);
	EXPECT_EQ(mlx5_qpn_dci_state(dci_), MLX5_QPN_DCI_READY);
	EXPECT_EQ(stats().dc_resets, 1u);

	mlx5_qpn_wc w = send_one(KEY, 77);
	EXPECT_EQ(w.opcode, MLX5_QPN_CQE_REQ);
	EXPECT_EQ(w.syndrome, 0);
	EXPECT_EQ(w.wr_id, 77u);
	EXPECT_EQ(w.wqe_counter, 0); /* the queue restarted, as after a hardware RESET */
	auto r = drain(rcq_, 1);
	ASSERT_EQ(r.size(), 1u);
	EXPECT_EQ(r[0].src_qpn, mlx5_qpn_dci_qpn(dci_));
	char buf[8] = {};
	EXPECT_EQ(mlx5_qpn_dct_read(dct_, r[0].wqe_counter, buf, sizeof(buf)), 1);
	EXPECT_EQ(buf[0], 'm');
	/* Many more, over the end of the send queue: the counters started over consistently. */
	for (uint64_t i = 0; i < 40; i++) {
		w = send_one(KEY, 100 + i);
		EXPECT_EQ(w.opcode, MLX5_QPN_CQE_REQ);
		EXPECT_EQ(w.wr_id, 100 + i);
		EXPECT_EQ(drain(rcq_, 1).size(), 1u);
	}
}

/* WQEs posted before the error but never rung: recover rings them (so that they flush and
 * complete exactly once) and answers -EBUSY until they are polled. */
TEST_F(DcRecover, RecoverRingsPostedWqesSoThatTheyFlush)
{
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci_, ah_, dctn_, KEY ^ 1, "bad", 3, 1), 0);
	mlx5_qpn_dci_ring(dci_);
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci_, ah_, dctn_, KEY, "late", 4, 2), 0); /* not rung */
	auto s = drain(scq_, 1);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].wr_id, 1u);
	EXPECT_EQ(mlx5_qpn_dci_recover(dci_), -EBUSY);
	s = drain(scq_, 1);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].syndrome, MLX5_QPN_SYND_WR_FLUSH);
	EXPECT_EQ(s[0].wr_id, 2u);
	EXPECT_EQ(mlx5_qpn_dci_recover(dci_), 0);
	EXPECT_EQ(send_one(KEY, 3).syndrome, 0);
	mlx5_qpn_wc wc[4];
	EXPECT_EQ(mlx5_qpn_cq_poll(scq_, wc, 4), 0); /* nothing completed twice */
}

/* The firmware refuses the recovery's MODIFY_QP (fault_fw_after: every command after the one
 * the error left the device at fails, as a ConnectX's modify can): recover gives the device's
 * error, the DCI stays in ERR with its queue as it was (posts refused, nothing completes twice,
 * no reset counted), a second attempt is refused the same way, and the DCI is destroyed
 * cleanly. The command count comes from the same sequence on a device without faults. */
TEST_F(DcRecover, RecoverRefusedByTheFirmwareLeavesTheDciInErr)
{
	auto to_err = [this] {
		EXPECT_EQ(mlx5_qpn_dci_post_send(dci_, ah_, dctn_, KEY ^ 1, "bad", 3, 1), 0);
		mlx5_qpn_dci_ring(dci_);
		EXPECT_EQ(drain(scq_, 1).size(), 1u);
		EXPECT_EQ(mlx5_qpn_dci_state(dci_), MLX5_QPN_DCI_ERROR);
	};
	to_err();
	const uint64_t cmds = stats().cmds_may_fail;
	close();
	ASSERT_NO_FATAL_FAILURE(open((",fault_fw_after=" + std::to_string(cmds)).c_str()));
	to_err();
	ASSERT_EQ(stats().cmds_may_fail, cmds);
	const uint64_t faults = stats().faults_injected;

	int rc = mlx5_qpn_dci_recover(dci_);
	EXPECT_LT(rc, 0);
	EXPECT_NE(rc, -EBUSY);
	EXPECT_EQ(stats().faults_injected, faults + 1);
	EXPECT_EQ(stats().dc_resets, 0u);
	EXPECT_EQ(mlx5_qpn_dci_state(dci_), MLX5_QPN_DCI_ERROR);
	EXPECT_EQ(mlx5_qpn_dci_post_send(dci_, ah_, dctn_, KEY, "x", 1, 2), -EIO);
	EXPECT_EQ(mlx5_qpn_dci_recover(dci_), rc);
	EXPECT_EQ(mlx5_qpn_dci_state(dci_), MLX5_QPN_DCI_ERROR);
	EXPECT_GE(mlx5_qpn_dev_service_run(dev_), 0);
	mlx5_qpn_wc wc[4];
	EXPECT_EQ(mlx5_qpn_cq_poll(scq_, wc, 4), 0); /* nothing completes twice */
	EXPECT_EQ(mlx5_qpn_cq_poll(rcq_, wc, 4), 0);
	EXPECT_EQ(stats().dc_delivered, 0u);
}

/* An unknown DCT (nobody answers) moves the DCI to ERR too; recovery brings it back. */
TEST_F(DcRecover, UnknownDctThenRecover)
{
	ASSERT_EQ(mlx5_qpn_dci_post_send(dci_, ah_, mlx5_qpn_dci_qpn(dci_), KEY, "x", 1, 5), 0);
	mlx5_qpn_dci_ring(dci_);
	auto s = drain(scq_, 1);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY);
	EXPECT_EQ(stats().dc_key_violations, 0u);
	EXPECT_EQ(mlx5_qpn_dci_state(dci_), MLX5_QPN_DCI_ERROR);
	ASSERT_EQ(mlx5_qpn_dci_recover(dci_), 0);
	EXPECT_EQ(send_one(KEY, 6).syndrome, 0);
	EXPECT_EQ(drain(rcq_, 1).size(), 1u);
}

TEST_F(DcRecover, RecoverOfAReadyDciDoesNothingAndNullIsRefused)
{
	EXPECT_EQ(mlx5_qpn_dci_recover(dci_), 0);
	EXPECT_EQ(stats().dc_resets, 0u);
	EXPECT_EQ(mlx5_qpn_dci_recover(nullptr), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dci_state(nullptr), -EINVAL);
	EXPECT_EQ(mlx5_qpn_dci_state(dci_), MLX5_QPN_DCI_READY);
	EXPECT_EQ(send_one(KEY, 1).syndrome, 0);
}

/* dc_err_every=3: every third SEND the device executes is lost (0x15 after its time-out) and
 * moves its DCI to ERR; the others are delivered. */
TEST_F(DcRecover, ErrEveryDevargLosesEveryNthSend)
{
	close();
	ASSERT_NO_FATAL_FAILURE(open(",dc_err_every=3"));
	int ok = 0, lost = 0;
	for (uint64_t i = 1; i <= 9; i++) {
		mlx5_qpn_wc w = send_one(KEY, i);
		if (i % 3 == 0) {
			EXPECT_EQ(w.syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY) << i;
			EXPECT_EQ(mlx5_qpn_dci_state(dci_), MLX5_QPN_DCI_ERROR);
			EXPECT_EQ(mlx5_qpn_dci_recover(dci_), 0);
			lost++;
		} else {
			EXPECT_EQ(w.syndrome, 0) << i;
			ok++;
		}
		EXPECT_EQ(w.wr_id, i);
	}
	EXPECT_EQ(ok, 6);
	EXPECT_EQ(lost, 3);
	auto st = stats();
	EXPECT_EQ(st.dc_faults, 3u);
	EXPECT_EQ(st.dc_sends, 9u);
	EXPECT_EQ(st.dc_delivered, 6u);
	EXPECT_EQ(drain(rcq_, 6).size(), 6u);
}

TEST_F(DcRecover, ErrEveryDevargIsRefusedWhenMalformed)
{
	for (const char *bad : {"dc_err_every=abc", "dc_err_every=-1", "dc_err_every=1000001",
				"dc_err_every=", "dc_err_every=3x"}) {
		std::string args = name_ + "b," + bad;
		mlx5_qpn_dev *d = nullptr;
		EXPECT_EQ(mlx5_qpn_dev_probe(args.c_str(), &d), -EINVAL) << bad;
		EXPECT_EQ(d, nullptr);
	}
	for (const char *good : {"dc_err_every=0", "dc_err_every=1000000", "dc_err_every=0x10"}) {
		std::string args = name_ + "g," + good;
		mlx5_qpn_dev *d = nullptr;
		EXPECT_EQ(mlx5_qpn_dev_probe(args.c_str(), &d), 0) << good;
		mlx5_qpn_dev_close(d);
		mlx5_qpn_dev_purge((name_ + "g").c_str());
	}
	char why[128];
	EXPECT_EQ(mlx5_qpn_devargs_check("ib=mlx5_0,dc_err_every=3", why, sizeof(why)), -EINVAL);
	mlx5_qpn_dev_purge((name_ + "b").c_str());
}

/* The emulated device checks a path as the kernel does for its InfiniBand ports (one GID,
 * index 0): never more lenient than a ConnectX. */
TEST_F(DcRecover, PathIsCheckedAsTheKernelChecksIt)
{
	mlx5_qpn_dc_path p{};
	p.port = 1;
	p.is_global = 1;
	p.sgid_index = 0;
	p.hop_limit = 64;
	p.sl = 3;
	p.path_mtu = 5;
	mlx5_qpn_dci *d = nullptr;
	mlx5_qpn_dct *t = nullptr;
	ASSERT_EQ(mlx5_qpn_dci_create_path(dev_, scq_, 2, &p, &d), 0);
	ASSERT_EQ(mlx5_qpn_dct_create_path(dev_, rcq_, KEY, &p, &t), 0);
	struct Bad {
		const char *what;
		void (*set)(mlx5_qpn_dc_path &);
	};
	const Bad bads[] = {
		{"port 2 of 1", [](mlx5_qpn_dc_path &x) { x.port = 2; }},
		{"sl 16", [](mlx5_qpn_dc_path &x) { x.sl = 16; }},
		{"path_mtu 6", [](mlx5_qpn_dc_path &x) { x.path_mtu = 6; }},
		{"static_rate 24", [](mlx5_qpn_dc_path &x) { x.static_rate = 24; }},
		{"sgid_index 1", [](mlx5_qpn_dc_path &x) { x.sgid_index = 1; }},
		{"flow_label 2^20", [](mlx5_qpn_dc_path &x) { x.flow_label = 1u << 20; }},
	};
	uint32_t dcis = stats().dc_dcis, dcts = stats().dc_dcts;
	for (const Bad &b : bads) {
		mlx5_qpn_dc_path q = p;
		b.set(q);
		mlx5_qpn_dci *bd = nullptr;
		mlx5_qpn_dct *bt = nullptr;
		EXPECT_EQ(mlx5_qpn_dci_create_path(dev_, scq_, 2, &q, &bd), -EINVAL) << b.what;
		EXPECT_EQ(mlx5_qpn_dct_create_path(dev_, rcq_, KEY, &q, &bt), -EINVAL) << b.what;
	}
	EXPECT_EQ(stats().dc_dcis, dcis); /* nothing made, nothing leaked */
	EXPECT_EQ(stats().dc_dcts, dcts);
	/* The pathed pair works, and the DCI recovers with its path. */
	ASSERT_EQ(mlx5_qpn_dci_post_send(d, ah_, mlx5_qpn_dct_qpn(t), KEY ^ 2, "k", 1, 1), 0);
	mlx5_qpn_dci_ring(d);
	ASSERT_EQ(drain(scq_, 1).size(), 1u);
	ASSERT_EQ(mlx5_qpn_dci_recover(d), 0);
	ASSERT_EQ(mlx5_qpn_dci_post_send(d, ah_, mlx5_qpn_dct_qpn(t), KEY, "k", 1, 2), 0);
	mlx5_qpn_dci_ring(d);
	auto s = drain(scq_, 1);
	ASSERT_EQ(s.size(), 1u);
	EXPECT_EQ(s[0].syndrome, 0);
	EXPECT_EQ(drain(rcq_, 1).size(), 1u);
	mlx5_qpn_dci_destroy(d);
	mlx5_qpn_dct_destroy(t);
}

/* dci_reset is a device command: another handle's DCI, or a stale handle, is refused. */
TEST_F(DcRecover, ResetCommandChecksTheHandle)
{
	const mlx5_qpn_dc_ops &ops = mlx5_qpn_sim_dc_ops;
	ASSERT_NE(ops.dci_reset, nullptr);
	mlx5_qpn_dc_dci_info bogus{};
	bogus.handle = 4095; /* a slot nobody of this handle owns */
	EXPECT_EQ(ops.dci_reset(be_, &bogus, nullptr), -EINVAL);
	EXPECT_EQ(ops.dci_reset(be_, nullptr, nullptr), -EINVAL);
	mlx5_qpn_dc_path bad{};
	bad.sl = 20;
	mlx5_qpn_dc_cq_info cq;
	mlx5_qpn_dc_dci_info di;
	ASSERT_EQ(ops.cq_create(be_, 3, &cq), 0);
	ASSERT_EQ(ops.dci_create(be_, &cq, 4, nullptr, &di), 0);
	EXPECT_EQ(ops.dci_reset(be_, &di, &bad), -EINVAL);
	EXPECT_EQ(ops.dci_reset(be_, &di, nullptr), 0);
	EXPECT_EQ(ops.dci_destroy(be_, &di), 0);
	EXPECT_EQ(ops.dci_reset(be_, &di, nullptr), -EINVAL); /* destroyed */
	EXPECT_EQ(ops.cq_destroy(be_, &cq), 0);
}
