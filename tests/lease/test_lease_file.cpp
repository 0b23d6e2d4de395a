/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The lease file on its own (drivers/mlx5_qpn/lease): held and cooling entries, the max of the
 * quarantines, deaths noticed (a dead pid, and a live pid with another start time: PID reuse),
 * expiry and removal of the file, a full table, a holder that died inside an update, and
 * corrupted files (random bytes, bad counts, bad entries, garbage mutex) refused with one line.
 * Times are checked as orderings against clock reads taken outside the calls.
 */
#include <gtest/gtest.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rte_log.h>

#include "lease/mlx5_qpn_lease.h"
#include "mlx5_qpn_pool.h"
#include "qpn_shm.h"

using namespace qpn;
using lease::Lease;

namespace {

constexpr uint64_t kSec = 1000000000ull;
constexpr uint64_t kGuid = 0x0002c90300abcdefull;

struct LeaseName {
	char name[64];
	LeaseName()
	{
		static int seq;
		snprintf(name, sizeof(name), "/mlx5_qpn_lease_t%d_%d", int(getpid()), seq++);
	}
	~LeaseName() { shm_unlink(name); }
};

/* Map the file directly, as another (possibly buggy) process of ours would. */
struct Raw {
	int fd = -1;
	lease::Layout *l = nullptr;
	size_t size = 0;
	explicit Raw(const char *name, size_t sz = sizeof(lease::Layout))
	{
		fd = shm_open(name, O_RDWR, 0);
		if (fd < 0)
			return;
		size = sz;
		void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED)
			l = static_cast<lease::Layout *>(p);
	}
	~Raw()
	{
		if (l != nullptr)
			munmap(l, size);
		if (fd >= 0)
			close(fd);
	}
};

/* Capture the driver's log lines while alive. */
struct LogCapture {
	char *buf = nullptr;
	size_t len = 0;
	FILE *f;
	FILE *old;
	LogCapture()
	{
		old = rte_log_get_stream();
		f = open_memstream(&buf, &len);
		rte_openlog_stream(f);
	}
	std::string text()
	{
		fflush(f);
		return std::string(buf, len);
	}
	~LogCapture()
	{
		rte_openlog_stream(old == stderr ? nullptr : old);
		fclose(f);
		free(buf);
	}
};

int
count_lines(const std::string &s, const char *needle)
{
	int n = 0;
	for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1))
		n++;
	return n;
}

} // namespace

TEST(LeaseFile, HeldThenCoolingFromClose)
{
	LeaseName n;
	Lease a, b;
	ASSERT_EQ(a.open_named(n.name, kGuid, 1, 1 * kSec), 0);
	uint64_t until = 1;
	ASSERT_EQ(a.acquire(64, 6, &until), 0);
	EXPECT_EQ(until, 0u); /* nothing cooling there */
	ASSERT_EQ(b.open_named(n.name, kGuid, 2, 0), 0);
	/* Held by a live process: not cooling, but not ours either (postponed, rechecked). */
	ASSERT_EQ(b.check(64, 64, &until), 0);
	EXPECT_NE(until, 0u);
	lease::Stats st;
	ASSERT_EQ(b.stats(&st), 0);
	EXPECT_EQ(st.held, 1u);
	EXPECT_EQ(st.users, 2u);

	uint64_t t_close = mlx5_qpn_clock_ns();
	ASSERT_EQ(a.release_all(), 0);
	ASSERT_EQ(b.check(96, 1, &until), 0); /* any overlap counts */
	EXPECT_GE(until, t_close + 1 * kSec);
	ASSERT_EQ(b.check(128, 64, &until), 0); /* no overlap */
	EXPECT_EQ(until, 0u);
	ASSERT_EQ(b.acquire(64, 6, &until), 0);
	EXPECT_GE(until, t_close + 1 * kSec);
	ASSERT_EQ(b.stats(&st), 0);
	EXPECT_EQ(st.cooling, 1u);
	EXPECT_EQ(st.held, 1u);
	EXPECT_EQ(st.users, 1u);
}

TEST(LeaseFile, LongerQuarantineOfTheReaderCounts)
{
	LeaseName n;
	Lease a, b;
	ASSERT_EQ(a.open_named(n.name, kGuid, 1, kSec / 1000), 0); /* 1 ms */
	uint64_t until;
	ASSERT_EQ(a.acquire(0, 10, &until), 0);
	ASSERT_EQ(b.open_named(n.name, kGuid, 2, 5 * kSec), 0);
	uint64_t t_close = mlx5_qpn_clock_ns();
	ASSERT_EQ(a.release_all(), 0);
	ASSERT_EQ(b.check(0, 1024, &until), 0);
	EXPECT_GE(until, t_close + 5 * kSec); /* max(1 ms, 5 s) */
}

