/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's DC tables: CQs, DCIs and DCTs and the page arena their queues live in,
 * all in the device's shared memory — create, destroy, a DCI's reset, the release of an owner's
 * objects, the repair after a process died inside a command and the check at attach. The device's
 * commands (sim_dc_cmd.cpp; owner release and repair in sim_segment.cpp and sim_fw.cpp) run all
 * of this under the device mutex, which models the HCA executing one thing at a time; the
 * execution of WQEs is sim_dc_exec.cpp's. See sim_dc.h.
 */
#include "sim_dc.h"
#include "mlx5_qpn_prm_wqe.h"
#include "mlx5_qpn_dc_ops.h"

#include <cerrno>
#include <cstring>

#include <atomic>

/* Everything below is shared memory, read by other processes without the device mutex. */
static_assert(std::atomic_ref<uint8_t>::is_always_lock_free, "lock-free in shared memory");
static_assert(std::atomic_ref<uint32_t>::is_always_lock_free, "lock-free in shared memory");

namespace mlx5_qpn_sim {

static_assert(kDcSrqStride == MLX5_QPN_SRQ_WQE_MIN_STRIDE, "one data segment per receive WQE");
static_assert(kDcRxStride >= MLX5_QPN_WQE_MAX_INLINE, "a receive buffer holds any SEND");
static_assert(kDcSrqWqes >= 2 * kDcRxHold + 1, "the DC layer's held, spare and posted WQEs");

namespace {

bool
page_used(const SimDc *dc, uint32_t p)
{
	return ((dc->page_bits[p / 64] >> (p % 64)) & 1) != 0u;
}

void
pages_mark(SimDc *dc, uint32_t first, uint32_t n, bool used)
{
	if (first >= kDcNbPages)
		return;
	if (n > kDcNbPages - first)
		n = kDcNbPages - first;
	for (uint32_t p = first; p < first + n; p++) {
		if (used)
			dc->page_bits[p / 64] |= uint64_t(1) << (p % 64);
		else
			dc->page_bits[p / 64] &= ~(uint64_t(1) << (p % 64));
	}
}

/* First fit over the page bitmap: creation is a slow-path firmware command. */
int
pages_alloc(SimDc *dc, uint8_t *arena, uint64_t bytes, uint32_t *first, uint32_t *n)
{
	uint32_t need = uint32_t((bytes + kDcPage - 1) / kDcPage);
	uint32_t run = 0;

	if (need == 0 || need > kDcNbPages)
		return -ENOMEM;
	for (uint32_t p = 0; p < kDcNbPages; p++) {
		if (dc->page_bits[p / 64] == ~uint64_t(0) && p % 64 == 0) {
			run = 0;
			p += 63;
			continue;
		}
		run = page_used(dc, p) ? 0 : run + 1;
		if (run == need) {
			uint32_t f = p + 1 - need;
			pages_mark(dc, f, need, true);
			memset(dc_page_ptr(arena, f), 0, size_t(need) * kDcPage);
			*first = f;
			*n = need;
			return 0;
		}
	}
	return -ENOMEM;
}

template <typename T>
int
slot_alloc(T *tab, uint32_t cap)
{
	for (uint32_t i = 0; i < cap; i++)
		if (!tab[i].live)
			return int(i);
	return -1;
}

void
active_remove(SimDc *dc, uint32_t idx)
{
	uint32_t pos = dc->dci[idx].active_pos;
	uint32_t last = dc->nb_active - 1;

	if (pos < dc->nb_active && dc->nb_active <= kDcMaxDci && dc->active[pos] == idx) {
		dc->active[pos] = dc->active[last];
		if (dc->active[pos] < kDcMaxDci)
			dc->dci[dc->active[pos]].active_pos = pos;
		std::atomic_ref<uint32_t>(dc->nb_active).store(last, std::memory_order_relaxed);
	}
}

} // namespace

int
dc_cq_create(SimDc *dc, uint8_t *arena, uint16_t owner, uint32_t gen, uint32_t log_depth,
	     uint32_t *idx)
{
	if (log_depth < 1 || log_depth > kDcLogCqMax)
		return -EINVAL;
	int i = slot_alloc(dc->cq, kDcMaxCq);
	if (i < 0)
		return -ENOMEM;
	SimDcCq &c = dc->cq[i];
	uint32_t first, n;
	int rc = pages_alloc(dc, arena, uint64_t(MLX5_QPN_CQE_SIZE) << log_depth, &first, &n);
	if (rc)
		return rc;
	uint8_t *ring = dc_page_ptr(arena, first);
	/* Every CQE starts invalid with owner 0: the first pass (owner 0) is not valid until the
	 * device writes a real opcode. */
	for (uint32_t k = 0; k < (uint32_t(1) << log_depth); k++)
		ring[size_t(k) * MLX5_QPN_CQE_SIZE + MLX5_QPN_CQE_OFF_OP_OWN] =
			uint8_t(MLX5_QPN_CQE_OPCODE_INVALID << 4);
	c.owner = owner;
	c.log_depth = uint8_t(log_depth);
	c.gen = gen;
	c.refs = 0;
	c.page = first;
	c.npages = n;
	c.pi = 0;
	c.dbrec[0] = c.dbrec[1] = 0;
	/* last: a crash before leaves nothing */
	std::atomic_ref<uint32_t>(c.live).store(1, std::memory_order_release);
	dc->ctr.cqs++;
	*idx = uint32_t(i);
	return 0;
}

int
dc_dci_create(SimDc *dc, uint8_t *arena, uint16_t owner, uint32_t gen, uint32_t qpn, uint32_t cq,
	      uint32_t log_bbs, uint32_t uar, uint32_t *idx)
{
	if (cq >= kDcMaxCq || !dc->cq[cq].live || dc->cq[cq].owner != owner ||
	    log_bbs > kDcLogSqMax + kDcSqBbShift)
		return -EINVAL;
	int i = slot_alloc(dc->dci, kDcMaxDci);
	if (i < 0 || dc->nb_active >= kDcMaxDci)
		return -ENOMEM;
	SimDcDci &d = dc->dci[i];
	uint32_t first, n;
	int rc = pages_alloc(dc, arena, uint64_t(MLX5_QPN_SEND_WQE_BB) << log_bbs, &first, &n);
	if (rc)
		return rc;
	d.owner = owner;
	d.err = 0;
	d.log_bbs = uint8_t(log_bbs);
	d.gen = gen;
	d.qpn = qpn;
	d.cq = cq;
	d.page = first;
	d.npages = n;
	d.exec_bb = 0;
	d.lost = 0;
	d.lost_pass = 0;
	d.uar = uar;
	d.dbrec[0] = d.dbrec[1] = 0;
	d.active_pos = dc->nb_active;
	dc->active[dc->nb_active] = uint16_t(i);
	std::atomic_ref<uint32_t>(d.live).store(1, std::memory_order_release);
	std::atomic_ref<uint32_t>(dc->nb_active)
		.store(dc->nb_active + 1, std::memory_order_release);
	dc->cq[cq].refs++;
	dc->ctr.dcis++;
	*idx = uint32_t(i);
	return 0;
}

int
dc_dct_create(SimDc *dc, uint8_t *arena, uint16_t owner, uint32_t gen, uint32_t number, uint32_t cq,
	      uint64_t dc_key, uint32_t lkey, uint32_t *idx)
{
	if (cq >= kDcMaxCq || !dc->cq[cq].live || dc->cq[cq].owner != owner)
		return -EINVAL;
	int i = slot_alloc(dc->dct, kDcMaxDct);
	if (i < 0)
		return -ENOMEM;
	SimDcDct &t = dc->dct[i];
	uint32_t first, n;
	int rc = pages_alloc(dc, arena, kDcDctBytes, &first, &n);
	if (rc)
		return rc;
	t.owner = owner;
	t.gen = gen;
	t.number = number;
	t.cq = cq;
	t.page = first;
	t.npages = n;
	t.dc_key = dc_key;
	/* The owner registers the buffers where its own mapping of the arena has them. */
	t.buf_va = uint64_t(uintptr_t(dc_page_ptr(arena, first) + kDcRxBufOff));
	t.lkey = lkey;
	t.srq_head = 0;
	t.srq_taken = 0;
	t.srq_dbrec[0] = t.srq_dbrec[1] = 0;
	std::atomic_ref<uint32_t>(t.live).store(1, std::memory_order_release);
	dc->cq[cq].refs++;
	dc->ctr.dcts++;
	*idx = uint32_t(i);
	return 0;
}

int
dc_cq_destroy(SimDc *dc, uint16_t owner, uint32_t idx, uint32_t gen)
{
	if (idx >= kDcMaxCq || !dc->cq[idx].live || dc->cq[idx].owner != owner ||
	    dc->cq[idx].gen != gen)
		return -EINVAL;
	SimDcCq &c = dc->cq[idx];
	if (c.refs)
		return -EBUSY;
	std::atomic_ref<uint32_t>(c.live).store(0, std::memory_order_release);
	pages_mark(dc, c.page, c.npages, false);
	dc->ctr.cqs--;
	return 0;
}

int
dc_dci_destroy(SimDc *dc, uint16_t owner, uint32_t idx, uint32_t gen)
{
	if (idx >= kDcMaxDci || !dc->dci[idx].live || dc->dci[idx].owner != owner ||
	    dc->dci[idx].gen != gen)
		return -EINVAL;
	SimDcDci &d = dc->dci[idx];
	active_remove(dc, idx);
	std::atomic_ref<uint32_t>(d.live).store(0, std::memory_order_release);
	pages_mark(dc, d.page, d.npages, false);
	if (d.cq < kDcMaxCq && dc->cq[d.cq].refs)
		dc->cq[d.cq].refs--;
	dc->ctr.dcis--;
	return 0;
}

int
dc_dct_destroy(SimDc *dc, uint16_t owner, uint32_t idx, uint32_t gen)
{
	if (idx >= kDcMaxDct || !dc->dct[idx].live || dc->dct[idx].owner != owner ||
	    dc->dct[idx].gen != gen)
		return -EINVAL;
	SimDcDct &t = dc->dct[idx];
	std::atomic_ref<uint32_t>(t.live).store(0, std::memory_order_release);
	pages_mark(dc, t.page, t.npages, false);
	if (t.cq < kDcMaxCq && dc->cq[t.cq].refs)
		dc->cq[t.cq].refs--;
	dc->ctr.dcts--;
	return 0;
}

void
dc_owner_release(SimDc *dc, uint16_t owner)
{
	/* QPs first, so that their CQs have no users left. */
	for (uint32_t i = 0; i < kDcMaxDci; i++)
		if (dc->dci[i].live && dc->dci[i].owner == owner)
			dc_dci_destroy(dc, owner, i, dc->dci[i].gen);
	for (uint32_t i = 0; i < kDcMaxDct; i++)
		if (dc->dct[i].live && dc->dct[i].owner == owner)
			dc_dct_destroy(dc, owner, i, dc->dct[i].gen);
	for (uint32_t i = 0; i < kDcMaxCq; i++) {
		if (dc->cq[i].live && dc->cq[i].owner == owner) {
			dc->cq[i].refs =
				0; /* a QP of another owner on it is impossible (checked) */
			dc_cq_destroy(dc, owner, i, dc->cq[i].gen);
		}
	}
}

void
dc_rebuild(SimDc *dc)
{
	memset(dc->page_bits, 0, sizeof(dc->page_bits));
	dc->nb_active = 0;
	dc->ctr.cqs = dc->ctr.dcis = dc->ctr.dcts = 0;
	/* A process died inside a command: an entry that does not check out is dropped rather
	 * than indexed with. */
	for (uint32_t i = 0; i < kDcMaxCq; i++) {
		if (dc->cq[i].live && !dc_cq_ok(dc->cq[i]))
			dc->cq[i].live = 0;
		if (!dc->cq[i].live)
			continue;
		dc->cq[i].refs = 0;
		pages_mark(dc, dc->cq[i].page, dc->cq[i].npages, true);
		dc->ctr.cqs++;
	}
	for (uint32_t i = 0; i < kDcMaxDci; i++) {
		SimDcDci &d = dc->dci[i];
		if (d.live && (!dc_dci_ok(d) || !dc->cq[d.cq].live))
			d.live = 0;
		if (!d.live)
			continue;
		pages_mark(dc, d.page, d.npages, true);
		d.active_pos = dc->nb_active;
		dc->active[dc->nb_active++] = uint16_t(i);
		dc->cq[d.cq].refs++;
		dc->ctr.dcis++;
	}
	for (uint32_t i = 0; i < kDcMaxDct; i++) {
		if (dc->dct[i].live && (!dc_dct_ok(dc->dct[i]) || !dc->cq[dc->dct[i].cq].live))
			dc->dct[i].live = 0;
		if (!dc->dct[i].live)
			continue;
		pages_mark(dc, dc->dct[i].page, dc->dct[i].npages, true);
		dc->cq[dc->dct[i].cq].refs++;
		dc->ctr.dcts++;
	}
}

bool
dc_valid(const SimDc *dc, uint32_t max_owner, uint32_t nb_uars)
{
	if (dc->nb_active > kDcMaxDci)
		return false;
	uint32_t active = 0;
	for (uint32_t i = 0; i < kDcMaxCq; i++) {
		const SimDcCq &c = dc->cq[i];
		if (c.live > 1 || (c.live && (!dc_cq_ok(c) || c.owner >= max_owner)))
			return false;
	}
	for (uint32_t i = 0; i < kDcMaxDci; i++) {
		const SimDcDci &d = dc->dci[i];
		if (d.live > 1)
			return false;
		if (!d.live)
			continue;
		if (!dc_dci_ok(d) || d.owner >= max_owner || d.uar >= nb_uars ||
		    !dc->cq[d.cq].live || d.active_pos >= dc->nb_active ||
		    dc->active[d.active_pos] != i)
			return false;
		active++;
	}
	for (uint32_t i = 0; i < kDcMaxDct; i++) {
		const SimDcDct &t = dc->dct[i];
		if (t.live > 1 ||
		    (t.live && (!dc_dct_ok(t) || t.owner >= max_owner || !dc->cq[t.cq].live)))
			return false;
	}
	return active == dc->nb_active;
}

int
dc_dci_reset(SimDc *dc, uint16_t owner, uint32_t idx, uint32_t gen)
{
	if (idx >= kDcMaxDci || !dc->dci[idx].live || dc->dci[idx].owner != owner ||
	    dc->dci[idx].gen != gen)
		return -EINVAL;
	SimDcDci &d = dc->dci[idx];
	/* RESET: the QP forgets its queue (a WQE still waiting for its time-out included), so
	 * the queue restarts at BB 0 with a zero doorbell record; INIT/RTR/RTS bring it back.
	 * The record is cleared here, under the device mutex, so no pass ever pairs the old
	 * record with the new counter. */
	d.err = 0;
	d.lost = 0;
	d.exec_bb = 0;
	std::atomic_ref<uint32_t>(d.dbrec[0]).store(0, std::memory_order_relaxed);
	std::atomic_ref<uint32_t>(d.dbrec[MLX5_QPN_SND_DBR]).store(0, std::memory_order_release);
	dc->ctr.resets++;
	return 0;
}

} // namespace mlx5_qpn_sim
