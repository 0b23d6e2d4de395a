/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hardware backend's probe: the device's lookup by name (which the purge hook shares), fork
 * safety of pinned memory, QUERY_HCA_CAP (general, then caps 2 when hca_cap_2 says they exist),
 * the trial RESERVED_QPN object at the size that will be requested, and the size step-down on a
 * refusal. The decisions themselves are in mlx5_qpn_hw_sizing.cpp.
 */
#include <cerrno>
#include <cstring>
#include <endian.h>

#include <new>

#include "mlx5_qpn_glue.h"
#include "mlx5_qpn_hw_log.h"
#include "mlx5_qpn_hw_priv.h"
#include "mlx5_qpn_prm.h"

namespace mlx5_qpn_hw {

int
find_device(const char *name, const struct mlx5_qpn_glue **glue_out, struct ibv_device ***list_out,
	    struct ibv_device **found)
{
	*list_out = nullptr;
	*found = nullptr;
	const struct mlx5_qpn_glue *glue = mlx5_qpn_glue_get_quiet();
	*glue_out = glue;
	if (glue == nullptr) {
		HW_LOG(ERR, "no RDMA device \"%s\": rdma-core unavailable (%s)", name,
		       mlx5_qpn_glue_error());
		return -ENODEV;
	}
	int n = 0;
	struct ibv_device **list = glue->get_device_list(&n);
	if (list == nullptr)
		n = 0; /* no uverbs in the kernel at all: the same as no device */
	for (int i = 0; i < n && list[i] != nullptr; i++) {
		const char *nm = glue->get_device_name(list[i]);
		if (nm != nullptr && strcmp(nm, name) == 0) {
			*found = list[i];
			break;
		}
	}
	int rc = 0;
	if (*found == nullptr) {
		HW_LOG(ERR, "no RDMA device \"%s\" (%d devices found)", name, n);
		rc = -ENODEV;
	} else if (!glue->dv_is_supported(*found)) {
		HW_LOG(ERR, "RDMA device \"%s\" is not an mlx5 device", name);
		rc = -ENOTSUP;
	}
	if (rc != 0) {
		*found = nullptr;
		if (list != nullptr)
			glue->free_device_list(list);
	}
	*list_out = rc == 0 ? list : nullptr;
	return rc;
}

/*
 * After a failed DEVX command: the firmware status in the outbox if there is one (the kernel
 * copies the outbox back on a command error), else the errno of the call.
 */
static int
cmd_error(const mlx5_qpn_hw_dev *dev, const char *what, const void *out, size_t outlen,
	  int sys_errno, rsvd_refusal *refusal = nullptr)
{
	uint8_t status = 0;
	uint32_t syndrome = 0;
	mlx5_qpn_prm_out_status(out, outlen, &status, &syndrome);
	int rc = status != 0 ? mlx5_qpn_fw_status_to_errno(status) : neg_errno(sys_errno);
	if (rc == 0)
		rc = -EIO;
	if (refusal != nullptr) {
		/* The caller steps the size down and logs the refusal once. */
		*refusal = {status, syndrome, rc};
		return rc;
	}
	/* At probe a refusal is a verdict, not an error: the probe's line names it (debug level
	 * keeps the status and syndrome for a bring-up). */
	MLX5_QPN_LOG_AT(hw, dev->probing ? RTE_LOG_DEBUG : RTE_LOG_ERR,
			"%s: %s failed: status 0x%x syndrome 0x%x (%s)", dev->name, what, status,
			syndrome, strerror(-rc));
	return rc;
}

static int
query_hca_cap(mlx5_qpn_hw_dev *dev, uint16_t type, uint32_t *out, size_t outlen)
{
	uint32_t in[MLX5_QPN_PRM_QUERY_HCA_CAP_IN_LEN / 4];
	mlx5_qpn_prm_query_hca_cap_in(in, sizeof(in),
				      MLX5_QPN_HCA_CAP_OP_MOD(type, MLX5_QPN_HCA_CAP_OPMOD_CUR));
	memset(out, 0, outlen);
	errno = 0;
	int rc = dev->glue->devx_general_cmd(dev->ctx, in, sizeof(in), out, outlen);
	if (rc != 0)
		return cmd_error(dev,
				 type == MLX5_QPN_HCA_CAP_TYPE_GENERAL ? "QUERY_HCA_CAP" :
									 "QUERY_HCA_CAP(caps 2)",
				 out, outlen, rc);
	return 0;
}

/* One RESERVED_QPN object; *obj and *first_qpn on success, *refused filled on a refusal of a
 * size above the granularity (which the caller steps down from, quietly). */
static int
create_rsvd_obj(mlx5_qpn_hw_dev *dev, uint8_t log_size, struct mlx5dv_devx_obj **obj,
		uint32_t *first_qpn, rsvd_refusal *refused)
{
	const bool may_step = log_size > dev->caps.log_reserved_qpn_granularity;
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
				 errno != 0 ? errno : EIO, may_step ? refused : nullptr);
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
		HW_LOG(ERR, "%s: destroying RESERVED_QPN object 0x%x failed (%s)", dev->name,
		       first_qpn, strerror(-rc));
	return rc;
}

