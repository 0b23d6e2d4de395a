/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared-memory CM transport: queue round trip, drops (unknown GUID, full queue, frames left
 * for a previous owner), many sender threads and one receiver, the service directory, and two
 * processes: a fork()ed child that runs a whole CM connection (REQ/REP/RTU/DREQ/DREP) with its
 * parent, and a killed child whose node and directory entry are reclaimed.
 */
#include "cm_test_util.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace cmtest;

namespace {

uint64_t
mono_ns()
{
	return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
				std::chrono::steady_clock::now().time_since_epoch())
				.count());
}

/* A fabric name unique to this process and test; unlinked at the end. */
struct ShmFab {
	std::string name;
	mlx5_qpn_cm_shm_fabric *f = nullptr;
	int rc;
	ShmFab(const char *tag, unsigned nodes, unsigned slots)
	    : name(std::string("cmt") + std::to_string(getpid()) + "_" + tag)
	{
		mlx5_qpn_cm_shm_fabric_unlink(name.c_str());
		rc = mlx5_qpn_cm_shm_fabric_open(name.c_str(), nodes, slots, &f);
	}
	~ShmFab()
	{
		mlx5_qpn_cm_shm_fabric_close(f);
		mlx5_qpn_cm_shm_fabric_unlink(name.c_str());
	}
	operator mlx5_qpn_cm_shm_fabric *() const { return f; }
};

constexpr uint64_t kA = 0xA1, kB = 0xB2, kC = 0xC3, kSvc = 0x5e5e;

/* Child side of the fork test: returns the exit code (0 ok, other: which step failed). */
int
child_passive(const std::string &name, int ready_fd)
{
	mlx5_qpn_cm_shm_fabric *f = nullptr;
	if (mlx5_qpn_cm_shm_fabric_open(name.c_str(), 4, 64, &f) != 0)
		return 10;
	mlx5_qpn_cm_transport tp;
	if (mlx5_qpn_cm_shm_fabric_attach(f, kB, &tp) != 0)
		return 11;
	mlx5_qpn_cm_params p = params(kB);
	p.packet_life_time = 0; /* timewait of 1 ms */
	p.ack_delay = 0;
	p.transport = &tp;
	mlx5_qpn_cm *cm = mlx5_qpn_cm_create(&p);
	if (cm == nullptr || mlx5_qpn_cm_listen(cm, kSvc) != 0)
		return 12;
	mlx5_qpn_cm_shm_service svc{.service_id = kSvc,
				    .node_guid = kB,
				    .dc_key = 0x1234,
				    .dct_qpn = 0x777,
				    .pid = 0};
	if (mlx5_qpn_cm_shm_fabric_publish(f, &svc) != 0)
		return 13;
	char c = 'r';
	if (write(ready_fd, &c, 1) != 1)
		return 14;
	int rc = 20; /* no DISCONNECTED before the deadline */
	const uint64_t deadline = mono_ns() + 10'000'000'000ull;
	bool established = false;
	while (mono_ns() < deadline && rc == 20) {
		mlx5_qpn_cm_poll(cm, mono_ns());
		mlx5_qpn_cm_event ev;
		while (mlx5_qpn_cm_poll_event(cm, &ev) == 0) {
			if (ev.type == MLX5_QPN_CM_EVENT_REQ) {
				if (ev.remote_qpn != 0x100 || ev.remote_guid != kA ||
				    mlx5_qpn_cm_accept(cm, ev.conn_id, 0x200, nullptr, 0,
						       mono_ns()) != 0)
					rc = 21;
			} else if (ev.type == MLX5_QPN_CM_EVENT_ESTABLISHED) {
				established = true;
			} else if (ev.type == MLX5_QPN_CM_EVENT_DISCONNECTED) {
				rc = established ? 0 : 22;
			}
		}
	}
	/* Let the DREP go out (it was sent inside poll) and the parent read it. */
	mlx5_qpn_cm_destroy(cm);
	mlx5_qpn_cm_shm_fabric_close(f);
	return rc;
}

} // namespace

