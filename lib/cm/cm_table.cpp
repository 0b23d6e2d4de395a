/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The (GUID, id) -> connection tables of the CM model and its bounded queues.
 */
#include "cm_internal.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include <sys/mman.h>

namespace cm_impl {

namespace {

constexpr size_t kMapAbove = 256 * 1024; /* smaller tables: malloc */

} // namespace

void *
table_alloc(size_t n, size_t size)
{
	if (size != 0 && n > SIZE_MAX / size)
		return nullptr;
	const size_t bytes = n * size;
	if (bytes >= kMapAbove) {
		void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		return p == MAP_FAILED ? nullptr : p; /* anonymous pages are zero */
	}
	auto *p = new (std::nothrow) unsigned char[bytes]();
	if (p == nullptr)
		return nullptr;
	volatile unsigned char *v = p;
	for (size_t off = 0; off < bytes; off += 4096)
		v[off] = 0; /* calloc (see the header) may have skipped the pages */
	return p;
}

void
table_free(void *p, size_t n, size_t size)
{
	if (p == nullptr)
		return;
	if (n * size >= kMapAbove)
		munmap(p, n * size);
	else
		delete[] static_cast<unsigned char *>(p);
}

bool
KeyMap::init(uint32_t max_entries)
{
	uint32_t cap = 16;
	while (cap < 2u * max_entries)
		cap <<= 1;
	ents_ = static_cast<Ent *>(table_alloc(cap, sizeof(Ent)));
	if (ents_ == nullptr)
		return false;
	mask_ = cap - 1;
	count_ = 0;
	return true;
}

void
KeyMap::fini()
{
	table_free(ents_, size_t(mask_) + 1, sizeof(Ent));
	ents_ = nullptr;
	mask_ = 0;
	count_ = 0;
}

uint32_t
KeyMap::home(uint64_t guid, uint32_t id) const
{
	/* GUIDs share vendor prefixes and ids are small integers: mix both (splitmix64 finish). */
	uint64_t x = guid ^ (uint64_t(id) * 0x9E3779B97F4A7C15ull);
	x ^= x >> 30;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 27;
	x *= 0x94D049BB133111EBull;
	x ^= x >> 31;
	return uint32_t(x) & mask_;
}

int
KeyMap::find(uint64_t guid, uint32_t id) const
{
	for (uint32_t i = home(guid, id);; i = (i + 1) & mask_) {
		const Ent &e = ents_[i];
		if (e.slot1 == 0)
			return -1;
		if (e.guid == guid && e.id == id)
			return int(e.slot1 - 1);
	}
}

void
KeyMap::insert(uint64_t guid, uint32_t id, uint32_t slot)
{
	uint32_t i = home(guid, id);
	while (ents_[i].slot1 != 0)
		i = (i + 1) & mask_;
	ents_[i] = Ent{guid, id, slot + 1};
	count_++;
}

void
KeyMap::erase(uint64_t guid, uint32_t id)
{
	uint32_t i = home(guid, id);
	for (;; i = (i + 1) & mask_) {
		if (ents_[i].slot1 == 0)
			return;
		if (ents_[i].guid == guid && ents_[i].id == id)
			break;
	}
	/* Backward shift: move later entries of the probe run into the hole when allowed. */
	uint32_t hole = i;
	for (uint32_t j = (i + 1) & mask_; ents_[j].slot1 != 0; j = (j + 1) & mask_) {
		uint32_t h = home(ents_[j].guid, ents_[j].id);
		/* Entry j may fill the hole only if its home is not in (hole, j] cyclically. */
		bool in_range = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
		if (!in_range) {
			ents_[hole] = ents_[j];
			hole = j;
		}
	}
	ents_[hole].slot1 = 0;
	count_--;
}

template <typename T>
bool
Fifo<T>::init(uint32_t cap)
{
	items_ = static_cast<T *>(table_alloc(cap, sizeof(T)));
	if (items_ == nullptr)
		return false;
	cap_ = cap;
	head_ = count_ = 0;
	return true;
}

template <typename T>
void
Fifo<T>::fini()
{
	table_free(items_, cap_, sizeof(T));
	items_ = nullptr;
	cap_ = head_ = count_ = 0;
}

template <typename T>
T *
Fifo<T>::push_slot()
{
	if (full())
		return nullptr;
	uint32_t i = head_ + count_;
	if (i >= cap_)
		i -= cap_;
	count_++;
	return &items_[i];
}

template <typename T>
void
Fifo<T>::pop()
{
	if (empty())
		return;
	head_ = head_ + 1 == cap_ ? 0 : head_ + 1;
	count_--;
}

template class Fifo<mlx5_qpn_cm_event>;
template class Fifo<OutFrame>;

} // namespace cm_impl