/* A holder that died: its held entries cool from the time the death was noticed. */
TEST(LeaseFile, DeadHolderCoolsFromNotice)
{
	LeaseName n;
	int go[2], done[2];
	ASSERT_EQ(pipe(go), 0);
	ASSERT_EQ(pipe(done), 0);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Lease c;
		uint64_t u;
		char x = c.open_named(n.name, kGuid, 7, 2 * kSec) == 0 &&
			 c.acquire(256, 8, &u) == 0;
		(void)!write(done[1], &x, 1);
		(void)!read(go[0], &x, 1);
		_exit(0); /* dies holding the range (no release_all) */
	}
	char x = 0;
	ASSERT_EQ(read(done[0], &x, 1), 1);
	ASSERT_EQ(x, 1);
	Lease b;
	ASSERT_EQ(b.open_named(n.name, kGuid, 1, kSec / 10), 0);
	uint64_t until;
	ASSERT_EQ(b.check(256, 256, &until), 0);
	EXPECT_NE(until, 0u); /* alive: held */
	ASSERT_EQ(write(go[1], &x, 1), 1);
	ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
	uint64_t t_dead = mlx5_qpn_clock_ns();
	ASSERT_EQ(b.check(300, 1, &until), 0);
	EXPECT_GE(until,
		  t_dead + 2 * kSec); /* noticed after the death, the dead one's quarantine */
	lease::Stats st;
	ASSERT_EQ(b.stats(&st), 0);
	EXPECT_EQ(st.cooling, 1u);
	EXPECT_EQ(st.deaths_noticed, 1u);
	EXPECT_EQ(st.users, 1u);
}

/* (d) PID reuse: an entry with our pid but another start time is a dead process's. */
TEST(LeaseFile, PidReuseIsDeath)
{
	LeaseName n;
	Lease a;
	ASSERT_EQ(a.open_named(n.name, kGuid, 1, 3 * kSec), 0);
	uint64_t until;
	ASSERT_EQ(a.acquire(512, 9, &until), 0);
	{
		Raw r(n.name);
		ASSERT_NE(r.l, nullptr);
		ASSERT_EQ(r.l->hdr.nb_entries, 1u);
		ASSERT_EQ(r.l->entries[0].holder.pid, int32_t(getpid()));
		/* The recorded process started at another time: same pid, another process. */
		r.l->entries[0].holder.start_time += 1;
		for (auto &u : r.l->users)
			if (u.id.pid == int32_t(getpid()))
				u.id.start_time += 1;
	}
	a.close(); /* forget it without release_all: the file now says "another process" */
	Lease b;
	uint64_t t_open = mlx5_qpn_clock_ns();
	ASSERT_EQ(b.open_named(n.name, kGuid, 2, kSec / 10), 0);
	ASSERT_EQ(b.check(512, 512, &until), 0);
	lease::Stats st;
	ASSERT_EQ(b.stats(&st), 0);
	EXPECT_EQ(st.cooling, 1u) << "the entry of a reused pid must be taken for a dead holder";
	EXPECT_EQ(st.held, 0u);
	EXPECT_EQ(st.deaths_noticed, 1u);
	/* Noticed inside b's open, after t_open; the dead holder's 3 s, not b's 0.1 s. */
	EXPECT_GE(until, t_open + 3 * kSec);
}

TEST(LeaseFile, ExpiredEntriesGoAndTheFileIsRemovedWhenUnused)
{
	LeaseName n;
	Lease a;
	ASSERT_EQ(a.open_named(n.name, kGuid, 1, kSec / 1000), 0);
	uint64_t until;
	ASSERT_EQ(a.acquire(64, 6, &until), 0);
	uint64_t t = mlx5_qpn_clock_ns();
	ASSERT_EQ(a.release_all(), 0);
	int fd = shm_open(n.name, O_RDONLY, 0);
	EXPECT_GE(fd, 0) << "a cooling entry keeps the file";
	if (fd >= 0)
		close(fd);
	while (mlx5_qpn_clock_ns() < t + 2 * kSec / 1000)
		usleep(1000);
	Lease b;
	ASSERT_EQ(b.open_named(n.name, kGuid, 2, 0), 0);
	lease::Stats st;
	ASSERT_EQ(b.stats(&st), 0);
	EXPECT_EQ(st.entries, 0u);
	EXPECT_EQ(st.expired, 1u);
	ASSERT_EQ(b.release_all(), 0);
	fd = shm_open(n.name, O_RDONLY, 0);
	EXPECT_LT(fd, 0) << "empty and unused: removed";
	EXPECT_EQ(errno, ENOENT);
	if (fd >= 0)
		close(fd);
}