static uint8_t
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
	/* The port this handle serves: the one its DC objects, AHs and port queries use. */
	dev->caps.port = dev->port;
	if (dev->glue->query_device(dev->ctx, &attr) == 0) {
		dev->caps.node_guid = be64toh(attr.node_guid);
		dev->caps.nb_ports = attr.phys_port_cnt;
		if (attr.max_qp > 0)
			dev->caps.log_max_qp = floor_log2(static_cast<uint64_t>(attr.max_qp));
	} else {
		HW_LOG(WARNING, "%s: ibv_query_device failed (%s)", dev->name, strerror(errno));
	}
	if (!dev->caps.devx) {
		dev->probe.verdict = MLX5_QPN_HW_OBJ_NO_DEVX; /* err set by hw_open */
		return;
	}

	/* The outbox is 4 KiB: keep it off the stack of whatever thread probes. */
	uint32_t *out = new (std::nothrow) uint32_t[MLX5_QPN_PRM_QUERY_HCA_CAP_OUT_LEN / 4];
	if (out == nullptr) {
		dev->caps.devx = 0;
		dev->probe = {MLX5_QPN_HW_OBJ_CAPS_UNREADABLE, -ENOMEM, 0};
		return;
	}
	const size_t outlen = MLX5_QPN_PRM_QUERY_HCA_CAP_OUT_LEN;
	int rc = query_hca_cap(dev, MLX5_QPN_HCA_CAP_TYPE_GENERAL, out, outlen);
	if (rc == 0)
		rc = mlx5_qpn_prm_parse_hca_cap(out, outlen, &dev->caps);
	if (rc == 0) {
		int w = mlx5_qpn_hw_caps_max_wqe_sz_sq_dc(out, outlen);
		dev->max_wqe_sz_sq_dc = w > 0 ? uint16_t(w) : 0;
		read_dc_host(dev, out, outlen);
	}
	if (rc != 0) {
		/* DEVX context but no commands allowed: behave as without DEVX. */
		dev->caps.devx = 0;
		dev->caps.reserved_qpn_obj = 0;
		dev->probe = {MLX5_QPN_HW_OBJ_CAPS_UNREADABLE, rc, 0};
	} else if (!dev->caps.reserved_qpn_obj) {
		dev->probe.verdict = MLX5_QPN_HW_OBJ_NOT_ADVERTISED;
	} else if (mlx5_qpn_hw_caps2_advertised(out, outlen) != 1) {
		/* As rdma-core: caps 2 exist only when cmd_hca_cap.hca_cap_2 says so. Bit 44
		 * without caps 2 gives no granularity to create objects with. */
		dev->caps.reserved_qpn_obj = 0;
		dev->probe.verdict = MLX5_QPN_HW_OBJ_NO_CAPS2;
	} else {
		rc = query_hca_cap(dev, MLX5_QPN_HCA_CAP_TYPE_GENERAL_2, out, outlen);
		if (rc == 0)
			rc = mlx5_qpn_prm_parse_hca_cap_2(out, outlen, &dev->caps);
		if (rc != 0) {
			dev->caps.reserved_qpn_obj = 0;
			dev->probe = {MLX5_QPN_HW_OBJ_CAPS2_UNREADABLE, rc, 0};
		}
	}
	delete[] out;
	/* 0 = unknown: no bound on the total (mlx5_qpn_hw_log_max_num()); the raw value is
	 * kept for the probe's log line. */
	dev->raw_log_max_num = dev->caps.log_max_num_reserved_qpn;
	dev->caps.log_max_num_reserved_qpn = mlx5_qpn_hw_log_max_num(dev->raw_log_max_num);
}