TEST(CmShm, RoundTripAndDrops)
{
	ShmFab fab("rt", 3, 4);
	ASSERT_EQ(fab.rc, 0);
	mlx5_qpn_cm_transport ta, tb, tc;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kA, &ta), 0);
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kB, &tb), 0);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kA, &tc), -EEXIST);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, 0, &tc), -EINVAL);
	uint8_t frame[MLX5_QPN_CM_FRAME_MAX];
	for (unsigned i = 0; i < sizeof(frame); i++)
		frame[i] = uint8_t(i * 7);
	/* Unknown GUID: dropped, counted, not blocking. */
	EXPECT_EQ(ta.send(ta.ctx, 0x99, frame, 10, 1), -EHOSTUNREACH);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_drops(fab), 1u);
	EXPECT_EQ(ta.send(ta.ctx, kB, frame, 0, 1), -EINVAL);
	EXPECT_EQ(ta.send(ta.ctx, kB, frame, MLX5_QPN_CM_FRAME_MAX + 1, 1), -EINVAL);
	/* A queue of 4 slots holds 4 frames; the fifth is a counted drop. */
	for (uint16_t i = 0; i < 4; i++) {
		frame[0] = uint8_t(i);
		EXPECT_EQ(ta.send(ta.ctx, kB, frame, uint16_t(MLX5_QPN_CM_FRAME_MAX - i), 1), 0);
	}
	EXPECT_EQ(ta.send(ta.ctx, kB, frame, 8, 1), -ENOBUFS);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_drops(fab), 2u);
	mlx5_qpn_cm_frame got[8];
	ASSERT_EQ(tb.recv_burst(tb.ctx, got, 3), 3);
	for (unsigned i = 0; i < 3; i++) {
		EXPECT_EQ(got[i].src_guid, kA);
		EXPECT_EQ(got[i].len, MLX5_QPN_CM_FRAME_MAX - i);
		EXPECT_EQ(got[i].data[0], i);
		EXPECT_EQ(got[i].data[200], uint8_t(200 * 7));
	}
	/* Wraps around: the ring keeps going after the first lap. */
	for (unsigned lap = 0; lap < 10; lap++) {
		frame[0] = uint8_t(100 + lap);
		ASSERT_EQ(ta.send(ta.ctx, kB, frame, 4, 1), 0);
		ASSERT_EQ(tb.recv_burst(tb.ctx, got, 1), 1);
	}
	EXPECT_EQ(tb.recv_burst(tb.ctx, got, 8), 1);
	EXPECT_EQ(got[0].data[0], 109);
	EXPECT_EQ(tb.recv_burst(tb.ctx, got, 8), 0);
	/* The last node slot, then no more. */
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kC, &tc), 0);
	mlx5_qpn_cm_transport td;
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, 0xD4, &td), -ENOSPC);
	/* Frames left for a detached node are not delivered to the next owner of its slot. */
	ASSERT_EQ(ta.send(ta.ctx, kC, frame, 4, 1), 0);
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_detach(fab, kC), 0);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_detach(fab, kC), -ENOENT);
	EXPECT_EQ(tc.send(tc.ctx, kA, frame, 4, 1), -ENOTCONN);
	EXPECT_EQ(tc.recv_burst(tc.ctx, got, 8), -ENOTCONN);
	EXPECT_EQ(ta.send(ta.ctx, kC, frame, 4, 1), -EHOSTUNREACH);
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, 0xD4, &td), 0);
	uint64_t drops = mlx5_qpn_cm_shm_fabric_drops(fab);
	EXPECT_EQ(td.recv_burst(td.ctx, got, 8), 0);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_drops(fab), drops + 1);
}

