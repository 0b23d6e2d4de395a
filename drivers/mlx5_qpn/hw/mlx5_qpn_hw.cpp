/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rdma-core hardware backend: RESERVED_QPN objects through DEVX, the single-QPN
 * fallback of libmlx5, ordinary UD QPs (mlx5_qpn_hw_qp.cpp) and UAR pages; the probe's
 * firmware commands are in mlx5_qpn_hw_probe.cpp. See mlx5_qpn_hw.h for each op's contract.
 */
#include "mlx5_qpn_hw.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <endian.h>
#include <unistd.h>

#include <mutex>
#include <new>

#include <rte_common.h>

#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_glue.h"
#include "mlx5_qpn_hw_log.h"
#include "mlx5_qpn_hw_memlock.h"
#include "mlx5_qpn_hw_priv.h" /* the device, the QP source, the sizing decisions */
#include "mlx5_qpn_hw_dc.h"   /* the DC table */
#include "mlx5_qpn_prm.h"

RTE_LOG_REGISTER(mlx5_qpn_hw_logtype, mlx5_qpn.hw, INFO);

namespace {

using namespace mlx5_qpn_hw;

mlx5_qpn_hw_dev *
to_dev(struct mlx5_qpn_backend *be)
{
	return reinterpret_cast<mlx5_qpn_hw_dev *>(be);
}

void
list_add(mlx5_qpn_hw_dev *dev, hw_node *n)
{
	std::lock_guard<std::mutex> g(dev->lock);
	n->next = &dev->head;
	n->prev = dev->head.prev;
	dev->head.prev->next = n;
	dev->head.prev = n;
}

void
list_unlink(hw_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

/* Take the node out of the list if it is one of ours of that kind; NULL otherwise. */
hw_node *
list_take(mlx5_qpn_hw_dev *dev, node_kind kind, const hw_node *want, uint32_t qpn)
{
	std::lock_guard<std::mutex> g(dev->lock);
	for (hw_node *n = dev->head.next; n != &dev->head; n = n->next) {
		if (n->kind != kind)
			continue;
		if (want != nullptr ? n == want : n->qpn == qpn) {
			list_unlink(n);
			return n;
		}
	}
	return nullptr;
}

void
free_dev(mlx5_qpn_hw_dev *dev)
{
	mlx5_qpn_hw_qps_free(dev->qps, 1);
	hw_dc_close(dev);
	if (dev->ctx != nullptr)
		dev->glue->close_device(dev->ctx);
	delete dev;
}

/* ---- ops ---- */

/* The context: with DEVX when the device allows it, verbs only otherwise. */
int
open_context(mlx5_qpn_hw_dev *dev, struct ibv_device *found)
{
	struct mlx5dv_context_attr dv_attr;
	memset(&dv_attr, 0, sizeof(dv_attr));
	dv_attr.flags = MLX5DV_CONTEXT_FLAGS_DEVX;
	errno = 0;
	dev->ctx = dev->glue->dv_open_device(found, &dv_attr);
	if (dev->ctx != nullptr) {
		dev->caps.devx = 1;
		return 0;
	}
	/* DEVX refused (no permission, old kernel): verbs only, single-QPN API only. */
	dev->probe.err = errno != 0 ? -errno : -EIO;
	HW_LOG(DEBUG, "%s: DEVX context refused (%s), opening without it", dev->name,
	       strerror(-dev->probe.err));
	errno = 0;
	dev->ctx = dev->glue->open_device(found);
	if (dev->ctx != nullptr)
		return 0;
	int rc = errno != 0 ? -errno : -ENODEV;
	HW_LOG(ERR, "cannot open RDMA device \"%s\" (%s)", dev->name, strerror(-rc));
	return rc;
}

/*
 * The UD fallback pins memory per QPN (mlx5_qpn_hw_qps_fit()): cap it at what RLIMIT_MEMLOCK
 * leaves, in caps.qpn_limit (the generic layer grows no further) and in the holder, with one
 * line when the cap is below what the generic layer could ask for. -ENOMEM (one line) when not
 * even the shared CQ and one QP fit.
 */
int
cap_ordinary(mlx5_qpn_hw_dev *dev, const struct mlx5_qpn_devargs *da)
{
	const long ps = sysconf(_SC_PAGESIZE);
	const uint64_t page = ps > 0 ? static_cast<uint64_t>(ps) : 4096;
	uint64_t limit = 0, pinned = 0;
	const uint32_t fit = mlx5_qpn_hw_qps_fit(mlx5_qpn_hw_memlock_room(&limit, &pinned), page);
	struct ibv_qp_init_attr attr;
	mlx5_qpn_hw_qp_init_attr(&attr, nullptr);
	const uint64_t per_qp = mlx5_qpn_hw_qp_pin_bytes(&attr, page);
	const uint64_t cq = mlx5_qpn_hw_cq_pin_bytes(MLX5_QPN_HW_QP_CQE, page);
	if (fit == 0)
		return mlx5_qpn_hw_memlock_check(dev->name, cq + per_qp,
						 "the UD fallback's shared CQ and first QP");
	uint64_t want = da->max_qpns;
	if (dev->caps.log_max_qp < 32 && (1ull << dev->caps.log_max_qp) < want)
		want = 1ull << dev->caps.log_max_qp;
	if (fit >= want)
		return 0;
	dev->caps.qpn_limit = fit;
	mlx5_qpn_hw_qps_set_cap(dev->qps, fit);
	char lim[32], pin[32];
	HW_LOG(WARNING,
	       "%s: ordinary UD QPs capped at %u of %llu: RLIMIT_MEMLOCK is %s (%s pinned "
	       "already), each QP pins %llu bytes and their shared CQ %llu",
	       dev->name, fit, static_cast<unsigned long long>(want),
	       mlx5_qpn_hw_memlock_str(limit, lim, sizeof(lim)),
	       mlx5_qpn_hw_memlock_str(pinned, pin, sizeof(pin)),
	       static_cast<unsigned long long>(per_qp), static_cast<unsigned long long>(cq));
	return 0;
}

/* Caps, the trial object, the source and its holder; the probe's lines on success. */
int
probe_device(mlx5_qpn_hw_dev *dev, const struct mlx5_qpn_devargs *da)
{
	const auto *hwa = reinterpret_cast<const mlx5_qpn_hw_devargs *>(da->be_args);
	dev->port = uint8_t(hwa->port != 0 ? hwa->port : MLX5_QPN_HW_DC_PORT);
	dev->probing = true;
	dc_async_nonblock(dev);
	read_caps(dev);
	if (dev->caps.nb_ports != 0 && dev->port > dev->caps.nb_ports) {
		HW_LOG(ERR, "%s: port=%u but the device has %u port(s)", da->name, dev->port,
		       dev->caps.nb_ports);
		return -EINVAL;
	}
	trial_allocation(dev, da);
	dev->probing = false;
	const enum mlx5_qpn_hw_source src = mlx5_qpn_hw_source_choose(da->reserved_qpn,
								      &dev->probe);
	if (src == MLX5_QPN_HW_SRC_NONE) {
		char why[128];
		mlx5_qpn_hw_probe_reason(&dev->probe, why, sizeof(why));
		HW_LOG(ERR, "%s: reserved_qpn=yes but RESERVED_QPN objects are unusable: %s",
		       da->name, why);
		return -EOPNOTSUPP;
	}
	dev->qps = mlx5_qpn_hw_qps_new(dev->glue, dev->ctx, dev->name);
	if (dev->qps == nullptr)
		return -ENOMEM;
	if (src == MLX5_QPN_HW_SRC_ORDINARY) {
		int rc = cap_ordinary(dev, da);
		if (rc != 0)
			return rc;
	}
	log_setup(dev, src);
	log_probe(dev, src);
	log_dc_host(dev);
	return 0;
}

/* ---- ops ---- */

int
hw_open(const struct mlx5_qpn_devargs *da, struct mlx5_qpn_backend **out)
{
	if (da == nullptr || out == nullptr || da->name[0] == '\0' ||
	    memchr(da->name, '\0', sizeof(da->name)) == nullptr) {
		HW_LOG(ERR, "hw open: no device name given");
		return -EINVAL;
	}
	*out = nullptr;
	const struct mlx5_qpn_glue *glue = nullptr;
	struct ibv_device **list = nullptr;
	struct ibv_device *found = nullptr;
	int rc = find_device(da->name, &glue, &list, &found);
	if (rc != 0)
		return rc;
	mlx5_qpn_hw_dev *dev = new (std::nothrow) mlx5_qpn_hw_dev();
	if (dev == nullptr) {
		glue->free_device_list(list);
		return -ENOMEM;
	}
	dev->glue = glue;
	dev->head.prev = dev->head.next = &dev->head;
	dev->owner_pid = getpid();
	snprintf(dev->name, sizeof(dev->name), "%s", da->name);
	/* Before the context: ibv_fork_init() refuses once anything is pinned. */
	fork_setup(dev);
	rc = open_context(dev, found);
	/* Opened contexts keep their device alive after the list is freed. */
	glue->free_device_list(list);
	if (rc == 0)
		rc = probe_device(dev, da);
	if (rc != 0) {
		free_dev(dev);
		return rc;
	}
	*out = reinterpret_cast<struct mlx5_qpn_backend *>(dev);
	return 0;
}

int
hw_query_caps(struct mlx5_qpn_backend *be, struct mlx5_qpn_caps *caps)
{
	if (be == nullptr || caps == nullptr)
		return -EINVAL;
	*caps = to_dev(be)->caps;
	return 0;
}

int
hw_range_reserve(struct mlx5_qpn_backend *be, uint32_t log_size, struct mlx5_qpn_range_obj *obj)
{
	if (be == nullptr || obj == nullptr)
		return -EINVAL;
	mlx5_qpn_hw_dev *dev = to_dev(be);
	if (!dev->objs_ok)
		return -ENOTSUP;
	if (log_size > MLX5_QPN_PRM_MAX_LOG_RANGE ||
	    mlx5_qpn_prm_clamp_log_range(&dev->caps, log_size) != log_size) {
		HW_LOG(ERR, "%s: range of 2^%u QPNs outside the device's 2^%u..2^%u", dev->name,
		       log_size, dev->caps.log_reserved_qpn_granularity,
		       mlx5_qpn_prm_clamp_log_range(&dev->caps, MLX5_QPN_PRM_MAX_LOG_RANGE));
		return -EINVAL;
	}
	hw_node *n = new (std::nothrow) hw_node();
	if (n == nullptr)
		return -ENOMEM;
	n->kind = node_kind::range;
	/* Never above what the firmware accepted: obj->log_size tells the caller what it got. */
	const uint8_t ok = dev->log_ok.load(std::memory_order_relaxed);
	n->log_size = static_cast<uint8_t>(log_size < ok ? log_size : ok);
	int rc = create_rsvd_obj_stepping(dev, &n->log_size, &n->obj, &n->qpn);
	if (rc != 0) {
		delete n;
		return rc;
	}
	list_add(dev, n);
	memset(obj, 0, sizeof(*obj));
	obj->first_qpn = n->qpn;
	obj->log_size = n->log_size;
	obj->single = 0;
	obj->handle = reinterpret_cast<uintptr_t>(n);
	return 0;
}

int
hw_range_release(struct mlx5_qpn_backend *be, const struct mlx5_qpn_range_obj *obj)
{
	if (be == nullptr || obj == nullptr)
		return -EINVAL;
	mlx5_qpn_hw_dev *dev = to_dev(be);
	/* The handle is only compared, never dereferenced, until it is found in our list. */
	hw_node *n =
		list_take(dev, node_kind::range,
			  reinterpret_cast<const hw_node *>(static_cast<uintptr_t>(obj->handle)),
			  0);
	if (n == nullptr || n->qpn != obj->first_qpn) {
		if (n != nullptr)
			list_add(dev, n);
		HW_LOG(ERR, "%s: range at QPN 0x%x is not held by this device", dev->name,
		       obj->first_qpn);
		return -EINVAL;
	}
	int rc = destroy_rsvd_obj(dev, n->obj, n->qpn);
	if (rc != 0) {
		/* Still held by the device: keep it so close can try again. */
		list_add(dev, n);
		return rc;
	}
	delete n;
	return 0;
}

int
hw_qpn_reserve_one(struct mlx5_qpn_backend *be, uint32_t *qpn)
{
	if (be == nullptr || qpn == nullptr)
		return -EINVAL;
	mlx5_qpn_hw_dev *dev = to_dev(be);
	/* rdma-core makes the same objects at the granularity: where the trial failed it would
	 * fail too, so say so without asking (the generic layer then uses ordinary QPs). An
	 * rdma-core before 34 has no such call at all. */
	if (!dev->objs_ok || dev->glue->reserved_qpn_alloc == nullptr)
		return -EOPNOTSUPP;
	hw_node *n = new (std::nothrow) hw_node();
	if (n == nullptr)
		return -ENOMEM;
	n->kind = node_kind::single_qpn;
	int rc = neg_errno(dev->glue->reserved_qpn_alloc(dev->ctx, &n->qpn));
	if (rc != 0) {
		delete n;
		if (rc != -EOPNOTSUPP)
			HW_LOG(ERR, "%s: mlx5dv_reserved_qpn_alloc failed (%s)", dev->name,
			       strerror(-rc));
		return rc;
	}
	list_add(dev, n);
	*qpn = n->qpn;
	return 0;
}

int
hw_qpn_release_one(struct mlx5_qpn_backend *be, uint32_t qpn)
{
	if (be == nullptr)
		return -EINVAL;
	mlx5_qpn_hw_dev *dev = to_dev(be);
	/* Refused before rdma-core sees it: a double free must not reach libmlx5's lists. */
	hw_node *n = list_take(dev, node_kind::single_qpn, nullptr, qpn);
	if (n == nullptr) {
		HW_LOG(ERR, "%s: QPN 0x%x is not a reserved QPN of this device", dev->name, qpn);
		return -EINVAL;
	}
	int rc = neg_errno(dev->glue->reserved_qpn_dealloc(dev->ctx, qpn));
	if (rc != 0) {
		HW_LOG(ERR, "%s: mlx5dv_reserved_qpn_dealloc(0x%x) failed (%s)", dev->name, qpn,
		       strerror(-rc));
		list_add(dev, n);
		return rc;
	}
	delete n;
	return 0;
}

int
hw_uar_map(struct mlx5_qpn_backend *be, struct mlx5_qpn_uar *uar)
{
	if (be == nullptr || uar == nullptr)
		return -EINVAL;
	mlx5_qpn_hw_dev *dev = to_dev(be);
	if (!dev->caps.devx)
		return -ENOTSUP;
	hw_node *n = new (std::nothrow) hw_node();
	if (n == nullptr)
		return -ENOMEM;
	n->kind = node_kind::uar;
	/* Non-cached first: doorbells of few QPs gain nothing from BlueFlame write-combining. */
	errno = 0;
	n->uar = dev->glue->devx_alloc_uar(dev->ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
	if (n->uar == nullptr)
		n->uar = dev->glue->devx_alloc_uar(dev->ctx, MLX5DV_UAR_ALLOC_TYPE_BF);
	if (n->uar == nullptr) {
		int rc = errno != 0 ? -errno : -ENOMEM;
		delete n;
		HW_LOG(ERR, "%s: mlx5dv_devx_alloc_uar failed (%s)", dev->name, strerror(-rc));
		return rc;
	}
	list_add(dev, n);
	memset(uar, 0, sizeof(*uar));
	uar->base_addr = n->uar->base_addr;
	uar->reg_addr = n->uar->reg_addr;
	uar->page_id = n->uar->page_id;
	uar->mmap_off = static_cast<uint64_t>(n->uar->mmap_off);
	uar->handle = reinterpret_cast<uintptr_t>(n);
	return 0;
}

int
hw_uar_unmap(struct mlx5_qpn_backend *be, struct mlx5_qpn_uar *uar)
{
	if (be == nullptr || uar == nullptr)
		return -EINVAL;
	mlx5_qpn_hw_dev *dev = to_dev(be);
	hw_node *n =
		list_take(dev, node_kind::uar,
			  reinterpret_cast<const hw_node *>(static_cast<uintptr_t>(uar->handle)),
			  0);
	if (n == nullptr) {
		HW_LOG(ERR, "%s: UAR page %u is not mapped by this device", dev->name,
		       uar->page_id);
		return -EINVAL;
	}
	dev->glue->devx_free_uar(n->uar);
	delete n;
	memset(uar, 0, sizeof(*uar));
	return 0;
}

int
hw_qp_create(struct mlx5_qpn_backend *be, uint32_t *qpn)
{
	if (be == nullptr || qpn == nullptr)
		return -EINVAL;
	return mlx5_qpn_hw_qps_get(to_dev(be)->qps, qpn);
}

int
hw_qp_destroy(struct mlx5_qpn_backend *be, uint32_t qpn)
{
	if (be == nullptr)
		return -EINVAL;
	return mlx5_qpn_hw_qps_put(to_dev(be)->qps, qpn);
}

/*
 * A forked child shares the parent's uverbs file: destroying an object, freeing a UAR, even
 * ibv_close_device() (libmlx5 destroys its reserved-QPN blocks there) would act on the
 * parent's objects. The child frees its own memory only.
 */
void
close_in_child(mlx5_qpn_hw_dev *dev)
{
	unsigned int nodes = 0;
	while (dev->head.next != &dev->head) {
		hw_node *n = dev->head.next;
		list_unlink(n);
		delete n;
		nodes++;
	}
	unsigned int qps = mlx5_qpn_hw_qps_free(dev->qps, 0);
	HW_LOG(INFO,
	       "%s: closed in a child of pid %d: %u objects and %u QPs left to "
	       "their owner",
	       dev->name, static_cast<int>(dev->owner_pid), nodes, qps);
	delete dev;
}

void
hw_close(struct mlx5_qpn_backend *be)
{
	if (be == nullptr)
		return;
	mlx5_qpn_hw_dev *dev = to_dev(be);
	if (getpid() != dev->owner_pid) {
		close_in_child(dev);
		return;
	}
	unsigned int ranges = 0, singles = 0, uars = 0;
	/* Close is not concurrent with other ops (contract), so the list is walked unlocked. */
	while (dev->head.next != &dev->head) {
		hw_node *n = dev->head.next;
		list_unlink(n);
		switch (n->kind) {
		case node_kind::range:
			destroy_rsvd_obj(dev, n->obj, n->qpn);
			ranges++;
			break;
		case node_kind::single_qpn: /* only made where the pair exists */
			dev->glue->reserved_qpn_dealloc(dev->ctx, n->qpn);
			singles++;
			break;
		case node_kind::uar:
			dev->glue->devx_free_uar(n->uar);
			uars++;
			break;
		}
		delete n;
	}
	const uint32_t qps = mlx5_qpn_hw_qps_count(dev->qps);
	if (ranges + singles + uars + qps != 0)
		HW_LOG(INFO,
		       "%s: closed with %u ranges, %u single QPNs, %u UARs, %u "
		       "ordinary QPs still held",
		       dev->name, ranges, singles, uars, qps);
	free_dev(dev);
}

} /* namespace */

extern "C" const struct mlx5_qpn_dev_ops mlx5_qpn_hw_ops = {
	.open = hw_open,
	.query_caps = hw_query_caps,
	.range_reserve = hw_range_reserve,
	.range_release = hw_range_release,
	.qpn_reserve_one = hw_qpn_reserve_one,
	.qpn_release_one = hw_qpn_release_one,
	.qp_create = hw_qp_create,
	.qp_destroy = hw_qp_destroy,
	.uar_map = hw_uar_map,
	.uar_unmap = hw_uar_unmap,
	.dc = &mlx5_qpn_hw_dc_ops, /* mlx5_qpn_hw_dc.cpp */
	.close = hw_close,
};

/*
 * The hardware backend registers itself at load. It takes devices named by key ("ib=mlx5_0")
 * and one key of its own (port=), and where it sits comes from hwloc (no
 * `where` hook). Its purge keeps nothing of its own to remove (the kernel destroys a dead
 * process's DEVX objects) and names the device's GUID, whose lease file the generic layer
 * removes (mlx5_qpn_hw_purge(), mlx5_qpn_hw_probe.cpp).
 */
static_assert(sizeof(mlx5_qpn_hw_devargs) <= sizeof(mlx5_qpn_devargs::be_args), "be_args room");

static const struct mlx5_qpn_devarg_key kHwKeys[] = {
	{"port", MLX5_QPN_DEVARG_UINT, 1, 255, offsetof(mlx5_qpn_hw_devargs, port),
	 sizeof(mlx5_qpn_hw_devargs::port)},
};

static void
hw_args_default(void *args)
{
	static_cast<mlx5_qpn_hw_devargs *>(args)->port = MLX5_QPN_HW_DC_PORT;
}

static const struct mlx5_qpn_backend_desc hw_backend = {
	.name = "hw",
	.flags = 0,
	.name_prefix = nullptr,
	.name_key = "ib",
	.owner = "a hardware device (ib=NAME)",
	.ops = &mlx5_qpn_hw_ops,
	.keys = kHwKeys,
	.nb_keys = RTE_DIM(kHwKeys),
	.args_default = hw_args_default,
	.args_check = nullptr,
	.where = nullptr,
	.purge = mlx5_qpn_hw_purge,
};

RTE_INIT(mlx5_qpn_hw_register) { mlx5_qpn_backend_register(&hw_backend); }
