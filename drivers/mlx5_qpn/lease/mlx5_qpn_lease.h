/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_LEASE_H
#define MLX5_QPN_LEASE_H

/*
 * Internal: the per-device lease file, which carries the quarantine of QPNs across process exits
 * and crashes (invariant 5; doc/guides/driver.md, "The lease file"). Not installed.
 *
 * Why: a device hands a range back out as soon as its RESERVED_QPN object is destroyed — by
 * mlx5_qpn_dev_close(), or by the kernel when the process dies — and nothing tells the firmware
 * that the peers still keep those QPNs in timewait. So every process records here the ranges it
 * holds; a process that closes marks them cooling from its close time; a process found dead is
 * marked cooling from the time its death was noticed (never earlier than the death). A process
 * that gets a range from the device first asks the lease until when that range must stay out of
 * its pool. A range it must hold aside meanwhile is recorded ASIDE: its QPNs were never in this
 * process's pool, so letting it go (close, or death) removes that record and renews nothing —
 * the entries that make it cool keep their times, and the range comes back when they say.
 *
 * One POSIX shm segment per node GUID, "/mlx5_qpn_lease_<guid as 16 hex digits>", fixed size,
 * opened through lib/shm (exclusive create or owner-checked attach, bounded robust mutex, ProcId
 * liveness). Everything read back is validated; a corrupted file is refused with one line.
 *
 *   Layout (little endian, no pointers):
 *   +------------------------------+
 *   | magic "MLX5QLSE", version,   |  Header
 *   | size, guid, mutex, counters  |
 *   +------------------------------+
 *   | User  users[kMaxUsers]       |  who has the lease open: ProcId, tag, quarantine
 *   +------------------------------+
 *   | Entry entries[kMaxEntries]   |  dense: [0, nb_entries) are in use
 *   +------------------------------+
 *
 *   Entry life:  (device gave the range)  HELD(holder, tag) --close--------> COOLING(since = close)
 *                                              |                                  |
 *                                              +--holder found dead-----> COOLING(since = noticed)
 *                                              +--range wholly free, given back--> removed
 *                COOLING --since + max(quarantines of holder and live users) passed--> removed
 *                (device gave a range that must cool) HELD|ASIDE --admit()--> HELD (into the pool)
 *                                              +--close, or holder found dead--> removed
 *
 * Clock: CLOCK_MONOTONIC (mlx5_qpn_clock_ns()), one clock for every process of the host; every
 * time is read after the mutex is taken, so no entry can be later than a reader's "now".
 * Thread safety: one Lease object per device; its callers serialise on the device's grow mutex.
 * Processes serialise on the segment's robust mutex (bounded wait).
 */

#include <cstddef>
#include <cstdint>

#include <pthread.h>

#include "qpn_shm.h"

namespace qpn::lease {

constexpr uint64_t kMagic = 0x45534c5135584c4dull; /* "MLX5QLSE" little endian */
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxEntries = 4096;
constexpr uint32_t kMaxUsers = 64;
constexpr uint32_t kMaxLog = 24;                               /* a QPN is 24 bits */
constexpr uint64_t kMaxQuarantineNs = 3600ull * 1000000000ull; /* the devarg's maximum */

enum : uint8_t { kHeld = 1, kCooling = 2 };

/* Entry::flags. ASIDE: a HELD range that has not entered its holder's pool yet (it cools). */
enum : uint16_t { kAside = 1 };

/* One range: 48 bytes. */
struct Entry {
	uint32_t first_qpn; /* aligned to 2^log_size */
	uint8_t log_size;   /* <= kMaxLog */
	uint8_t state;      /* kHeld or kCooling */
	uint16_t flags;     /* kAside (kHeld only); 0 in files of builds before it: conservative */
	uint32_t tag;       /* the holder's device instance (one process may probe twice) */
	uint32_t rsvd2;
	shm::ProcId holder;
	uint64_t since_ns;      /* kCooling: let go at (close time, or death noticed) */
	uint64_t quarantine_ns; /* the holder's quarantine */
};
static_assert(sizeof(Entry) == 48, "Entry is part of the shared layout");

/* A process that has the lease open: 32 bytes; id.pid == 0 is a free slot. */
struct User {
	shm::ProcId id;
	uint32_t tag;
	uint32_t rsvd;
	uint64_t quarantine_ns;
};
static_assert(sizeof(User) == 32, "User is part of the shared layout");

struct Header {
	uint64_t magic; /* written last at initialisation */
	uint32_t version;
	uint32_t rsvd;
	uint64_t size; /* sizeof(Layout) */
	uint64_t guid;
	pthread_mutex_t mutex; /* robust, process-shared; guards everything below */
	uint32_t nb_entries;
	uint32_t rsvd2;
	uint64_t deaths_noticed; /* holders found dead (their entries turned cooling) */
	uint64_t expired;        /* cooling entries removed after their time */
	uint64_t repairs;        /* half-written entries dropped after a holder died in an update */
};

struct Layout {
	Header hdr;
	User users[kMaxUsers];
	Entry entries[kMaxEntries];
};

/* The lease file's name for a node GUID; `len` >= 40. */
void name_of(uint64_t guid, char *out, size_t len);

/* Remove the lease file of a node GUID, which crashed processes of a purged device left (the
 * generic layer's purge; a live user keeps its mapping). @return 0; -ENOENT none; errno. */
int unlink(uint64_t guid);

/* Counters of one lease file (shared by all its users). */
struct Stats {
	uint32_t entries, held, cooling, users, aside; /* aside: HELD entries that are ASIDE */
	uint64_t deaths_noticed, expired, repairs;
};

class Lease {
public:
	Lease() = default;
	Lease(const Lease &) = delete;
	Lease &operator=(const Lease &) = delete;
	~Lease() { close(); }

