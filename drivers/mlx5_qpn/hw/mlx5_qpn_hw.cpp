/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rdma-core hardware backend: RESERVED_QPN objects through DEVX, the single-QPN
 * fallback of libmlx5, and UAR pages. See mlx5_qpn_hw.h for the contract of each op.
 */
#include "mlx5_qpn_hw.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <mutex>
#include <new>

#include <rte_common.h>

#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_glue.h"
#include "mlx5_qpn_hw_log.h"
#include "common/mlx5_qpn_prm.h"

RTE_LOG_REGISTER(mlx5_qpn_hw_logtype, mlx5_qpn.hw, INFO);

namespace {

/* What a bookkeeping node holds: everything the device must give back at close. */
enum class node_kind { range, single_qpn, uar };

struct hw_node {
	hw_node *prev;
	hw_node *next;
	node_kind kind;
	uint32_t qpn;                /* first QPN of a range, or the single QPN */
	uint8_t log_size;
	struct mlx5dv_devx_obj *obj; /* range */
	struct mlx5dv_devx_uar *uar; /* uar */
};

struct mlx5_qpn_hw_dev {
	struct mlx5_qpn_backend base{&mlx5_qpn_hw_ops}; /* first: the handle leads to its table */
	const struct mlx5_qpn_glue *glue;
	struct ibv_context *ctx;
	char name[MLX5_QPN_DEV_NAMESIZE];
	struct mlx5_qpn_caps caps;
	bool objs_ok;   /* RESERVED_QPN objects proven by the trial allocation */
	std::mutex lock; /* guards the list only; never held across a firmware command */
	hw_node head;   /* circular list sentinel */
};

mlx5_qpn_hw_dev *
to_dev(struct mlx5_qpn_backend *be)
{
	return reinterpret_cast<mlx5_qpn_hw_dev *>(be);
}

/* rdma-core returns positive errno values, some wrappers negative ones: make it negative. */
int
neg_errno(int rc)
{
	return rc > 0 ? -rc : rc;
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

/*
 * After a failed DEVX command: the firmware status in the outbox if there is one (the kernel
 * copies the outbox back on a command error), else the errno of the call.
 */
int
cmd_error(const mlx5_qpn_hw_dev *dev, const char *what, const void *out, size_t outlen,
	  int sys_errno)
{
	uint8_t status = 0;
	uint32_t syndrome = 0;
	mlx5_qpn_prm_out_status(out, outlen, &status, &syndrome);
	int rc = status != 0 ? mlx5_qpn_fw_status_to_errno(status) : neg_errno(sys_errno);
	if (rc == 0)
		rc = -EIO;
	MLX5_QPN_HW_LOG(ERR, "%s: %s failed: status 0x%x syndrome 0x%x (%s)", dev->name, what,
			status, syndrome, strerror(-rc));
	return rc;
}

int
query_hca_cap(mlx5_qpn_hw_dev *dev, uint16_t type, uint32_t *out, size_t outlen)
{
	uint32_t in[MLX5_QPN_PRM_QUERY_HCA_CAP_IN_LEN / 4];
	mlx5_qpn_prm_query_hca_cap_in(in, sizeof(in),
				      MLX5_QPN_HCA_CAP_OP_MOD(type, MLX5_QPN_HCA_CAP_OPMOD_CUR));
	memset(out, 0, outlen);
	errno = 0;
	int rc = dev->glue->devx_general_cmd(dev->ctx, in, sizeof(in), out, outlen);
	if (rc != 0)
		return cmd_error(dev, type == MLX5_QPN_HCA_CAP_TYPE_GENERAL ? "QUERY_HCA_CAP" :
									    "QUERY_HCA_CAP(caps 2)",
				 out, outlen, rc);
	return 0;
}

/* One RESERVED_QPN object; *obj and *first_qpn on success. */
int
create_rsvd_obj(mlx5_qpn_hw_dev *dev, uint8_t log_size, struct mlx5dv_devx_obj **obj,
		uint32_t *first_qpn)
{
	uint32_t in[MLX5_QPN_PRM_CREATE_RSVD_QPN_IN_LEN / 4];
	uint32_t out[MLX5_QPN_PRM_GENERAL_OBJ_OUT_LEN / 4] = {};
	int rc = mlx5_qpn_prm_create_rsvd_qpn_in(in, sizeof(in), log_size);
	if (rc != 0)
		return rc;
	errno = 0;
	struct mlx5dv_devx_obj *o = dev->glue->devx_obj_create(dev->ctx, in, sizeof(in), out,
							       sizeof(out));
	if (o == nullptr)
		return cmd_error(dev, "CREATE_GENERAL_OBJECT(RESERVED_QPN)", out, sizeof(out),
				 errno != 0 ? errno : EIO);
	rc = mlx5_qpn_prm_create_obj_out_id(out, sizeof(out), first_qpn);
	if (rc != 0) {
		dev->glue->devx_obj_destroy(o);
		return rc;
	}
	*obj = o;
	return 0;
}

int
destroy_rsvd_obj(mlx5_qpn_hw_dev *dev, struct mlx5dv_devx_obj *obj, uint32_t first_qpn)
{
	int rc = neg_errno(dev->glue->devx_obj_destroy(obj));
	if (rc != 0)
		MLX5_QPN_HW_LOG(ERR, "%s: destroying RESERVED_QPN object 0x%x failed (%s)", dev->name,
				first_qpn, strerror(-rc));
	return rc;
}

uint8_t
floor_log2(uint64_t v)
{
	uint8_t l = 0;
	while (v > 1) {
		v >>= 1;
		l++;
	}
	return l;
}

/* Caps from verbs (GUID, ports, QP count) and, with DEVX, from the HCA caps. */
void
read_caps(mlx5_qpn_hw_dev *dev)
{
	struct ibv_device_attr attr;
	memset(&attr, 0, sizeof(attr));
	if (dev->glue->query_device(dev->ctx, &attr) == 0) {
		dev->caps.node_guid = be64toh(attr.node_guid);
		dev->caps.nb_ports = attr.phys_port_cnt;
		if (attr.max_qp > 0)
			dev->caps.log_max_qp = floor_log2(static_cast<uint64_t>(attr.max_qp));
	} else {
		MLX5_QPN_HW_LOG(WARNING, "%s: ibv_query_device failed (%s)", dev->name,
				strerror(errno));
	}
	if (!dev->caps.devx)
		return;

	/* The outbox is 4 KiB: keep it off the stack of whatever thread probes. */
	uint32_t *out = new (std::nothrow) uint32_t[MLX5_QPN_PRM_QUERY_HCA_CAP_OUT_LEN / 4];
	if (out == nullptr) {
		dev->caps.devx = 0;
		return;
	}
	const size_t outlen = MLX5_QPN_PRM_QUERY_HCA_CAP_OUT_LEN;
	if (query_hca_cap(dev, MLX5_QPN_HCA_CAP_TYPE_GENERAL, out, outlen) != 0 ||
	    mlx5_qpn_prm_parse_hca_cap(out, outlen, &dev->caps) != 0) {
		/* DEVX context but no commands allowed: behave as without DEVX. */
		dev->caps.devx = 0;
		dev->caps.reserved_qpn_obj = 0;
	} else if (dev->caps.reserved_qpn_obj &&
		   (query_hca_cap(dev, MLX5_QPN_HCA_CAP_TYPE_GENERAL_2, out, outlen) != 0 ||
		    mlx5_qpn_prm_parse_hca_cap_2(out, outlen, &dev->caps) != 0)) {
		/* Bit 44 without caps 2 gives no granularity to create objects with. */
		dev->caps.reserved_qpn_obj = 0;
	}
	delete[] out;
}

/* Bit 44 can be set while creation still fails: only a real object proves support. */
void
trial_allocation(mlx5_qpn_hw_dev *dev)
{
	if (!dev->caps.devx || !dev->caps.reserved_qpn_obj)
		return;
	struct mlx5dv_devx_obj *obj = nullptr;
	uint32_t first = 0;
	const uint8_t g = mlx5_qpn_prm_clamp_log_range(&dev->caps, 0);
	if (create_rsvd_obj(dev, g, &obj, &first) != 0) {
		MLX5_QPN_HW_LOG(INFO, "%s: RESERVED_QPN advertised but not usable: "
				"single-QPN fallback only", dev->name);
		dev->caps.reserved_qpn_obj = 0;
		return;
	}
	destroy_rsvd_obj(dev, obj, first);
	dev->objs_ok = true;
}

void
free_dev(mlx5_qpn_hw_dev *dev)
{
	if (dev->ctx != nullptr)
		dev->glue->close_device(dev->ctx);
	delete dev;
}

/* ---- ops ---- */

int
hw_open(const struct mlx5_qpn_devargs *da, struct mlx5_qpn_backend **out)
{
	if (da == nullptr || out == nullptr || da->name[0] == '\0' ||
	    memchr(da->name, '\0', sizeof(da->name)) == nullptr) {
		MLX5_QPN_HW_LOG(ERR, "hw open: no device name given");
		return -EINVAL;
	}
	*out = nullptr;
	const struct mlx5_qpn_glue *glue = mlx5_qpn_glue_get_quiet();
	if (glue == nullptr) {
		MLX5_QPN_HW_LOG(ERR, "no RDMA device \"%s\": rdma-core unavailable (%s)", da->name,
				mlx5_qpn_glue_error());
		return -ENODEV;
	}

	int n = 0;
	struct ibv_device **list = glue->get_device_list(&n);
	if (list == nullptr)
		n = 0; /* no uverbs in the kernel at all: the same as no device */
	struct ibv_device *found = nullptr;
	for (int i = 0; i < n && list[i] != nullptr; i++) {
		const char *nm = glue->get_device_name(list[i]);
		if (nm != nullptr && strcmp(nm, da->name) == 0) {
			found = list[i];
			break;
		}
	}
	if (found == nullptr) {
		if (list != nullptr)
			glue->free_device_list(list);
		MLX5_QPN_HW_LOG(ERR, "no RDMA device \"%s\" (%d devices found)", da->name, n);
		return -ENODEV;
	}
	if (!glue->dv_is_supported(found)) {
		glue->free_device_list(list);
		MLX5_QPN_HW_LOG(ERR, "RDMA device \"%s\" is not an mlx5 device", da->name);
		return -ENOTSUP;
	}

	mlx5_qpn_hw_dev *dev = new (std::nothrow) mlx5_qpn_hw_dev();
	if (dev == nullptr) {
		glue->free_device_list(list);
		return -ENOMEM;
	}
	dev->glue = glue;
	dev->head.prev = dev->head.next = &dev->head;
	snprintf(dev->name, sizeof(dev->name), "%s", da->name);

	struct mlx5dv_context_attr dv_attr;
	memset(&dv_attr, 0, sizeof(dv_attr));
	dv_attr.flags = MLX5DV_CONTEXT_FLAGS_DEVX;
	errno = 0;
	dev->ctx = glue->dv_open_device(found, &dv_attr);
	if (dev->ctx != nullptr) {
		dev->caps.devx = 1;
	} else {
		/* DEVX refused (no permission, old kernel): verbs only, single-QPN API only. */
		MLX5_QPN_HW_LOG(INFO, "%s: DEVX context refused (%s), opening without it",
				da->name, strerror(errno != 0 ? errno : EIO));
		errno = 0;
		dev->ctx = glue->open_device(found);
	}
	/* Opened contexts keep their device alive after the list is freed. */
	glue->free_device_list(list);
	if (dev->ctx == nullptr) {
		int rc = errno != 0 ? -errno : -ENODEV;
		MLX5_QPN_HW_LOG(ERR, "cannot open RDMA device \"%s\" (%s)", da->name, strerror(-rc));
		free_dev(dev);
		return rc;
	}

	read_caps(dev);
	trial_allocation(dev);
	MLX5_QPN_HW_LOG(INFO, "%s: guid 0x%016llx, devx %u, RESERVED_QPN objects %s "
			"(granularity 2^%u, max alloc 2^%u, total 2^%u)", dev->name,
			static_cast<unsigned long long>(dev->caps.node_guid), dev->caps.devx,
			dev->objs_ok ? "usable" : "unusable", dev->caps.log_reserved_qpn_granularity,
			dev->caps.log_reserved_qpn_max_alloc, dev->caps.log_max_num_reserved_qpn);
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
		MLX5_QPN_HW_LOG(ERR, "%s: range of 2^%u QPNs outside the device's 2^%u..2^%u",
				dev->name, log_size, dev->caps.log_reserved_qpn_granularity,
				mlx5_qpn_prm_clamp_log_range(&dev->caps, MLX5_QPN_PRM_MAX_LOG_RANGE));
		return -EINVAL;
	}
	hw_node *n = new (std::nothrow) hw_node();
	if (n == nullptr)
		return -ENOMEM;
	n->kind = node_kind::range;
	n->log_size = static_cast<uint8_t>(log_size);
	int rc = create_rsvd_obj(dev, n->log_size, &n->obj, &n->qpn);
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
	hw_node *n = list_take(dev, node_kind::range,
			       reinterpret_cast<const hw_node *>(static_cast<uintptr_t>(obj->handle)),
			       0);
	if (n == nullptr || n->qpn != obj->first_qpn) {
		if (n != nullptr)
			list_add(dev, n);
		MLX5_QPN_HW_LOG(ERR, "%s: range at QPN 0x%x is not held by this device", dev->name,
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
	hw_node *n = new (std::nothrow) hw_node();
	if (n == nullptr)
		return -ENOMEM;
	n->kind = node_kind::single_qpn;
	int rc = neg_errno(dev->glue->reserved_qpn_alloc(dev->ctx, &n->qpn));
	if (rc != 0) {
		delete n;
		if (rc != -EOPNOTSUPP)
			MLX5_QPN_HW_LOG(ERR, "%s: mlx5dv_reserved_qpn_alloc failed (%s)", dev->name,
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
		MLX5_QPN_HW_LOG(ERR, "%s: QPN 0x%x is not a reserved QPN of this device",
				dev->name, qpn);
		return -EINVAL;
	}
	int rc = neg_errno(dev->glue->reserved_qpn_dealloc(dev->ctx, qpn));
	if (rc != 0) {
		MLX5_QPN_HW_LOG(ERR, "%s: mlx5dv_reserved_qpn_dealloc(0x%x) failed (%s)", dev->name,
				qpn, strerror(-rc));
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
		MLX5_QPN_HW_LOG(ERR, "%s: mlx5dv_devx_alloc_uar failed (%s)", dev->name,
				strerror(-rc));
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
	hw_node *n = list_take(dev, node_kind::uar,
			       reinterpret_cast<const hw_node *>(static_cast<uintptr_t>(uar->handle)),
			       0);
	if (n == nullptr) {
		MLX5_QPN_HW_LOG(ERR, "%s: UAR page %u is not mapped by this device", dev->name,
				uar->page_id);
		return -EINVAL;
	}
	dev->glue->devx_free_uar(n->uar);
	delete n;
	memset(uar, 0, sizeof(*uar));
	return 0;
}

void
hw_close(struct mlx5_qpn_backend *be)
{
	if (be == nullptr)
		return;
	mlx5_qpn_hw_dev *dev = to_dev(be);
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
		case node_kind::single_qpn:
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
	if (ranges + singles + uars != 0)
		MLX5_QPN_HW_LOG(INFO, "%s: closed with %u ranges, %u single QPNs, %u UARs still held",
				dev->name, ranges, singles, uars);
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
	.qp_create = nullptr,
	.qp_destroy = nullptr,
	.uar_map = hw_uar_map,
	.uar_unmap = hw_uar_unmap,
	.close = hw_close,
};

/*
 * The hardware backend registers itself at load. It takes devices named by key ("ib=mlx5_0")
 * and no keys of its own: the generic ones suffice, and where it sits comes from hwloc (no
 * `where` hook). It keeps no state for a crashed process to leave behind (the kernel destroys
 * a dead process's DEVX objects; the lease file is generic), hence no purge.
 */
static const struct mlx5_qpn_backend_desc hw_backend = {
	.name = "hw",
	.flags = 0,
	.name_prefix = nullptr,
	.name_key = "ib",
	.owner = "a hardware device (ib=NAME)",
	.ops = &mlx5_qpn_hw_ops,
	.keys = nullptr,
	.nb_keys = 0,
	.args_default = nullptr,
	.args_check = nullptr,
	.where = nullptr,
	.purge = nullptr,
};

RTE_INIT(mlx5_qpn_hw_register)
{
	mlx5_qpn_backend_register(&hw_backend);
}
