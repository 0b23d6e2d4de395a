/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's QPN commands: RESERVED_QPN objects (CREATE/DESTROY_GENERAL_OBJECT), the
 * single-QPN model of rdma-core's mlx5dv_reserved_qpn_alloc() on top of them, ordinary QPs and
 * the special QP0/QP1, all from the device-global QPN table (sim_qpn_table.h).
 */
#include "sim_internal.h"
#include "mlx5_qpn_prm_status.h"

#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <new>

using namespace mlx5_qpn_sim;

namespace mlx5_qpn_sim {

/* CREATE_GENERAL_OBJECT(RESERVED_QPN, log_obj_range = log_size). */
static int
create_rsvd_qpn(SimDev *d, uint32_t log_size, mlx5_qpn_range_obj *obj)
{
	SimShm *s = d->shm;

	if (s->cfg.fault_nodevx) {
		/* The cap bit is set but the context has no DEVX: mlx5dv refuses before any
		 * command reaches the device. */
		SIM_LOG(DEBUG, "device %s: no DEVX on this context", d->name);
		return -EOPNOTSUPP;
	}
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	uint8_t st = fw_begin(s, CMD_CREATE);
	if (st)
		goto fail;
	if (!s->cfg.cap_reserved_qpn) {
		st = MLX5_QPN_CMD_STAT_BAD_OP_ERR;
		goto fail;
	}
	if (log_size < s->cfg.log_gran || log_size > s->cfg.log_max_alloc) {
		SIM_LOG(ERR, "device %s: RESERVED_QPN log_obj_range %u outside [%u, %u]", d->name,
			log_size, s->cfg.log_gran, s->cfg.log_max_alloc);
		st = MLX5_QPN_CMD_STAT_BAD_PARAM_ERR;
		goto fail;
	}
	{
		uint64_t n = uint64_t(1) << log_size;
		uint64_t lim = uint64_t(1) << s->cfg.log_max_num;
		if (s->cfg.limit && s->cfg.limit < lim)
			lim = s->cfg.limit;
		int got = -ENOMEM;
		/* The kernel destroys a dead process's objects at once and the firmware may hand
		 * their QPNs out next: never be more lenient than that. */
		reclaim_dead(s);
		for (int attempt = 0; attempt < 2; attempt++) {
			if (s->ctr.qpns_reserved + n <= lim && s->recs_live < kRecMaxLive)
				got = s->table.reserve_block(log_size, prefix_of(s),
							     d->fw_first_fit);
			if (got >= 0 || attempt == 1)
				break;
			/* No room: dead processes' objects may be what fills it. */
			if (reclaim_dead(s) == 0)
				break;
		}
		if (got < 0) {
			SIM_LOG(DEBUG,
				"device %s: no room for 2^%u reserved QPNs (%" PRIu64 " of %" PRIu64
				" reserved)",
				d->name, log_size, s->ctr.qpns_reserved, lim);
			st = MLX5_QPN_CMD_STAT_LIM_ERR;
			goto fail;
		}
		SimRec r = {};
		r.key = index_of(s, uint32_t(got)) + 1;
		r.owner = d->slot;
		r.kind = REC_OBJ;
		r.log_size = uint8_t(log_size);
		r.gen = ++s->gen_next;
		rec_insert(s, r); /* room checked above */
		s->ctr.objs_live++;
		s->ctr.qpns_reserved += n;
		obj->first_qpn = uint32_t(got);
		obj->log_size = uint8_t(log_size);
		obj->single = 0;
		obj->rsvd = 0;
		obj->handle = (uint64_t(r.gen) << 32) | MLX5_QPN_OBJ_TYPE_RESERVED_QPN;
	}
	dev_unlock(s);
	return 0;
fail:
	rc = fw_fail(s, st);
	dev_unlock(s);
	return rc;
}

/* DESTROY_GENERAL_OBJECT: only the owning handle can name its object. */
static int
destroy_rsvd_qpn(SimDev *d, const mlx5_qpn_range_obj *obj)
{
	SimShm *s = d->shm;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	fw_begin(s, CMD_DESTROY);
	SimRec *r = nullptr;
	if (obj->first_qpn < (s->cfg.aip ? ((uint32_t(kAipPrefix) + 1) << kAipShift) : kQpnSpace) &&
	    (!s->cfg.aip || (obj->first_qpn >> kAipShift) == kAipPrefix))
		r = rec_find(s, index_of(s, obj->first_qpn) + 1);
	if ((r == nullptr) || r->kind != REC_OBJ || r->owner != d->slot ||
	    r->log_size != obj->log_size || r->gen != uint32_t(obj->handle >> 32)) {
		SIM_LOG(ERR, "device %s: no RESERVED_QPN object 0x%x (2^%u) of this handle",
			d->name, obj->first_qpn, unsigned(obj->log_size));
		rc = fw_fail(s, MLX5_QPN_CMD_STAT_BAD_RES_ERR);
		dev_unlock(s);
		return rc;
	}
	rec_release(s, r);
	dev_unlock(s);
	return 0;
}

int
sim_range_reserve(mlx5_qpn_backend *be, uint32_t log_size, mlx5_qpn_range_obj *obj)
{
	if ((be == nullptr) || (obj == nullptr))
		return -EINVAL;
	return create_rsvd_qpn(to_dev(be), log_size, obj);
}

int
sim_range_release(mlx5_qpn_backend *be, const mlx5_qpn_range_obj *obj)
{
	if ((be == nullptr) || (obj == nullptr))
		return -EINVAL;
	return destroy_rsvd_qpn(to_dev(be), obj);
}

int
sim_qpn_reserve_one(mlx5_qpn_backend *be, uint32_t *qpn)
{
	if ((be == nullptr) || (qpn == nullptr))
		return -EINVAL;
	SimDev *d = to_dev(be);
	if (!d->shm->cfg.cap_reserved_qpn || d->shm->cfg.fault_nodevx)
		return -EOPNOTSUPP; /* as mlx5dv_reserved_qpn_alloc without the object type or DEVX */

	pthread_mutex_lock(&d->lock);
	SingleBlock *b = d->nb_blks ? &d->blks[d->nb_blks - 1] : nullptr;
	if ((b == nullptr) || b->next == b->size) {
		if (d->nb_blks == d->cap_blks) {
			uint32_t cap = d->cap_blks ? 2 * d->cap_blks : 8;
			auto *p = new (std::nothrow) SingleBlock[cap];
			if (p == nullptr) {
				pthread_mutex_unlock(&d->lock);
				return -ENOMEM;
			}
			for (uint32_t k = 0; k < d->nb_blks; k++)
				p[k] = d->blks[k];
			delete[] d->blks;
			d->blks = p;
			d->cap_blks = cap;
		}
		SingleBlock nb = {};
		/* The size comes from the object the device made (checked under its mutex), never
		 * from a shift by a field read back from shared memory without it. */
		int rc = create_rsvd_qpn(d, d->shm->cfg.log_gran, &nb.obj);
		if (rc) {
			pthread_mutex_unlock(&d->lock);
			return rc;
		}
		nb.size = uint32_t(1) << nb.obj.log_size;
		nb.bits = new (std::nothrow) uint64_t[(nb.size + 63) / 64]();
		if (nb.bits == nullptr) {
			destroy_rsvd_qpn(d, &nb.obj);
			pthread_mutex_unlock(&d->lock);
			return -ENOMEM;
		}
		nb.obj.single = 1;
		d->blks[d->nb_blks++] = nb;
		b = &d->blks[d->nb_blks - 1];
	}
	uint32_t i = b->next++;
	b->bits[i / 64] |= uint64_t(1) << (i % 64);
	*qpn = b->obj.first_qpn + i;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

int
sim_qpn_release_one(mlx5_qpn_backend *be, uint32_t qpn)
{
	if (be == nullptr)
		return -EINVAL;
	SimDev *d = to_dev(be);
	int rc = -EINVAL;

	pthread_mutex_lock(&d->lock);
	for (uint32_t k = 0; k < d->nb_blks; k++) {
		SingleBlock *b = &d->blks[k];
		if (qpn < b->obj.first_qpn || qpn - b->obj.first_qpn >= b->size)
			continue;
		uint32_t i = qpn - b->obj.first_qpn;
		if (!(b->bits[i / 64] & (uint64_t(1) << (i % 64))))
			break; /* never handed out, or a double free */
		b->bits[i / 64] &= ~(uint64_t(1) << (i % 64));
		rc = 0;
		if (++b->returned == b->size) {
			/* Every QPN of the block was handed out and came back. */
			rc = destroy_rsvd_qpn(d, &b->obj);
			delete[] b->bits;
			/* Removed in place: the list keeps its order, so its tail stays the newest
			 * block, the one handed out from (a block moved to the tail's place would
			 * hide the newest one's unused QPNs; it would never come back whole, and
			 * its object would never be destroyed). */
			memmove(&d->blks[k], &d->blks[k + 1],
				sizeof(SingleBlock) * (d->nb_blks - k - 1));
			d->nb_blks--;
		}
		break;
	}
	pthread_mutex_unlock(&d->lock);
	if (rc == -EINVAL)
		SIM_LOG(ERR, "device %s: QPN 0x%x is not a reserved QPN held by this handle",
			d->name, qpn);
	return rc;
}

int
sim_cmd_count(mlx5_qpn_backend *be, uint64_t *n)
{
	if ((be == nullptr) || (n == nullptr))
		return -EINVAL;
	SimShm *s = to_dev(be)->shm;
	int rc = dev_lock(s, to_dev(be)->name);
	if (rc)
		return rc;
	*n = s->ctr.commands;
	dev_unlock(s);
	return 0;
}

/* An ordinary QP number from the table, recorded as `kind` for this handle. Mutex held.
 * @return 0 or the PRM status (LIM_ERR: no QPN left). */
uint8_t
qp_alloc_locked(SimDev *d, uint8_t kind, uint32_t aux, uint32_t *qpn)
{
	SimShm *s = d->shm;
	int got = -ENOMEM;

	for (int attempt = 0; attempt < 2; attempt++) {
		if (s->ctr.qps_live < (uint64_t(1) << s->cfg.log_max_qp) &&
		    s->recs_live < kRecMaxLive)
			got = s->table.alloc(QpType::ORDINARY, 1, prefix_of(s));
		if (got >= 0 || attempt == 1 || reclaim_dead(s) == 0)
			break;
	}
	if (got < 0)
		return MLX5_QPN_CMD_STAT_LIM_ERR;
	SimRec r = {};
	r.key = index_of(s, uint32_t(got)) + 1;
	r.owner = d->slot;
	r.kind = kind;
	r.gen = ++s->gen_next;
	r.aux = aux;
	rec_insert(s, r);
	s->ctr.qps_live++;
	*qpn = uint32_t(got);
	return 0;
}

int
sim_qp_create(mlx5_qpn_backend *be, uint32_t *qpn)
{
	if ((be == nullptr) || (qpn == nullptr))
		return -EINVAL;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	uint8_t st = fw_begin(s, CMD_CREATE);
	if (!st)
		st = qp_alloc_locked(d, REC_QP, 0, qpn);
	rc = st ? fw_fail(s, st) : 0;
	dev_unlock(s);
	return rc;
}

int
sim_qp_destroy(mlx5_qpn_backend *be, uint32_t qpn)
{
	if (be == nullptr)
		return -EINVAL;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	fw_begin(s, CMD_DESTROY);
	SimRec *r = nullptr;
	if (s->table.test(qpn, prefix_of(s)))
		r = rec_find(s, index_of(s, qpn) + 1);
	if ((r == nullptr) || r->kind != REC_QP || r->owner != d->slot) {
		SIM_LOG(ERR, "device %s: no QP 0x%x of this handle", d->name, qpn);
		rc = fw_fail(s, MLX5_QPN_CMD_STAT_BAD_RES_ERR);
	} else {
		rec_release(s, r);
	}
	dev_unlock(s);
	return rc;
}

} // namespace mlx5_qpn_sim

extern "C" {

int
mlx5_qpn_sim_special_qp(struct mlx5_qpn_backend *be, int gsi, uint32_t port, uint32_t *qpn)
{
	if ((be == nullptr) || (qpn == nullptr) || (gsi != 0 && gsi != 1))
		return -EINVAL;
	SimDev *d = to_dev(be);
	SimShm *s = d->shm;
	int rc = dev_lock(s, d->name);
	if (rc)
		return rc;
	uint8_t st = fw_begin(s, CMD_CREATE);
	if (st) {
		rc = fw_fail(s, st);
	} else {
		rc = s->table.alloc(gsi ? QpType::GSI : QpType::SMI, port, prefix_of(s));
		if (rc >= 0) {
			*qpn = uint32_t(rc);
			rc = 0;
		} else {
			SIM_LOG(ERR,
				"device %s: QP%d of port %u exists already or the port is invalid",
				d->name, gsi, port);
			rc = fw_fail(s, MLX5_QPN_CMD_STAT_BAD_PARAM_ERR);
		}
	}
	dev_unlock(s);
	return rc;
}

} /* extern "C" */