	/*
	 * Open or create the lease of device `guid` and register this process as a user, with the
	 * tag of its device instance and its quarantine.
	 * @return 0; -EPROTO a corrupted file or one of another layout (one ERR line says what);
	 *         -EACCES not ours (lib/shm); -ETIMEDOUT a lock stayed held; -EUSERS every user
	 *         slot taken by live processes; other negative errno.
	 */
	int open(uint64_t guid, uint32_t tag, uint64_t quarantine_ns);

	/* Same, on a named segment (tests). */
	int open_named(const char *name, uint64_t guid, uint32_t tag, uint64_t quarantine_ns);

	bool is_open() const { return map_ != nullptr; }

	/*
	 * This process got [first, first + 2^log) from the device: notice dead holders, remove
	 * expired entries, compute until when the range must stay out of the pool (*until_ns = 0:
	 * it may go in now) and record it as held by this process (ASIDE if it must wait: then
	 * admit() before it goes into the pool).
	 * @return 0; -ENOSPC the table is full (nothing recorded); -EINVAL bad range; -EPROTO
	 *         corrupted; -ETIMEDOUT.
	 */
	int acquire(uint32_t first, uint32_t log, uint64_t *until_ns);

	/* Until when must [first, first + count) stay out of the pool? (0: not at all.) An entry
	 * held by a live other process (it is dying, or does not follow the lease) postpones by a
	 * recheck interval. Errors as acquire(). */
	int check(uint32_t first, uint32_t count, uint64_t *until_ns)
	{
		return look(first, count, until_ns, false);
	}

	/* As check(); when nothing keeps [first, first + count) out any more (*until_ns = 0), our
	 * ASIDE records inside it turn plain HELD: call it before the range goes into the pool, so
	 * that from then on a close or a death makes it cool. Errors as acquire(). */
	int admit(uint32_t first, uint32_t count, uint64_t *until_ns)
	{
		return look(first, count, until_ns, true);
	}

	/* This process gave [first, 2^log) back wholly free and out of quarantine: forget it.
	 * @return 0; -ENOENT no such entry of ours; errors as acquire(). */
	int drop(uint32_t first, uint32_t log);

	/*
	 * The device closes: every range this instance still holds turns cooling from now with
	 * this instance's quarantine, except ranges still ASIDE, whose records go (they were never
	 * handed out here; what makes them cool stays); the user slot is freed; the file is
	 * removed if no entry and no live user remain. Call before the objects go back to the
	 * device.
	 * @return 0 or negative errno (the lease is closed either way).
	 */
	int release_all();

	/* Unmap without touching the content (a process that forgot to call release_all() is
	 * treated as dead by the others, which is safe). */
	void close();

	/* @return 0; errors as acquire(). */
	int stats(Stats *st);

	/* For the generic layer: how long an entry held by a live other process postpones. */
	static constexpr uint64_t kRecheckNs = 100000000ull; /* 100 ms */

private:
	int lock(uint64_t *now_ns);
	void unlock();
	int look(uint32_t first, uint32_t count, uint64_t *until_ns, bool take);
	void sweep(uint64_t now_ns);
	uint64_t wait_until(uint32_t first, uint32_t count, uint64_t now_ns) const;
	int refuse(const char *why, long entry);

	shm::Segment seg_;
	Layout *map_ = nullptr;
	uint64_t guid_ = 0;
	uint32_t tag_ = 0;
	uint64_t quarantine_ns_ = 0;
	shm::ProcId self_ = {};
	bool broken_ = false; /* refused once: later calls fail at once, one line was logged */
};

/*
 * The first live process that has the lease file of `guid` open, read without its lock (a
 * purge's refusal needs no more; a missing file, or one that is not a lease of this GUID, has
 * none). @return true and *pid if there is one.
 */
bool live_user(uint64_t guid, int32_t *pid);

/* Validate a mapped lease (counts, indices, log sizes, alignment, states, times). Returns nullptr
 * if sound, else a short reason; `bad_entry` gets the index of the first bad entry or -1. */
const char *validate(const Layout *l, uint64_t guid, uint64_t now_ns, long *bad_entry);

} /* namespace qpn::lease */

#endif /* MLX5_QPN_LEASE_H */
