/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd's DCI handling (app/qpn-testpmd/dc_dci.h) on the emulated device, which models
 * the ConnectX's DCI error state: an unanswered SEND completes with retry-exceeded (0x15), the
 * DCI goes to ERR and the WQEs behind it complete flushed (0x05). The app posts nothing while
 * the DCI is in ERR, recovers it once nothing is outstanding, and sends again.
 */
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "../app/qpn-testpmd/dc_dci.h"
#include "../app/qpn-testpmd/testpmd.h"
#include "mlx5_qpn_dc.h"
#include "mlx5_qpn.h"
#include "mlx5_qpn_dev_internal.h"
#include "sim/mlx5_qpn_sim.h"

/* The app's log type (main.cpp defines it in qpn-testpmd). */
int qpn_app_logtype = RTE_LOGTYPE_USER1;

namespace {

constexpr uint64_t KEY = 0x5150'4e44'434b'4559ull;

class TestpmdDci : public ::testing::Test {
protected:
	void SetUp() override { ASSERT_NO_FATAL_FAILURE(open("")); }
	void TearDown() override { close(); }

	void open(const std::string &extra)
	{
		static std::atomic<int> seq{0};
		char b[64];
		snprintf(b, sizeof(b), "simad%dx%d", int(getpid()), seq.fetch_add(1));
		name_ = b;
		ASSERT_EQ(mlx5_qpn_dev_probe((name_ + ",quarantine_us=0" + extra).c_str(), &dev_),
			  0);
		mlx5_qpn_dc_addr a{};
		a.dlid = 1;
		ASSERT_EQ(mlx5_qpn_ah_create(dev_, &a, &ah_), 0);
		/* The DCI's CQ takes all its WQEs (mlx5_qpn_dci_create: -ENOSPC otherwise). */
		ASSERT_EQ(mlx5_qpn_cq_create(dev_, kDciLogSq, &d_.cq), 0);
		ASSERT_EQ(mlx5_qpn_cq_create(dev_, 5, &rcq_), 0);
		ASSERT_EQ(mlx5_qpn_dct_create(dev_, rcq_, KEY, &dct_), 0);
		ASSERT_EQ(app_dci_create(d_, dev_, nullptr), 0);
		dctn_ = mlx5_qpn_dct_qpn(dct_);
	}

	void close()
	{
		mlx5_qpn_dci_destroy(d_.dci);
		mlx5_qpn_dct_destroy(dct_);
		mlx5_qpn_cq_destroy(d_.cq);
		mlx5_qpn_cq_destroy(rcq_);
		mlx5_qpn_ah_destroy(ah_);
		mlx5_qpn_dev_close(dev_);
		mlx5_qpn_dev_purge(name_.c_str());
		d_ = app_dci{};
		dct_ = nullptr;
		rcq_ = nullptr;
		ah_ = nullptr;
		dev_ = nullptr;
		st_ = std::make_unique<lcore_stats>();
		refused_in_err_ = 0;
	}

	/* The firmware commands that may fail (creates and modifies) the device has run so far:
	 * right after open(), and still when a SEND has taken the DCI to ERR (the data path runs
	 * no command), so the recovery's modify is the next one. The sequence is the same on
	 * every device of these keys. */
	uint64_t cmds_before_recovery()
	{
		mlx5_qpn_sim_stats st;
		EXPECT_EQ(mlx5_qpn_sim_stats_get(mlx5_qpn_dev_backend(dev_), &st), 0);
		return st.cmds_may_fail;
	}

	/* One wrong-key SEND: its error CQE, and with it the recovery (or its refusal). */
	void fail_one_send()
	{
		ASSERT_EQ(app_dci_send(d_, ah_, dctn_, KEY ^ 1, 1), 0);
		mlx5_qpn_dci_ring(d_.dci);
		std::vector<qpn_conn_event> ev = drain(1);
		ASSERT_EQ(ev.size(), 1u);
		EXPECT_TRUE(ev[0].error);
		EXPECT_EQ(d_.outstanding, 0u);
	}

	/* Run the device and take completions one per poll until WANT arrived (bounded passes);
	 * while the DCI is in ERR, a send must be refused with -EAGAIN and post nothing. */
	std::vector<qpn_conn_event> drain(size_t want)
	{
		std::vector<qpn_conn_event> out;
		for (int pass = 0; pass < 1000 && out.size() < want; pass++) {
			EXPECT_GE(mlx5_qpn_dev_service_run(dev_), 0);
			qpn_conn_event ev[1];
			unsigned n = app_dci_completions(d_, ev, 1, *st_, 1);
			out.insert(out.end(), ev, ev + n);
			if (mlx5_qpn_dci_state(d_.dci) == MLX5_QPN_DCI_ERROR) {
				uint32_t before = d_.outstanding;
				EXPECT_EQ(app_dci_send(d_, ah_, dctn_, KEY, 99), -EAGAIN);
				EXPECT_EQ(d_.outstanding, before);
				refused_in_err_++;
			}
		}
		return out;
	}

	std::string name_;
	mlx5_qpn_dev *dev_ = nullptr;
	mlx5_qpn_ah *ah_ = nullptr;
	mlx5_qpn_cq *rcq_ = nullptr;
	mlx5_qpn_dct *dct_ = nullptr;
	uint32_t dctn_ = 0;
	app_dci d_;
	std::unique_ptr<lcore_stats> st_ = std::make_unique<lcore_stats>();
	int refused_in_err_ = 0;
};

} // namespace