TEST(CmShm, OpenArguments)
{
	mlx5_qpn_cm_shm_fabric *f = nullptr;
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_open(nullptr, 2, 4, &f), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_open("", 2, 4, &f), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_open("a/b", 2, 4, &f), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_open("x", 0, 4, &f), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_open("x", 65, 4, &f), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_open("x", 2, 6, &f), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_open("x", 2, 1, &f), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_open("x", 2, 4, nullptr), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_open(std::string(33, 'n').c_str(), 2, 4, &f), -EINVAL);
	EXPECT_EQ(f, nullptr);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_unlink("a/b"), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_unlink("cmt_never_created"), -ENOENT);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_attach(nullptr, kA, nullptr), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_lookup(nullptr, kSvc, nullptr, 0), -EINVAL);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_drops(nullptr), 0u);
	mlx5_qpn_cm_shm_fabric_close(nullptr);

	/* A second handle on the same name sees the first one's geometry and nodes. */
	ShmFab fab("geo", 2, 8);
	ASSERT_EQ(fab.rc, 0);
	mlx5_qpn_cm_transport ta, tb;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kA, &ta), 0);
	mlx5_qpn_cm_shm_fabric *g = nullptr;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_open(fab.name.c_str(), 64, 1024, &g), 0);
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(g, kB, &tb), 0);
	mlx5_qpn_cm_transport tc;
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_attach(g, kC, &tc), -ENOSPC) << "creator's 2 nodes win";
	uint8_t frame[4] = {9, 8, 7, 6};
	for (int i = 0; i < 8; i++)
		EXPECT_EQ(tb.send(tb.ctx, kA, frame, 4, 1), 0);
	EXPECT_EQ(tb.send(tb.ctx, kA, frame, 4, 1), -ENOBUFS) << "creator's 8 slots win";
	mlx5_qpn_cm_frame got[8];
	EXPECT_EQ(ta.recv_burst(ta.ctx, got, 8), 8);
	EXPECT_EQ(got[7].src_guid, kB);
	mlx5_qpn_cm_shm_fabric_close(g);
	/* Closing g detached kB. */
	EXPECT_EQ(ta.send(ta.ctx, kB, frame, 4, 1), -EHOSTUNREACH);
}

TEST(CmShm, ServiceDirectory)
{
	ShmFab fab("dir", 4, 4);
	ASSERT_EQ(fab.rc, 0);
	mlx5_qpn_cm_transport ta, tb;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kA, &ta), 0);
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kB, &tb), 0);
	mlx5_qpn_cm_shm_service out[4];
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_lookup(fab, kSvc, out, 4), 0);
	mlx5_qpn_cm_shm_service s{.service_id = kSvc,
				  .node_guid = kA,
				  .dc_key = 0xDC,
				  .dct_qpn = 0x123,
				  .pid = 0};
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_publish(fab, nullptr), -EINVAL);
	mlx5_qpn_cm_shm_service foreign{.service_id = kSvc,
					.node_guid = 0x77,
					.dc_key = 0,
					.dct_qpn = 0,
					.pid = 0};
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_publish(fab, &foreign), -ENOENT);
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_publish(fab, &s), 0);
	s.node_guid = kB;
	s.dct_qpn = 0x124;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_publish(fab, &s), 0);
	s.service_id = kSvc + 1;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_publish(fab, &s), 0);
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_lookup(fab, kSvc, out, 4), 2);
	EXPECT_EQ(out[0].node_guid, kA);
	EXPECT_EQ(out[0].dct_qpn, 0x123u);
	EXPECT_EQ(out[0].dc_key, 0xDCu);
	EXPECT_EQ(out[0].pid, getpid());
	EXPECT_EQ(out[1].node_guid, kB);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_lookup(fab, kSvc, out, 1), 1);
	/* Detach withdraws the node's entries. */
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_detach(fab, kB), 0);
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_lookup(fab, kSvc, out, 4), 1);
	EXPECT_EQ(out[0].node_guid, kA);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_lookup(fab, kSvc + 1, out, 4), 0);
	/* The directory is bounded. */
	s.node_guid = kA;
	int rc = 0, n = 0;
	while ((rc = mlx5_qpn_cm_shm_fabric_publish(fab, &s)) == 0)
		n++;
	EXPECT_EQ(rc, -ENOSPC);
	EXPECT_EQ(n, MLX5_QPN_CM_SHM_MAX_SERVICES - 1);
}