TEST(LeaseFile, FullTableRefusesToRecord)
{
	LeaseName n;
	Lease a;
	ASSERT_EQ(a.open_named(n.name, kGuid, 1, kSec), 0);
	uint64_t until;
	for (uint32_t i = 0; i < lease::kMaxEntries; i++)
		ASSERT_EQ(a.acquire(i * 2, 1, &until), 0) << i;
	EXPECT_EQ(a.acquire(lease::kMaxEntries * 2, 1, &until), -ENOSPC);
	EXPECT_EQ(a.drop(0, 1), 0);
	EXPECT_EQ(a.drop(0, 1), -ENOENT);
	EXPECT_EQ(a.acquire(lease::kMaxEntries * 2, 1, &until), 0);
	EXPECT_EQ(a.acquire(3, 1, &until), -EINVAL);        /* misaligned */
	EXPECT_EQ(a.acquire(0, 25, &until), -EINVAL);       /* above 24 bits */
	EXPECT_EQ(a.acquire(0xFFFFFF, 1, &until), -EINVAL); /* passes the top */
}

/* A process died inside an update (holding the robust mutex, an entry half-appended). */
TEST(LeaseFile, DeathInsideUpdateIsRepaired)
{
	LeaseName n;
	Lease a;
	ASSERT_EQ(a.open_named(n.name, kGuid, 1, kSec), 0);
	uint64_t until;
	ASSERT_EQ(a.acquire(64, 6, &until), 0);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Raw r(n.name);
		if (r.l == nullptr || shm::mutex_lock(&r.l->hdr.mutex) != 0)
			_exit(1);
		lease::Entry &e = r.l->entries[r.l->hdr.nb_entries];
		e.first_qpn = 3; /* half written: misaligned, no holder yet */
		e.log_size = 4;
		e.state = lease::kHeld;
		r.l->hdr.nb_entries++;
		_exit(0); /* dies holding the mutex */
	}
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	LogCapture log;
	ASSERT_EQ(a.check(64, 64, &until), 0);
	lease::Stats st;
	ASSERT_EQ(a.stats(&st), 0);
	EXPECT_EQ(st.repairs, 1u);
	EXPECT_EQ(st.entries, 1u); /* the half-written one dropped, ours kept */
	EXPECT_EQ(st.held, 1u);
	EXPECT_EQ(count_lines(log.text(), "died while updating"), 1);
}

namespace {

/* Build a sound lease with two entries, let `corrupt` damage it, and open it again. */
template <typename F>
int
reopen_after(const char *name, F corrupt, std::string *log_text)
{
	{
		Lease a;
		if (a.open_named(name, kGuid, 1, kSec) != 0)
			return -1000;
		uint64_t u;
		a.acquire(64, 6, &u);
		a.acquire(1024, 10, &u);
		a.close(); /* keep it (held entries, "dead" user: ourselves, closed) */
	}
	{
		Raw r(name);
		if (r.l == nullptr)
			return -1001;
		corrupt(r.l);
	}
	LogCapture log;
	Lease b;
	int rc = b.open_named(name, kGuid, 2, kSec);
	if (rc == 0) {
		/* Accepted: it must still work without any UB. */
		uint64_t u;
		b.check(0, 1u << 24, &u);
		b.release_all();
	}
	*log_text = log.text();
	return rc;
}

} // namespace

/* (c) Corrupted files: refused with one clear line, never a crash. */
TEST(LeaseFile, CorruptedFilesAreRefused)
{
	struct Case {
		const char *what;
		void (*fn)(lease::Layout *);
	} cases[] = {
		{"entry count", [](lease::Layout *l) { l->hdr.nb_entries = 100000; }},
		{"log size", [](lease::Layout *l) { l->entries[1].log_size = 31; }},
		{"alignment", [](lease::Layout *l) { l->entries[0].first_qpn = 65; }},
		{"top",
		 [](lease::Layout *l) {
			 l->entries[1].first_qpn = 0xFFFC00;
			 l->entries[1].log_size = 11;
		 }},
		{"state", [](lease::Layout *l) { l->entries[0].state = 9; }},
		{"future", [](lease::Layout *l) { l->entries[0].since_ns = UINT64_MAX - 5; }},
		{"quarantine", [](lease::Layout *l) { l->entries[1].quarantine_ns = UINT64_MAX; }},
		{"holder", [](lease::Layout *l) { l->entries[1].holder.pid = -4; }},
		{"user", [](lease::Layout *l) { l->users[3].id.pid = -1; }},
		{"guid", [](lease::Layout *l) { l->hdr.guid ^= 1; }},
		{"version", [](lease::Layout *l) { l->hdr.version = 77; }},
		{"magic", [](lease::Layout *l) { l->hdr.magic = 0x1234; }},
		{"mutex",
		 [](lease::Layout *l) { memset(&l->hdr.mutex, 0xa5, sizeof(l->hdr.mutex)); }},
	};
	for (const auto &c : cases) {
		LeaseName n;
		std::string log;
		EXPECT_EQ(reopen_after(n.name, c.fn, &log), -EPROTO) << c.what;
		EXPECT_EQ(count_lines(log, "refusing it"), 1) << c.what << ": " << log;
	}
}

