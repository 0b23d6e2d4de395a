/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-device lease file: see mlx5_qpn_lease.h for the rules and the layout.
 *
 * Crash consistency (a holder may die inside any update; the robust mutex then reports
 * EOWNERDEAD to the next locker):
 *  - an entry is appended by writing it at index nb_entries, then bumping nb_entries: a death
 *    before the bump leaves nothing counted;
 *  - an entry turns cooling by writing since_ns and quarantine_ns before state: a death in
 *    between leaves it held, and its holder is dead, so the next sweep turns it cooling;
 *  - an ASIDE entry is admitted by clearing its flag before its range enters the pool: a death
 *    before the clear leaves it aside (nothing of it was handed out), after it plain HELD;
 *  - an entry is removed by copying the last one over it, then dropping nb_entries: a death in
 *    the copy leaves a hybrid at the removed index (its original was going anyway) and the intact
 *    last entry still counted. The repair after EOWNERDEAD drops entries that fail validation;
 *    a hybrid that passes it merely protects some range for one quarantine more.
 * Anything invalid found without EOWNERDEAD is corruption: the file is refused, never repaired,
 * because a guess could shorten a quarantine.
 */
#include "mlx5_qpn_lease.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mlx5_qpn_log.h"
#include "mlx5_qpn_pool.h"

/* The lease file serves the generic layer: its lines go to that layer's log type (mlx5_qpn.dev,
 * registered in dev/), declared here because lease/ sees lib/ and nothing of dev/. */
extern "C" int mlx5_qpn_dev_logtype;
#define DEV_LOG(level, ...) MLX5_QPN_LOG(dev, level, __VA_ARGS__)