/* The 2.1 ABI's names of the fabric's calls and of the directory's DCT field stay usable for
 * one ABI: each is the same function as its successor, and a caller of the old names gets what
 * a caller of the new ones gets. */
TEST(CmShm, DeprecatedNamesAreTheSameFunctions)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	EXPECT_EQ(&mlx5_qpn_cm_shm_attach, &mlx5_qpn_cm_shm_fabric_attach);
	EXPECT_EQ(&mlx5_qpn_cm_shm_detach, &mlx5_qpn_cm_shm_fabric_detach);
	EXPECT_EQ(&mlx5_qpn_cm_shm_drops, &mlx5_qpn_cm_shm_fabric_drops);
	EXPECT_EQ(&mlx5_qpn_cm_shm_publish, &mlx5_qpn_cm_shm_fabric_publish);
	EXPECT_EQ(&mlx5_qpn_cm_shm_lookup, &mlx5_qpn_cm_shm_fabric_lookup);
	EXPECT_EQ(&mlx5_qpn_cm_shm_unlink, &mlx5_qpn_cm_shm_fabric_unlink);
	ShmFab fab("old", 4, 4);
	ASSERT_EQ(fab.rc, 0);
	mlx5_qpn_cm_transport tp;
	ASSERT_EQ(mlx5_qpn_cm_shm_attach(fab, kA, &tp), 0);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kA, &tp), -EEXIST);
	mlx5_qpn_cm_shm_service s{};
	s.service_id = kSvc;
	s.node_guid = kA;
	s.dct_number = 0x321;
	EXPECT_EQ(s.dct_qpn, 0x321u);
	ASSERT_EQ(mlx5_qpn_cm_shm_publish(fab, &s), 0);
	mlx5_qpn_cm_shm_service out[2];
	ASSERT_EQ(mlx5_qpn_cm_shm_lookup(fab, kSvc, out, 2), 1);
	EXPECT_EQ(out[0].dct_qpn, 0x321u);
	EXPECT_EQ(out[0].dct_number, 0x321u);
	EXPECT_EQ(mlx5_qpn_cm_shm_drops(fab), mlx5_qpn_cm_shm_fabric_drops(fab));
	ASSERT_EQ(mlx5_qpn_cm_shm_detach(fab, kA), 0);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_detach(fab, kA), -ENOENT);
	EXPECT_EQ(mlx5_qpn_cm_shm_unlink(fab.name.c_str()), 0);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_unlink(fab.name.c_str()), -ENOENT);
#pragma GCC diagnostic pop
}