TEST(LeaseFile, RandomBytesAndWrongSizesAreRefused)
{
	std::mt19937_64 rng(12345);
	for (size_t size :
	     {size_t(1), size_t(1000), sizeof(lease::Layout) - 8, sizeof(lease::Layout) + 4096}) {
		LeaseName n;
		int fd = shm_open(n.name, O_RDWR | O_CREAT | O_EXCL, 0600);
		ASSERT_GE(fd, 0);
		std::string junk(size, '\0');
		for (auto &ch : junk)
			ch = char(rng());
		ASSERT_EQ(write(fd, junk.data(), junk.size()), ssize_t(junk.size()));
		close(fd);
		LogCapture log;
		Lease b;
		EXPECT_EQ(b.open_named(n.name, kGuid, 2, kSec), -EPROTO) << size;
		EXPECT_EQ(count_lines(log.text(), "refusing it"), 1) << log.text();
	}
	/* Right size, random content: refused (bad magic) — and random damage to a sound file's
	 * entries is either refused or harmless, never a crash. */
	for (int round = 0; round < 200; round++) {
		LeaseName n;
		std::string log;
		int rc = reopen_after(
			n.name,
			[](lease::Layout *l) {
				static std::mt19937_64 r2(99);
				auto *b = reinterpret_cast<unsigned char *>(l->entries);
				for (int k = 0; k < 8; k++)
					b[r2() % (2 * sizeof(lease::Entry))] = uint8_t(r2());
				if (r2() % 4 == 0)
					l->hdr.nb_entries = uint32_t(r2());
			},
			&log);
		EXPECT_TRUE(rc == 0 || rc == -EPROTO) << rc;
		if (rc == -EPROTO) {
			EXPECT_EQ(count_lines(log, "refusing it"), 1) << log;
		}
	}
	LeaseName n;
	int fd = shm_open(n.name, O_RDWR | O_CREAT | O_EXCL, 0600);
	ASSERT_GE(fd, 0);
	std::string junk(sizeof(lease::Layout), '\0');
	for (auto &ch : junk)
		ch = char(rng() | 1);
	ASSERT_EQ(write(fd, junk.data(), junk.size()), ssize_t(junk.size()));
	close(fd);
	Lease b;
	EXPECT_EQ(b.open_named(n.name, kGuid, 2, kSec), -EPROTO);
}

/* A sound file that goes bad while open: the next call is refused, once logged. */
TEST(LeaseFile, CorruptionWhileOpenIsRefused)
{
	LeaseName n;
	Lease a;
	ASSERT_EQ(a.open_named(n.name, kGuid, 1, kSec), 0);
	uint64_t until;
	ASSERT_EQ(a.acquire(64, 6, &until), 0);
	{
		Raw r(n.name);
		ASSERT_NE(r.l, nullptr);
		r.l->entries[0].log_size = 200;
	}
	LogCapture log;
	EXPECT_EQ(a.acquire(128, 6, &until), -EPROTO);
	EXPECT_EQ(a.check(128, 64, &until), -EPROTO);
	EXPECT_EQ(count_lines(log.text(), "refusing it"), 1) << log.text();
	a.close();
}

/*
 * Issue 30 (5): a range the device gave while it still cooled is recorded ASIDE; letting it go
 * renews nothing. A set-aside holder's close leaves the earlier cooling entry's time as it was
 * (before: the close re-stamped the range from its own time, so a probe retried faster than the
 * quarantine kept pushing the return away).
 */