/* Log once per device what the firmware refused first, and that objects continue smaller. */
static void
log_step_once(mlx5_qpn_hw_dev *dev)
{
	if (dev->step_logged.exchange(true))
		return;
	const rsvd_refusal &r = dev->first_refusal;
	char status[48];
	if (r.status != 0)
		snprintf(status, sizeof(status), "status 0x%x syndrome 0x%x", r.status, r.syndrome);
	else
		snprintf(status, sizeof(status), "no firmware status");
	HW_LOG(WARNING,
	       "%s: firmware refused a RESERVED_QPN object of 2^%u QPNs (%s: %s): stepping "
	       "down towards 2^%u, still on objects",
	       dev->name, dev->first_refused_log, status, strerror(-r.rc),
	       dev->caps.log_reserved_qpn_granularity);
}

/* The first refusal is kept for the line by the one thread that sees it first, which also
 * logs it outside the probe; at probe the line waits for the verdict (the trial logs it only if
 * objects stay the source). */
static void
note_step_down(mlx5_qpn_hw_dev *dev, uint8_t refused, const rsvd_refusal &why, uint8_t next)
{
	dev->log_ok.store(next, std::memory_order_relaxed);
	if (dev->refusal_kept.exchange(true))
		return;
	dev->first_refusal = why;
	dev->first_refused_log = refused;
	if (!dev->probing)
		log_step_once(dev);
}

/*
 * One object of 2^*log QPNs, or a smaller one after a refusal: one size down on "bad
 * parameter", straight to the granularity on any other answer (mlx5_qpn_hw_step_down());
 * *log is the size created.
 */
int
create_rsvd_obj_stepping(mlx5_qpn_hw_dev *dev, uint8_t *log, struct mlx5dv_devx_obj **obj,
			 uint32_t *first_qpn)
{
	for (;;) {
		rsvd_refusal why{};
		int rc = create_rsvd_obj(dev, *log, obj, first_qpn, &why);
		int next = mlx5_qpn_hw_step_down(*log, dev->caps.log_reserved_qpn_granularity, rc);
		if (next < 0)
			return rc;
		note_step_down(dev, *log, why, static_cast<uint8_t>(next));
		*log = static_cast<uint8_t>(next);
	}
}

/*
 * Bit 44 can be set while creation still fails: only a real object proves support, and only
 * of the size that will be requested (mlx5_qpn_hw_request_log()), stepping down on a refusal
 * as range_reserve does: a firmware that refuses a large object for any reason (bad parameter,
 * a resource state, a limit, a bare errno) is asked for the granularity, the size rdma-core and
 * UCX request, before objects are given up for ordinary UD QPs.
 */
void
trial_allocation(mlx5_qpn_hw_dev *dev, const struct mlx5_qpn_devargs *da)
{
	if (dev->probe.verdict != MLX5_QPN_HW_OBJ_OK)
		return;
	if (da->reserved_qpn == MLX5_QPN_RSVD_NO) {
		dev->caps.reserved_qpn_obj = 0;
		dev->probe.verdict = MLX5_QPN_HW_OBJ_NOT_TRIED;
		return;
	}
	struct mlx5dv_devx_obj *obj = nullptr;
	uint32_t first = 0;
	/* limit= is a key of the emulated device only: no bound from it here. */
	const uint8_t want = mlx5_qpn_hw_request_log(&dev->caps, da->log_range, da->max_qpns, 0);
	uint8_t log = want;
	int rc = create_rsvd_obj_stepping(dev, &log, &obj, &first);
	dev->probe.trial_log = log;
	if (rc != 0) {
		dev->caps.reserved_qpn_obj = 0;
		dev->probe.verdict = MLX5_QPN_HW_OBJ_TRIAL_FAILED;
		dev->probe.err = rc;
		return;
	}
	if (log < want)
		log_step_once(dev);
	destroy_rsvd_obj(dev, obj, first);
	dev->log_ok.store(log, std::memory_order_relaxed);
	dev->objs_ok = true;
}

/* The caps read, the objects' verdict and the QPN source, in one line at probe. */
void
log_probe(const mlx5_qpn_hw_dev *dev, enum mlx5_qpn_hw_source src)
{
	char why[128];
	mlx5_qpn_hw_probe_reason(&dev->probe, why, sizeof(why));
	HW_LOG(INFO,
	       "%s: guid 0x%016llx, devx %u, general_obj_types 0x%llx, "
	       "granularity 2^%u, max alloc 2^%u, total %s2^%u, log_max_qp %u; "
	       "RESERVED_QPN objects %s (%s); QPN source: %s",
	       dev->name, static_cast<unsigned long long>(dev->caps.node_guid), dev->caps.devx,
	       static_cast<unsigned long long>(dev->caps.general_obj_types),
	       dev->caps.log_reserved_qpn_granularity, dev->caps.log_reserved_qpn_max_alloc,
	       dev->raw_log_max_num == 0 ? "unknown, taken as " : "",
	       dev->caps.log_max_num_reserved_qpn, dev->caps.log_max_qp,
	       dev->objs_ok ? "usable" : "unusable", why, mlx5_qpn_hw_source_name(src));
}

