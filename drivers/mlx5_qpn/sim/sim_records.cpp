/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's records: one per RESERVED_QPN object, ordinary QP, DCI or DCT, naming
 * its owning handle, in a hash inside the segment (SimShm::recs). The records are the truth:
 * after a process died inside a command the device rebuilds its bitmap from them (sim_fw.cpp).
 */
#include "sim_internal.h"

namespace mlx5_qpn_sim {

/* ---- record hash (open addressing, linear probing, backward-shift deletion) ---- */

static uint32_t
rec_hash(uint32_t key)
{
	return (key * 0x9e3779b1u) >> (32 - kRecBits);
}

SimRec *
rec_find(SimShm *s, uint32_t key)
{
	for (uint32_t i = rec_hash(key), n = 0; n < kRecCap; i = (i + 1) & (kRecCap - 1), n++) {
		if (s->recs[i].key == key)
			return &s->recs[i];
		if (s->recs[i].key == 0)
			return nullptr;
	}
	return nullptr;
}

bool
rec_insert(SimShm *s, const SimRec &r)
{
	if (s->recs_live >= kRecMaxLive)
		return false;
	/* Bounded: a corrupted recs_live must not turn a full table into an endless probe. */
	for (uint32_t i = rec_hash(r.key), n = 0; n < kRecCap; i = (i + 1) & (kRecCap - 1), n++) {
		if (s->recs[i].key == 0) {
			s->recs[i] = r;
			s->recs_live++;
			return true;
		}
	}
	return false;
}

void
rec_delete(SimShm *s, SimRec *r)
{
	uint32_t i = uint32_t(r - s->recs);
	uint32_t j = i;

	s->recs[i].key = 0;
	for (uint32_t n = 0; n < kRecCap; n++) {
		j = (j + 1) & (kRecCap - 1);
		if (s->recs[j].key == 0)
			break;
		uint32_t k = rec_hash(s->recs[j].key);
		/* The entry at j may stay if its home k lies cyclically in (i, j]. */
		bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
		if (stays)
			continue;
		s->recs[i] = s->recs[j];
		s->recs[j].key = 0;
		i = j;
	}
	if (s->recs_live)
		s->recs_live--;
}

/* Free one record and what it holds in the table. Mutex held. */
void
rec_release(SimShm *s, SimRec *r)
{
	uint32_t qpn = qpn_of(s, r->key - 1);

	if (!rec_ok(s, *r)) {
		rec_delete(s, r); /* corrupted since attach: drop it, never index with it */
		return;
	}
	if (r->kind == REC_OBJ) {
		s->table.free_block(qpn, r->log_size, prefix_of(s));
		s->ctr.objs_live--;
		s->ctr.qpns_reserved -= uint64_t(1) << r->log_size;
	} else {
		s->table.free(qpn, prefix_of(s));
		s->ctr.qps_live--;
	}
	rec_delete(s, r);
}

} // namespace mlx5_qpn_sim