TEST(CmShm, ManySenderThreadsOneReceiver)
{
	constexpr unsigned kSenders = 4, kPerSender = 5000;
	ShmFab fab("mpsc", kSenders + 1, 64);
	ASSERT_EQ(fab.rc, 0);
	mlx5_qpn_cm_transport rx;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, 0x100, &rx), 0);
	mlx5_qpn_cm_transport tx[kSenders];
	for (unsigned i = 0; i < kSenders; i++) {
		ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, 0x200 + i, &tx[i]), 0);
	}
	std::atomic<uint64_t> full{0};
	std::vector<std::thread> th;
	for (unsigned i = 0; i < kSenders; i++)
		th.emplace_back([&, i] {
			uint8_t f[8];
			for (unsigned k = 0; k < kPerSender; k++) {
				std::memcpy(f, &k, sizeof(k));
				std::memcpy(f + 4, &i, sizeof(i));
				/* A full queue is a drop; retry, the receiver drains concurrently. */
				while (tx[i].send(tx[i].ctx, 0x100, f, sizeof(f), 1) != 0) {
					full.fetch_add(1, std::memory_order_relaxed);
					std::this_thread::yield();
				}
			}
		});
	std::vector<unsigned> next(kSenders, 0);
	uint64_t got = 0;
	mlx5_qpn_cm_frame fr[32];
	bool order_ok = true;
	const uint64_t deadline = mono_ns() + 20'000'000'000ull;
	while (got < uint64_t(kSenders) * kPerSender && mono_ns() < deadline) {
		int n = rx.recv_burst(rx.ctx, fr, 32);
		ASSERT_GE(n, 0);
		for (int j = 0; j < n; j++) {
			unsigned k, i;
			std::memcpy(&k, fr[j].data, sizeof(k));
			std::memcpy(&i, fr[j].data + 4, sizeof(i));
			ASSERT_LT(i, kSenders);
			order_ok &= fr[j].src_guid == 0x200 + i && k == next[i] && fr[j].len == 8;
			next[i] = k + 1;
		}
		got += uint64_t(n);
		if (n == 0)
			std::this_thread::yield();
	}
	for (auto &t : th)
		t.join();
	EXPECT_TRUE(order_ok) << "per sender: in order, each frame exactly once";
	EXPECT_EQ(got, uint64_t(kSenders) * kPerSender);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_drops(fab), full.load()) << "every refused send counted";
	EXPECT_EQ(rx.recv_burst(rx.ctx, fr, 32), 0);
}

/* A fork()ed child is the passive node: a whole connection across two processes. */
TEST(CmShm, ForkedChildFullConnection)
{
	ShmFab fab("fork", 4, 64);
	ASSERT_EQ(fab.rc, 0);
	mlx5_qpn_cm_transport ta;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kA, &ta), 0);
	int pfd[2];
	ASSERT_EQ(pipe(pfd), 0);
	fflush(nullptr);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(pfd[0]);
		_exit(child_passive(fab.name, pfd[1]));
	}
	close(pfd[1]);
	char c = 0;
	ASSERT_EQ(read(pfd[0], &c, 1), 1) << "child did not get ready";
	close(pfd[0]);
	/* The active side learns the passive node from the directory. */
	mlx5_qpn_cm_shm_service svc[2];
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_lookup(fab, kSvc, svc, 2), 1);
	EXPECT_EQ(svc[0].node_guid, kB);
	EXPECT_EQ(svc[0].pid, pid);
	EXPECT_EQ(svc[0].dct_qpn, 0x777u);

	mlx5_qpn_cm_params p = params(kA);
	p.packet_life_time = 0;
	p.ack_delay = 0;
	p.transport = &ta;
	AgentPtr a(p);
	ASSERT_NE(a.cm, nullptr);
	uint32_t cid;
	ASSERT_EQ(mlx5_qpn_cm_connect(a, svc[0].node_guid, kSvc, 0x100, nullptr, 0, mono_ns(),
				      &cid),
		  0);
	bool established = false, disconnected = false;
	uint32_t remote_qpn = 0;
	const uint64_t deadline = mono_ns() + 10'000'000'000ull;
	while (!disconnected && mono_ns() < deadline) {
		mlx5_qpn_cm_poll(a, mono_ns());
		mlx5_qpn_cm_event ev;
		while (mlx5_qpn_cm_poll_event(a, &ev) == 0) {
			if (ev.type == MLX5_QPN_CM_EVENT_ESTABLISHED) {
				established = true;
				remote_qpn = ev.remote_qpn;
				EXPECT_EQ(mlx5_qpn_cm_disconnect(a, cid, mono_ns()), 0);
			} else if (ev.type == MLX5_QPN_CM_EVENT_DISCONNECTED) {
				disconnected = true;
			} else if (ev.type == MLX5_QPN_CM_EVENT_REJECTED) {
				ADD_FAILURE() << "rejected, reason " << ev.reason;
				disconnected = true;
			}
		}
	}
	int st = 0;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	EXPECT_TRUE(established);
	EXPECT_TRUE(disconnected);
	EXPECT_EQ(remote_qpn, 0x200u);
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(WEXITSTATUS(st), 0) << "child failed at step " << WEXITSTATUS(st);
	mlx5_qpn_cm_stats s = stats(a);
	EXPECT_EQ(s.tx[MLX5_QPN_CM_MSG_REQ - 0x10], 1u);
	EXPECT_EQ(s.rx[MLX5_QPN_CM_MSG_REP - 0x10], 1u);
	EXPECT_EQ(s.tx[MLX5_QPN_CM_MSG_RTU - 0x10], 1u);
	EXPECT_EQ(s.tx[MLX5_QPN_CM_MSG_DREQ - 0x10], 1u);
	EXPECT_EQ(s.rx[MLX5_QPN_CM_MSG_DREP - 0x10], 1u);
}