TEST_F(TestpmdDci, ErrorThenFlushedThenRecoveredAndSendingAgain)
{
	/* The second SEND carries a wrong DC key: the DCT drops it, the sender times out. */
	ASSERT_EQ(app_dci_send(d_, ah_, dctn_, KEY, 1), 0);
	ASSERT_EQ(app_dci_send(d_, ah_, dctn_, KEY ^ 1, 2), 0);
	ASSERT_EQ(app_dci_send(d_, ah_, dctn_, KEY, 3), 0);
	ASSERT_EQ(app_dci_send(d_, ah_, dctn_, KEY, 4), 0);
	EXPECT_EQ(d_.outstanding, 4u);
	mlx5_qpn_dci_ring(d_.dci);
	std::vector<qpn_conn_event> ev = drain(4);
	ASSERT_EQ(ev.size(), 4u);
	EXPECT_EQ(ev[0].wr_id, 1u);
	EXPECT_FALSE(ev[0].error);
	EXPECT_EQ(ev[1].wr_id, 2u);
	EXPECT_TRUE(ev[1].error);
	EXPECT_EQ(ev[1].syndrome, MLX5_QPN_SYND_TRANSPORT_RETRY);
	for (int i : {2, 3}) {
		EXPECT_EQ(ev[i].wr_id, uint64_t(i + 1));
		EXPECT_TRUE(ev[i].error);
		EXPECT_EQ(ev[i].syndrome, MLX5_QPN_SYND_WR_FLUSH) << i;
	}
	/* In ERR while the flushed ones were outstanding: sends refused, nothing posted. */
	EXPECT_GE(refused_in_err_, 1);
	EXPECT_EQ(d_.outstanding, 0u);
	/* Recovered once nothing was outstanding, in the poll that took the last one. */
	EXPECT_EQ(st_->dci_recoveries.load(), 1u);
	EXPECT_EQ(mlx5_qpn_dci_state(d_.dci), MLX5_QPN_DCI_READY);
	EXPECT_FALSE(d_.dead);

	/* Later sends go through. */
	ASSERT_EQ(app_dci_send(d_, ah_, dctn_, KEY, 5), 0);
	mlx5_qpn_dci_ring(d_.dci);
	ev = drain(1);
	ASSERT_EQ(ev.size(), 1u);
	EXPECT_EQ(ev[0].wr_id, 5u);
	EXPECT_FALSE(ev[0].error);
	EXPECT_EQ(ev[0].syndrome, 0);
	EXPECT_EQ(st_->dci_recoveries.load(), 1u);
	EXPECT_EQ(st_->errors.load(), 0u);
}

TEST_F(TestpmdDci, NoDciIsNotConnected)
{
	app_dci none;
	EXPECT_EQ(app_dci_send(none, ah_, dctn_, KEY, 1), -ENOTCONN);
	qpn_conn_event ev[1];
	EXPECT_EQ(app_dci_completions(none, ev, 1, *st_, 1), 0u);
}

/* The device refuses the recovery's modify (fault_fw_rate: the next create or modify fails, the
 * one after it does not): the DCI is replaced by a new one on the same CQ, counted, and sends
 * go through it; nothing is counted as an error. */
TEST_F(TestpmdDci, RefusedRecoveryReplacesTheDci)
{
	/* Count the commands up to the recovery, then the same on a device that refuses it. */
	const uint64_t n = cmds_before_recovery();
	close();
	ASSERT_NO_FATAL_FAILURE(open(",fault_fw_rate=" + std::to_string(n + 1)));
	const uint32_t old_qpn = mlx5_qpn_dci_qpn(d_.dci);
	ASSERT_NO_FATAL_FAILURE(fail_one_send());
	EXPECT_EQ(st_->dci_recoveries.load(), 0u);
	EXPECT_EQ(st_->dci_replaced.load(), 1u);
	EXPECT_EQ(st_->errors.load(), 0u);
	EXPECT_FALSE(d_.dead);
	ASSERT_NE(d_.dci, nullptr);
	EXPECT_NE(mlx5_qpn_dci_qpn(d_.dci), old_qpn);
	EXPECT_EQ(mlx5_qpn_dci_state(d_.dci), MLX5_QPN_DCI_READY);
	ASSERT_EQ(app_dci_send(d_, ah_, dctn_, KEY, 2), 0);
	mlx5_qpn_dci_ring(d_.dci);
	std::vector<qpn_conn_event> ev = drain(1);
	ASSERT_EQ(ev.size(), 1u);
	EXPECT_EQ(ev[0].wr_id, 2u);
	EXPECT_FALSE(ev[0].error);
}

/* Recovery and replacement both refused (fault_fw_after: every create or modify from the
 * recovery on fails): the DCI is dead, its sends -EIO, one error counted. */
TEST_F(TestpmdDci, RefusedRecoveryAndReplacementLeaveTheDciDead)
{
	const uint64_t n = cmds_before_recovery();
	close();
	ASSERT_NO_FATAL_FAILURE(open(",fault_fw_after=" + std::to_string(n)));
	ASSERT_NO_FATAL_FAILURE(fail_one_send());
	EXPECT_EQ(st_->dci_replaced.load(), 0u);
	EXPECT_EQ(st_->errors.load(), 1u);
	EXPECT_TRUE(d_.dead);
	EXPECT_EQ(app_dci_send(d_, ah_, dctn_, KEY, 2), -EIO);
	qpn_conn_event ev[1];
	EXPECT_EQ(app_dci_completions(d_, ev, 1, *st_, 1), 0u);
}