TEST(LeaseFile, AsideCloseRenewsNothing)
{
	LeaseName n;
	Lease a, b, c;
	ASSERT_EQ(a.open_named(n.name, kGuid, 1, kSec), 0);
	uint64_t until = 0;
	ASSERT_EQ(a.acquire(0, 10, &until), 0);
	ASSERT_EQ(a.release_all(), 0); /* cooling from its close */
	for (int retry = 0; retry < 3; retry++) {
		ASSERT_EQ(b.open_named(n.name, kGuid, 2, kSec), 0);
		uint64_t until_b = 0;
		ASSERT_EQ(b.acquire(0, 10, &until_b), 0);
		ASSERT_NE(until_b, 0u) << "the range still cools";
		if (retry == 0)
			until = until_b;
		EXPECT_EQ(until_b, until) << "retry " << retry << ": a set-aside close renewed it";
		lease::Stats st;
		ASSERT_EQ(b.stats(&st), 0);
		EXPECT_EQ(st.aside, 1u);
		usleep(2000);
		ASSERT_EQ(b.release_all(), 0);
	}
	ASSERT_EQ(c.open_named(n.name, kGuid, 3, kSec), 0);
	uint64_t until_c = 0;
	ASSERT_EQ(c.check(0, 1024, &until_c), 0);
	EXPECT_EQ(until_c, until);
	lease::Stats st;
	ASSERT_EQ(c.stats(&st), 0);
	EXPECT_EQ(st.entries, 1u) << "only the first holder's cooling entry";
	EXPECT_EQ(st.aside, 0u);
}

/* The same for a set-aside holder that dies: its record goes, the earlier cooling time stays. */
TEST(LeaseFile, AsideOfADeadHolderRenewsNothing)
{
	LeaseName n;
	Lease a;
	ASSERT_EQ(a.open_named(n.name, kGuid, 1, kSec), 0);
	uint64_t until = 0;
	ASSERT_EQ(a.acquire(256, 8, &until), 0);
	ASSERT_EQ(a.release_all(), 0);
	int done[2];
	ASSERT_EQ(pipe(done), 0);
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Lease d;
		uint64_t u = 0;
		if (d.open_named(n.name, kGuid, 7, kSec) != 0 || d.acquire(256, 8, &u) != 0)
			u = 0;
		(void)!write(done[1], &u, sizeof(u));
		_exit(0); /* dies with the range set aside (no release_all) */
	}
	uint64_t until_child = 0;
	ASSERT_EQ(read(done[0], &until_child, sizeof(until_child)), ssize_t(sizeof(until_child)));
	ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
	ASSERT_NE(until_child, 0u) << "the child did not record the range as cooling";
	usleep(2000);
	Lease b;
	ASSERT_EQ(b.open_named(n.name, kGuid, 2, kSec), 0);
	ASSERT_EQ(b.check(256, 256, &until), 0);
	EXPECT_EQ(until, until_child) << "the death of a set-aside holder renewed the cooling";
	lease::Stats st;
	ASSERT_EQ(b.stats(&st), 0);
	EXPECT_EQ(st.entries, 1u);
	EXPECT_EQ(st.deaths_noticed, 1u);
}

/* Once admitted (its cooling over, into the pool), the range is the holder's own: its close
 * makes it cool from the close. */
TEST(LeaseFile, AdmittedRangeCoolsFromClose)
{
	LeaseName n;
	Lease a, b, c;
	const uint64_t q = kSec / 20; /* 50 ms */
	ASSERT_EQ(a.open_named(n.name, kGuid, 1, q), 0);
	uint64_t until = 0;
	ASSERT_EQ(a.acquire(64, 6, &until), 0);
	ASSERT_EQ(a.release_all(), 0);
	ASSERT_EQ(b.open_named(n.name, kGuid, 2, q), 0);
	ASSERT_EQ(b.acquire(64, 6, &until), 0);
	ASSERT_NE(until, 0u);
	ASSERT_EQ(b.admit(64, 64, &until), 0);
	EXPECT_NE(until, 0u) << "admitted while it cools";
	while (mlx5_qpn_clock_ns() < until)
		usleep(1000);
	ASSERT_EQ(b.admit(64, 64, &until), 0);
	EXPECT_EQ(until, 0u);
	lease::Stats st;
	ASSERT_EQ(b.stats(&st), 0);
	EXPECT_EQ(st.aside, 0u);
	EXPECT_EQ(st.held, 1u);
	uint64_t t_close = mlx5_qpn_clock_ns();
	ASSERT_EQ(b.release_all(), 0);
	ASSERT_EQ(c.open_named(n.name, kGuid, 3, q), 0);
	ASSERT_EQ(c.check(64, 64, &until), 0);
	EXPECT_GE(until, t_close + q);
}