/* A killed child's node (and its directory entry) are reclaimed; while it lives they are not. */
TEST(CmShm, KilledChildNodeReclaimed)
{
	ShmFab fab("kill", 2, 8);
	ASSERT_EQ(fab.rc, 0);
	mlx5_qpn_cm_transport ta;
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kA, &ta), 0);
	int pfd[2];
	ASSERT_EQ(pipe(pfd), 0);
	fflush(nullptr);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(pfd[0]);
		mlx5_qpn_cm_shm_fabric *f = nullptr;
		mlx5_qpn_cm_transport tp;
		char c = 'x';
		if (mlx5_qpn_cm_shm_fabric_open(fab.name.c_str(), 2, 8, &f) == 0 &&
		    mlx5_qpn_cm_shm_fabric_attach(f, kB, &tp) == 0) {
			mlx5_qpn_cm_shm_service s{.service_id = kSvc,
						  .node_guid = kB,
						  .dc_key = 1,
						  .dct_qpn = 2,
						  .pid = 0};
			if (mlx5_qpn_cm_shm_fabric_publish(f, &s) == 0)
				c = 'r';
		}
		if (write(pfd[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(pfd[1]);
	char c = 0;
	ASSERT_EQ(read(pfd[0], &c, 1), 1);
	close(pfd[0]);
	EXPECT_EQ(c, 'r');
	mlx5_qpn_cm_shm_service out[2];
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_lookup(fab, kSvc, out, 2), 1);
	mlx5_qpn_cm_transport tb, tc;
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kB, &tb), -EEXIST) << "owner alive";
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kC, &tc), -ENOSPC) << "both nodes in use";
	uint8_t frame[4] = {1, 2, 3, 4};
	EXPECT_EQ(ta.send(ta.ctx, kB, frame, 4, 1), 0); /* queued for the child, never read */
	ASSERT_EQ(kill(pid, SIGKILL), 0);
	int st;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_lookup(fab, kSvc, out, 2), 0) << "dead publisher ignored";
	/* A new GUID takes the dead child's slot; the frame left for the child is not delivered. */
	ASSERT_EQ(mlx5_qpn_cm_shm_fabric_attach(fab, kC, &tc), 0);
	mlx5_qpn_cm_frame got[4];
	uint64_t drops = mlx5_qpn_cm_shm_fabric_drops(fab);
	EXPECT_EQ(tc.recv_burst(tc.ctx, got, 4), 0);
	EXPECT_EQ(mlx5_qpn_cm_shm_fabric_drops(fab), drops + 1);
	EXPECT_EQ(ta.send(ta.ctx, kB, frame, 4, 1), -EHOSTUNREACH);
	ASSERT_EQ(ta.send(ta.ctx, kC, frame, 4, 1), 0);
	ASSERT_EQ(tc.recv_burst(tc.ctx, got, 4), 1);
	EXPECT_EQ(got[0].src_guid, kA);
	EXPECT_EQ(got[0].data[3], 4);
}