namespace qpn::lease {

namespace {

bool
same_proc(const shm::ProcId &a, const shm::ProcId &b)
{
	return a.pid == b.pid && a.start_time == b.start_time;
}

/* Why an entry is unsound, or nullptr. */
const char *
entry_bad(const Entry &e, uint64_t now_ns)
{
	if (e.state != kHeld && e.state != kCooling)
		return "unknown state";
	if ((e.flags & ~kAside) != 0)
		return "unknown flags";
	if ((e.flags & kAside) != 0 && e.state != kHeld)
		return "aside but not held";
	if (e.log_size > kMaxLog)
		return "log size above 24";
	uint64_t n = 1ull << e.log_size;
	if ((e.first_qpn & (n - 1)) != 0)
		return "first QPN not aligned to the range size";
	if (uint64_t(e.first_qpn) + n > (1ull << kMaxLog))
		return "range passes QPN 0xffffff";
	if (e.holder.pid <= 0)
		return "no holder";
	if (e.quarantine_ns > kMaxQuarantineNs)
		return "quarantine above one hour";
	if (e.since_ns > now_ns)
		return "time in the future";
	return nullptr;
}

const char *
user_bad(const User &u)
{
	if (u.id.pid < 0)
		return "negative user pid";
	if (u.quarantine_ns > kMaxQuarantineNs)
		return "user quarantine above one hour";
	return nullptr;
}

/* Header only: what must hold before anything else in the file may be trusted or locked. */
const char *
header_bad(const Layout *l, uint64_t guid)
{
	if (l->hdr.magic != kMagic)
		return "bad magic";
	if (l->hdr.version != kVersion)
		return "another layout version";
	if (l->hdr.size != sizeof(Layout))
		return "bad size field";
	if (l->hdr.guid != guid)
		return "GUID of another device";
	if (l->hdr.nb_entries > kMaxEntries)
		return "entry count above the table size";
	return nullptr;
}

void
remove_at(Layout *l, uint32_t i)
{
	uint32_t last = l->hdr.nb_entries - 1;
	if (i != last)
		l->entries[i] = l->entries[last];
	l->hdr.nb_entries = last;
}

} /* namespace */

void
name_of(uint64_t guid, char *out, size_t len)
{
	snprintf(out, len, "/mlx5_qpn_lease_%016" PRIx64, guid);
}

int
unlink(uint64_t guid)
{
	char name[48];
	name_of(guid, name, sizeof(name));
	return shm::segment_unlink(name);
}

bool
live_user(uint64_t guid, int32_t *pid)
{
	char name[48];
	name_of(guid, name, sizeof(name));
	int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return false;
	struct stat st;
	void *p = MAP_FAILED;
	if (fstat(fd, &st) == 0 && size_t(st.st_size) == sizeof(Layout))
		p = mmap(nullptr, sizeof(Layout), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return false;
	const auto *l = static_cast<const Layout *>(p);
	bool found = false;
	if (header_bad(l, guid) == nullptr)
		for (const auto &u : l->users) {
			shm::ProcId id = u.id; /* a copy: the file may change under us */
			if (id.pid > 0 && shm::alive(id)) {
				*pid = id.pid;
				found = true;
				break;
			}
		}
	munmap(p, sizeof(Layout));
	return found;
}

const char *
validate(const Layout *l, uint64_t guid, uint64_t now_ns, long *bad_entry)
{
	*bad_entry = -1;
	if (const char *why = header_bad(l, guid))
		return why;
	for (uint32_t i = 0; i < kMaxUsers; i++)
		if (const char *why = user_bad(l->users[i]))
			return why;
	for (uint32_t i = 0; i < l->hdr.nb_entries; i++)
		if (const char *why = entry_bad(l->entries[i], now_ns)) {
			*bad_entry = long(i);
			return why;
		}
	return nullptr;
}

int
Lease::refuse(const char *why, long entry)
{
	if (!broken_) {
		if (entry >= 0)
			DEV_LOG(ERR,
				"lease file %s is corrupted (entry %ld: %s): refusing it; remove it once no process uses device %016" PRIx64,
				seg_.name, entry, why, guid_);
		else
			DEV_LOG(ERR,
				"lease file %s is corrupted (%s): refusing it; remove it once no process uses device %016" PRIx64,
				seg_.name, why, guid_);
	}
	broken_ = true;
	return -EPROTO;
}

int
Lease::lock(uint64_t *now_ns)
{
	if (map_ == nullptr)
		return -ENODEV;
	if (broken_)
		return -EPROTO;
	/* The mutex word is only trusted once the header is. */
	if (const char *why = header_bad(map_, guid_))
		return refuse(why, -1);
	int rc = shm::mutex_lock(&map_->hdr.mutex);
	if (rc < 0) {
		if (rc == -EIO)
			return refuse("its mutex is unusable", -1);
		DEV_LOG(ERR, "lease file %s: lock held for too long by another process", seg_.name);
		return rc;
	}
	uint64_t now = mlx5_qpn_clock_ns();
	if (const char *why = header_bad(map_, guid_)) {
		pthread_mutex_unlock(&map_->hdr.mutex);
		return refuse(why, -1);
	}
	if (rc == 1) {
		/* A process died inside an update: drop what it left half-written. */
		uint32_t dropped = 0;
		for (uint32_t i = 0; i < map_->hdr.nb_entries;) {
			if (entry_bad(map_->entries[i], now) != nullptr) {
				remove_at(map_, i);
				dropped++;
			} else {
				i++;
			}
		}
		for (auto &u : map_->users)
			if (user_bad(u) != nullptr)
				u = User();
		map_->hdr.repairs++;
		pthread_mutex_consistent(&map_->hdr.mutex);
		DEV_LOG(WARNING,
			"lease file %s: a process died while updating it; %u entries dropped",
			seg_.name, dropped);
	}
	long bad;
	if (const char *why = validate(map_, guid_, now, &bad)) {
		pthread_mutex_unlock(&map_->hdr.mutex);
		return refuse(why, bad);
	}
	*now_ns = now;
	return 0;
}

void
Lease::unlock()
{
	pthread_mutex_unlock(&map_->hdr.mutex);
}

/* Notice dead users and holders (their held entries turn cooling from now), remove expired
 * entries. Locked. */
void
Lease::sweep(uint64_t now)
{
	Layout *l = map_;
	uint64_t qmax = quarantine_ns_;
	for (auto &u : l->users) {
		if (u.id.pid == 0)
			continue;
		if (!same_proc(u.id, self_) && !shm::alive(u.id)) {
			l->hdr.deaths_noticed++;
			u = User(); /* its held entries find no live user below */
			continue;
		}
		qmax = std::max(qmax, u.quarantine_ns);
	}
	for (uint32_t i = 0; i < l->hdr.nb_entries;) {
		Entry &e = l->entries[i];
		if (e.state == kHeld) {
			bool live = false;
			for (const auto &u : l->users)
				if (u.id.pid != 0 && same_proc(u.id, e.holder) && u.tag == e.tag) {
					live = true;
					break;
				}
			if (!live && (e.flags & kAside) != 0) {
				/* Never in the dead holder's pool: what made it cool stays. */
				remove_at(l, i);
				continue;
			}
			if (!live) {
				/* Noticed now: the death (or a user slot lost) was no later than now. */
				e.since_ns = now;
				std::atomic_ref<uint8_t>(e.state).store(kCooling,
									std::memory_order_release);
			}
			i++;
			continue;
		}
		if (now - e.since_ns >= std::max(e.quarantine_ns, qmax)) {
			remove_at(l, i);
			l->hdr.expired++;
			continue;
		}
		i++;
	}
}

/* The latest time any entry overlapping [first, first + count) keeps it out of our pool. */
uint64_t
Lease::wait_until(uint32_t first, uint32_t count, uint64_t now) const
{
	uint64_t until = 0;
	const uint64_t end = uint64_t(first) + count;
	for (uint32_t i = 0; i < map_->hdr.nb_entries; i++) {
		const Entry &e = map_->entries[i];
		uint64_t ef = e.first_qpn, ee = ef + (1ull << e.log_size);
		if (ee <= first || ef >= end)
			continue;
		uint64_t u;
		if (e.state == kCooling)
			u = e.since_ns + std::max(e.quarantine_ns, quarantine_ns_);
		else if (same_proc(e.holder, self_) && e.tag == tag_)
			continue; /* our own record of this very range */
		else
			u = now + kRecheckNs; /* a live holder: it is dying, or not one of us */
		until = std::max(until, u);
	}
	return until > now ? until : 0;
}

int
Lease::open(uint64_t guid, uint32_t tag, uint64_t quarantine_ns)
{
	char name[48];
	name_of(guid, name, sizeof(name));
	return open_named(name, guid, tag, quarantine_ns);
}

int
Lease::open_named(const char *name, uint64_t guid, uint32_t tag, uint64_t quarantine_ns)
{
	if (map_ != nullptr)
		return -EBUSY;
	if (quarantine_ns > kMaxQuarantineNs)
		return -EINVAL;
	guid_ = guid;
	tag_ = tag;
	quarantine_ns_ = quarantine_ns;
	broken_ = false;
	self_ = shm::self();
	int rc = shm::segment_open_locked(name, &seg_);
	if (rc != 0)
		return rc; /* lib/shm logged why */
	size_t have = 0;
	rc = shm::segment_file_size(&seg_, &have);
	if (rc == 0 && have != 0 && have != sizeof(Layout)) {
		DEV_LOG(ERR,
			"lease file %s has %zu bytes, not %zu (another layout, or not a lease file): refusing it; remove it once no process uses device %016" PRIx64,
			name, have, sizeof(Layout), guid);
		rc = -EPROTO;
	}
	bool init = have == 0;
	if (rc == 0)
		rc = shm::segment_map(&seg_, sizeof(Layout), init);
	if (rc != 0) {
		shm::segment_close(&seg_, seg_.created);
		return rc;
	}
	auto *l = static_cast<Layout *>(seg_.addr);
	if (!init && l->hdr.magic == 0 && l->hdr.version == 0 && l->hdr.size == 0) {
		/* Sized by a creator that died before initialising it (we hold the init lock). */
		init = true;
	}
	if (init) {
		memset(static_cast<void *>(l), 0, sizeof(Layout));
		rc = shm::mutex_init(&l->hdr.mutex);
		if (rc != 0) {
			shm::segment_close(&seg_, true, true);
			return rc;
		}
		l->hdr.version = kVersion;
		l->hdr.size = sizeof(Layout);
		l->hdr.guid = guid;
		std::atomic_ref<uint64_t>(l->hdr.magic).store(kMagic, std::memory_order_release);
	}
	map_ = l;
	uint64_t now;
	rc = lock(&now);
	if (rc != 0) {
		map_ = nullptr;
		shm::segment_close(&seg_);
		return rc;
	}
	sweep(now);
	rc = -EUSERS;
	for (auto &u : l->users) {
		if (u.id.pid != 0)
			continue;
		u.tag = tag;
		u.quarantine_ns = quarantine_ns;
		u.id = self_;
		rc = 0;
		break;
	}
	unlock();
	shm::segment_unlock(&seg_);
	if (rc != 0) {
		DEV_LOG(ERR, "lease file %s: all %u user slots are held by live processes", name,
			kMaxUsers);
		map_ = nullptr;
		shm::segment_close(&seg_);
	}
	return rc;
}

int
Lease::acquire(uint32_t first, uint32_t log, uint64_t *until_ns)
{
	if (log > kMaxLog || (first & ((1u << log) - 1)) != 0 ||
	    uint64_t(first) + (1ull << log) > (1ull << kMaxLog) || until_ns == nullptr)
		return -EINVAL;
	uint64_t now;
	int rc = lock(&now);
	if (rc != 0)
		return rc;
	sweep(now);
	*until_ns = wait_until(first, 1u << log, now);
	if (map_->hdr.nb_entries >= kMaxEntries) {
		unlock();
		return -ENOSPC;
	}
	Entry &e = map_->entries[map_->hdr.nb_entries];
	e = Entry();
	e.first_qpn = first;
	e.log_size = uint8_t(log);
	e.state = kHeld;
	e.flags = *until_ns != 0 ? kAside : 0;
	e.tag = tag_;
	e.holder = self_;
	e.since_ns = now;
	e.quarantine_ns = quarantine_ns_;
	std::atomic_ref<uint32_t>(map_->hdr.nb_entries)
		.store(map_->hdr.nb_entries + 1, std::memory_order_release);
	unlock();
	return 0;
}

/* check() and admit(): until when [first, first + count) stays out; with `take`, once nothing
 * keeps it out, our ASIDE records inside it turn plain HELD (it enters the pool next). */
int
Lease::look(uint32_t first, uint32_t count, uint64_t *until_ns, bool take)
{
	if (count == 0 || uint64_t(first) + count > (1ull << kMaxLog) || until_ns == nullptr)
		return -EINVAL;
	uint64_t now;
	int rc = lock(&now);
	if (rc != 0)
		return rc;
	sweep(now);
	*until_ns = wait_until(first, count, now);
	const uint64_t end = uint64_t(first) + count;
	for (uint32_t i = 0; take && *until_ns == 0 && i < map_->hdr.nb_entries; i++) {
		Entry &e = map_->entries[i];
		if ((e.flags & kAside) != 0 && e.first_qpn >= first && e.first_qpn < end &&
		    same_proc(e.holder, self_) && e.tag == tag_)
			std::atomic_ref<uint16_t>(e.flags).store(0, std::memory_order_release);
	}
	unlock();
	return 0;
}

int
Lease::drop(uint32_t first, uint32_t log)
{
	uint64_t now;
	int rc = lock(&now);
	if (rc != 0)
		return rc;
	rc = -ENOENT;
	for (uint32_t i = 0; i < map_->hdr.nb_entries; i++) {
		const Entry &e = map_->entries[i];
		if (e.state == kHeld && e.first_qpn == first && e.log_size == log &&
		    same_proc(e.holder, self_) && e.tag == tag_) {
			remove_at(map_, i);
			rc = 0;
			break;
		}
	}
	unlock();
	return rc;
}

int
Lease::release_all()
{
	if (map_ == nullptr)
		return -ENODEV;
	/* The init lock first (the order of open), so that a removal cannot race an opener: one
	 * waiting for it then finds the name unlinked and starts a fresh file (lib/shm). Only
	 * tried briefly: without it the file simply stays. */
	bool flocked = false;
	for (int i = 0; i < 20 && !flocked; i++) {
		flocked = flock(seg_.fd, LOCK_EX | LOCK_NB) == 0;
		if (!flocked)
			usleep(500);
	}
	uint64_t now;
	int rc = lock(&now);
	bool remove = false;
	if (rc == 0) {
		sweep(now);
		for (uint32_t i = 0; i < map_->hdr.nb_entries;) {
			Entry &e = map_->entries[i];
			if (e.state != kHeld || !same_proc(e.holder, self_) || e.tag != tag_) {
				i++;
				continue;
			}
			if ((e.flags & kAside) != 0) {
				/* Never handed out here: its cooling is the earlier holder's, never
				 * renewed by a close that only set it aside. */
				remove_at(map_, i);
				continue;
			}
			e.since_ns = now;
			e.quarantine_ns = quarantine_ns_;
			std::atomic_ref<uint8_t>(e.state).store(kCooling,
								std::memory_order_release);
			i++;
		}
		bool users = false;
		for (auto &u : map_->users) {
			if (same_proc(u.id, self_) && u.tag == tag_)
				u = User();
			users |= u.id.pid != 0;
		}
		remove = flocked && !users && map_->hdr.nb_entries == 0;
		unlock();
	}
	map_ = nullptr;
	/* Unlinked before the init lock drops with the descriptor. */
	shm::segment_close(&seg_, remove, remove);
	return rc;
}

void
Lease::close()
{
	map_ = nullptr;
	shm::segment_close(&seg_);
}

int
Lease::stats(Stats *st)
{
	uint64_t now;
	int rc = lock(&now);
	if (rc != 0)
		return rc;
	sweep(now);
	*st = Stats();
	st->entries = map_->hdr.nb_entries;
	for (uint32_t i = 0; i < map_->hdr.nb_entries; i++) {
		(map_->entries[i].state == kHeld ? st->held : st->cooling)++;
		st->aside += static_cast<uint32_t>((map_->entries[i].flags & kAside) != 0);
	}
	for (const auto &u : map_->users)
		st->users += static_cast<unsigned int>(u.id.pid != 0);
	st->deaths_noticed = map_->hdr.deaths_noticed;
	st->expired = map_->hdr.expired;
	st->repairs = map_->hdr.repairs;
	unlock();
	return 0;
}

} /* namespace qpn::lease */