/*
 * Without fork support a child that writes to a page the parent registered gets the page, the
 * parent a copy the device never sees. ibv_fork_init() must come before anything is pinned (it
 * returns EINVAL after), hence before the context is opened; the line waits for the end of a
 * successful open.
 */
void
fork_setup(mlx5_qpn_hw_dev *dev)
{
	const struct mlx5_qpn_glue *g = dev->glue;
	if (g->fork_init == nullptr)
		return; /* a test's partial table: nothing to ask */
	const int st = g->is_fork_initialized != nullptr ? g->is_fork_initialized() : -1;
	if (st == IBV_FORK_UNNEEDED || st == IBV_FORK_ENABLED)
		return;
	dev->fork_rc = neg_errno(g->fork_init());
	if (dev->fork_rc != 0)
		dev->fork = fork_note::failed;
	else
		dev->fork = st < 0 ? fork_note::called_unknown : fork_note::called_disabled;
}

void
log_setup(const mlx5_qpn_hw_dev *dev, enum mlx5_qpn_hw_source src)
{
	switch (dev->fork) {
	case fork_note::nothing:
		break;
	case fork_note::called_disabled:
		HW_LOG(INFO,
		       "%s: fork support enabled (ibv_fork_init): the kernel does not copy pinned "
		       "pages on fork",
		       dev->name);
		break;
	case fork_note::called_unknown:
		HW_LOG(INFO,
		       "%s: fork support enabled (ibv_fork_init): this rdma-core cannot tell whether "
		       "the kernel copies pinned pages on fork",
		       dev->name);
		break;
	case fork_note::failed:
		HW_LOG(WARNING,
		       "%s: ibv_fork_init failed (%s): memory pinned before this open stays shared "
		       "with forked children; RDMAV_FORK_SAFE=1 enables fork support from the start",
		       dev->name, strerror(-dev->fork_rc));
		break;
	}
	if (dev->glue->reserved_qpn_alloc == nullptr)
		HW_LOG(INFO,
		       "%s: rdma-core without mlx5dv_reserved_qpn_alloc (before rdma-core 34): QPNs "
		       "come from %s",
		       dev->name,
		       src == MLX5_QPN_HW_SRC_OBJECTS ? "RESERVED_QPN objects through DEVX" :
							"ordinary UD QPs");
}

} /* namespace mlx5_qpn_hw */

namespace {

/* An ibv device name as devargs take it after ib=: letters, digits, '_', '-' and '.', shorter
 * than MLX5_QPN_DEV_NAMESIZE. */
bool
name_ok(const char *name)
{
	const size_t n = strnlen(name, MLX5_QPN_DEV_NAMESIZE);
	if (n == 0 || n >= MLX5_QPN_DEV_NAMESIZE)
		return false;
	for (size_t i = 0; i < n; i++) {
		const char c = name[i];
		if ((c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') &&
		    c != '_' && c != '-' && c != '.')
			return false;
	}
	return true;
}

} /* namespace */

extern "C" int
mlx5_qpn_hw_purge(const char *name, uint64_t *guid)
{
	*guid = 0;
	if (name == nullptr || !name_ok(name)) {
		HW_LOG(ERR, "purge: invalid RDMA device name");
		return -EINVAL;
	}
	const struct mlx5_qpn_glue *glue = nullptr;
	struct ibv_device **list = nullptr;
	struct ibv_device *found = nullptr;
	int rc = mlx5_qpn_hw::find_device(name, &glue, &list, &found);
	if (rc != 0)
		return rc;
	/* The GUID probe reads (ibv_query_device's node_guid), without opening a context; a
	 * test's partial table without the call names none, and nothing is removed. */
	if (glue->get_device_guid != nullptr)
		*guid = be64toh(glue->get_device_guid(found));
	glue->free_device_list(list);
	/* Nothing of the backend's own: the kernel destroyed a dead process's DEVX objects. */
	return -ENOENT;
}
