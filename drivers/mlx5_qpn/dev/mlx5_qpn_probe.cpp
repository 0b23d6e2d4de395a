/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Probe and close of a device. Probe finds the backend through the devargs (the backend
 * registry, mlx5_qpn_backend.h), opens it through its ops, sizes and creates the pool, opens
 * the lease file, chooses the QPN supply by a trial reservation and starts the control thread;
 * in a DPDK secondary process it attaches to the primary's device instead. Close undoes it in
 * reverse, handing the lease what invariant 5 needs before the device gets its QPNs back.
 */
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <new>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_memory.h>

#include "mlx5_qpn_dev_priv.h"
#include "mlx5_qpn_locality.h"
#include "mlx5_qpn_mp.h"

RTE_LOG_REGISTER(mlx5_qpn_dev_logtype, mlx5_qpn.dev, NOTICE);

using namespace mlx5_qpn_dev_impl;

namespace {

/* Process-wide: tells two device instances of one GUID apart in the lease file. */
std::atomic<uint32_t> g_lease_tag{0};

/* Decide where QPNs come from, proving support by a trial reservation (kept as the first
 * range): the cap bit can be set on a context that cannot create DEVX objects. A trial that
 * failed with -ENOMEM (our bookkeeping out of memory, or the device out of reserved QPNs: a
 * LIM_ERR, so the command was understood) proves nothing against support: the probe fails with
 * it rather than settle for a lesser source for the device's lifetime. A refused trial logs no
 * back-off lines (Backoff::quiet): the probe says in one line what it chose or why it failed. */
int
choose_source_trials(mlx5_qpn_dev *d)
{
	if (d->id.da.reserved_qpn != MLX5_QPN_RSVD_NO) {
		if (d->id.caps.reserved_qpn_obj) {
			d->sup.ops = mlx5_qpn_supply_of(MLX5_QPN_SRC_OBJECTS);
			int rc = grow_locked(d);
			if (rc == 0 || (rc == -EAGAIN && !d->sup.objs.empty()))
				return 0; /* proven, even if what it gave must cool first */
			if (rc == -ENOMEM)
				return rc;
			DEV_LOG(INFO,
				"%s: RESERVED_QPN object creation failed (%s); trying "
				"mlx5dv_reserved_qpn_alloc",
				d->id.da.name, strerror(-rc));
		}
		d->sup.ops = mlx5_qpn_supply_of(MLX5_QPN_SRC_SINGLE);
		int rc = grow_locked(d);
		if (rc == 0 || (rc == -EAGAIN && !d->sup.objs.empty()))
			return 0;
		if (rc == -ENOMEM)
			return rc;
		if (d->id.da.reserved_qpn == MLX5_QPN_RSVD_YES) {
			DEV_LOG(ERR, "%s: no reserved-QPN support (%s) and reserved_qpn=yes",
				d->id.da.name, strerror(-rc));
			return -EOPNOTSUPP;
		}
		DEV_LOG(NOTICE,
			"%s: no reserved-QPN support (%s): using ordinary QPs (reserved_qpn=try)",
			d->id.da.name, strerror(-rc));
	}
	d->sup.ops = mlx5_qpn_supply_of(MLX5_QPN_SRC_ORDINARY);
	if (d->id.ops->qp_create == nullptr) {
		DEV_LOG(ERR, "%s: ordinary QP numbers are not available on this backend",
			d->id.da.name);
		return -EOPNOTSUPP;
	}
	d->sup.limit = std::min<uint64_t>(d->id.da.max_qpns, 1ull << d->id.caps.log_max_qp);
	if (d->id.caps.qpn_limit != 0)
		d->sup.limit = std::min<uint64_t>(d->sup.limit, d->id.caps.qpn_limit);
	int rc = grow_locked(d);
	return rc == -EAGAIN && !d->sup.objs.empty() ? 0 : rc;
}

/* A device whose only free QPNs were let go by a process less than a quarantine ago: the probe
 * succeeds with all of them cooling, and says in one line when the first come back. */
void
note_all_cooling(mlx5_qpn_dev *d)
{
	uint64_t first = UINT64_MAX, qpns = 0;
	for (const auto &c : d->lease.cooling) {
		first = std::min(first, c.until_ns);
		qpns += c.count;
	}
	if (qpns == 0 || qpns != d->sup.held.load(rlx))
		return; /* some went into the pool */
	uint64_t now = mlx5_qpn_clock_ns();
	DEV_LOG(NOTICE,
		"%s: all %" PRIu64
		" QPNs the device gave were let go by a process less than a quarantine ago: allocations return -EAGAIN until the first come back in %" PRIu64
		" ms",
		d->id.da.name, qpns, first > now ? (first - now + 999999) / 1000000 : 0);
}

int
choose_source(mlx5_qpn_dev *d)
{
	d->backoff.quiet = true;
	int rc = choose_source_trials(d);
	d->backoff.quiet = false;
	if (rc == 0)
		note_all_cooling(d);
	return rc;
}

void
destroy(mlx5_qpn_dev *d)
{
	if (d->ctrl.running) {
		d->ctrl.stop.store(true, std::memory_order_release);
		pthread_join(d->ctrl.thread, nullptr);
	}
	/* After the control thread (it uses d->proc.mp), before the pool goes: primary: no more IPC
	 * grows (waits for one in progress); secondary: detach. */
	mlx5_qpn_mp_close(d->proc.mp);
	d->proc.mp = nullptr;
	{
		std::lock_guard<std::mutex> g(d->sup.grow_mutex);
		/*
		 * Invariant 5: the lease learns when our QPNs may be reused before the device gets
		 * them back. A range the pool can take out whole (every QPN free, none in
		 * quarantine) may go at once; every other one cools from now for our quarantine.
		 */
		if (d->lease.file.is_open()) {
			if (d->core.pool != nullptr && d->sup.ops != nullptr &&
			    d->sup.ops->ranges) {
				mlx5_qpn_pool_drain(d->core.pool);
				for (auto &o : d->sup.objs) {
					bool aside = false;
					for (auto &c : d->lease.cooling)
						aside |= c.first == o.first_qpn;
					if (!aside && mlx5_qpn_pool_range_remove(d->core.pool,
										 o.first_qpn) == 0)
						d->lease.file.drop(o.first_qpn, o.log_size);
				}
			}
			int rc = d->lease.file.release_all();
			if (rc != 0)
				lease_error(d, rc, "recording the close");
		}
		if (d->core.pool != nullptr &&
		    !d->proc.secondary) /* a secondary's pool is the primary's */
			mlx5_qpn_pool_destroy(d->core.pool);
		d->core.pool = nullptr;
		for (auto &o : d->sup.objs)
			release_obj(d, o);
		d->sup.objs.clear();
	}
	if (d->id.be != nullptr && d->id.ops->close != nullptr)
		d->id.ops->close(d->id.be);
	delete d;
}

/* Open the device through the ops of the backend its devargs named; on failure d is gone. */
int
open_backend(mlx5_qpn_dev *d)
{
	d->id.backend = d->id.da.backend;
	d->id.ops = d->id.backend->ops;
	int rc = d->id.ops->open(&d->id.da, &d->id.be);
	if (rc != 0) {
		d->id.be = nullptr;
		destroy(d);
	}
	return rc;
}

/* Multi-process (mlx5_qpn_mp.h): the primary publishes what a secondary must use as it is. */
void
publish(mlx5_qpn_dev *d, const char *devargs)
{
	mlx5_qpn_mp_devinfo di = {};
	di.caps = d->id.caps;
	di.source = d->sup.ops->source;
	di.log_range = d->sup.log_range;
	di.limit = d->sup.limit;
	di.numa_node = d->id.numa_node;
	snprintf(di.cores, sizeof(di.cores), "%s", d->id.cores);
	snprintf(di.pool_name, sizeof(di.pool_name), "%s", d->sup.pool_name);
	int rc = mlx5_qpn_mp_publish(d, d->id.da.name, devargs, &di, &d->proc.mp);
	if (rc != 0)
		DEV_LOG(WARNING, "%s: secondary processes cannot attach: %s", d->id.da.name,
			strerror(-rc));
}

/* A secondary attaches to the primary's device and pool and opens its own backend handle (for
 * the data path); it never reserves ranges (no control thread, grow() asks the primary). */
int
probe_secondary(mlx5_qpn_dev *d, const char *devargs, mlx5_qpn_dev **out)
{
	mlx5_qpn_devargs mine = d->id.da;
	mlx5_qpn_mp_devinfo di;
	int rc = mlx5_qpn_mp_attach(&mine, devargs, &d->id.da, &di, &d->core.pool, &d->proc.mp);
	if (rc != 0) {
		delete d;
		return rc;
	}
	d->proc.secondary = true;
	d->id.caps = di.caps;
	d->sup.ops = mlx5_qpn_supply_of(static_cast<mlx5_qpn_source>(di.source));
	d->sup.log_range = di.log_range;
	d->sup.limit = di.limit;
	d->id.numa_node = di.numa_node;
	snprintf(d->id.cores, sizeof(d->id.cores), "%s", di.cores);
	snprintf(d->sup.pool_name, sizeof(d->sup.pool_name), "%s", di.pool_name);
	rc = open_backend(d);
	if (rc != 0)
		return rc;
	DEV_LOG(INFO, "%s: secondary process attached to the primary's device (pool %s)",
		d->id.da.name, d->sup.pool_name);
	registry_add(d);
	*out = d;
	return 0;
}

/* Capabilities, then the reservation size (the devarg, else the largest object the device
 * allows) and the most QPNs the device may give us. */
int
size_from_caps(mlx5_qpn_dev *d)
{
	int rc = d->id.ops->query_caps(d->id.be, &d->id.caps);
	if (rc != 0) {
		DEV_LOG(ERR, "%s: query caps failed: %s", d->id.da.name, strerror(-rc));
		return rc;
	}
	uint32_t gran = d->id.caps.log_reserved_qpn_granularity;
	uint32_t maxa = std::max<uint32_t>(d->id.caps.log_reserved_qpn_max_alloc, gran);
	if (d->id.da.log_range == UINT32_MAX) {
		d->sup.log_range = maxa;
	} else if (d->id.da.log_range < gran || d->id.da.log_range > maxa) {
		DEV_LOG(ERR, "bad devarg log_range=%u: outside the device's [%u, %u]",
			d->id.da.log_range, gran, maxa);
		return -EINVAL;
	} else {
		d->sup.log_range = d->id.da.log_range;
	}
	d->sup.limit = std::min<uint64_t>(d->id.da.max_qpns,
					  1ull << d->id.caps.log_max_num_reserved_qpn);
	if (d->id.caps.qpn_limit != 0)
		d->sup.limit = std::min<uint64_t>(d->sup.limit, d->id.caps.qpn_limit);
	return 0;
}

/* The pool, sized for max_qpns whichever source is chosen later, on the device's socket. */
int
create_pool(mlx5_qpn_dev *d)
{
	snprintf(d->sup.pool_name, sizeof(d->sup.pool_name), "qpn_%.19s", d->id.da.name);
	struct mlx5_qpn_pool_params prm = {};
	prm.name = d->sup.pool_name;
	prm.quarantine_ns = d->id.da.quarantine_us * 1000;
	prm.cache_size = d->id.da.cache;
	/* Room for eight ranges more than max_qpns: a range given back to the device leaves its
	 * slots unused for a grace period (pool docs). */
	prm.capacity = static_cast<uint32_t>(
		std::min<uint64_t>(uint64_t(d->id.da.max_qpns) + 8 * (1ull << d->sup.log_range),
				   (1u << 24) - 1));
	prm.socket_id = SOCKET_ID_ANY;
	if (d->id.numa_node >= 0) {
		/* Place the pool on the device's socket when EAL has memory there. */
		for (unsigned i = 0; i < rte_socket_count(); i++)
			if (rte_socket_id_by_idx(i) == d->id.numa_node)
				prm.socket_id = d->id.numa_node;
	}
	d->core.pool = mlx5_qpn_pool_create(&prm);
	if (d->core.pool != nullptr)
		return 0;
	int rc = -rte_errno;
	DEV_LOG(ERR, "%s: cannot create pool %s: %s", d->id.da.name, d->sup.pool_name,
		rte_strerror(rte_errno));
	return rc != 0 ? rc : -ENOMEM;
}

/* The device's lease file (invariant 5), keyed by its GUID. */
int
open_lease(mlx5_qpn_dev *d)
{
	int rc = d->lease.file.open(d->id.caps.node_guid, g_lease_tag.fetch_add(1, rlx) + 1,
				    d->id.da.quarantine_us * 1000);
	if (rc != 0)
		DEV_LOG(ERR, "%s: cannot open the lease file of GUID %016" PRIx64 ": %s",
			d->id.da.name, d->id.caps.node_guid, strerror(-rc));
	return rc;
}

/* The supply, proven by the first reservation. */
int
first_reservation(mlx5_qpn_dev *d)
{
	int rc;
	{
		std::lock_guard<std::mutex> g(d->sup.grow_mutex);
		rc = choose_source(d);
	}
	if (rc != 0 && rc != -EOPNOTSUPP)
		DEV_LOG(ERR, "%s: first reservation failed: %s", d->id.da.name, strerror(-rc));
	return rc;
}

/* The control thread; without it ranges are still reserved on demand. */
void
start_ctrl(mlx5_qpn_dev *d)
{
	char tname[RTE_MAX_THREAD_NAME_LEN];
	snprintf(tname, sizeof(tname), "qpn-%.11s", d->id.da.name);
	if (rte_ctrl_thread_create(&d->ctrl.thread, tname, nullptr, ctrl_main, d) == 0)
		d->ctrl.running = true;
	else
		DEV_LOG(WARNING, "%s: no control thread: ranges are reserved on demand only",
			d->id.da.name);
}

/* A primary opens the device and makes everything the device holds; on failure d is gone. */
int
probe_primary(mlx5_qpn_dev *d, const char *devargs)
{
	int rc = open_backend(d);
	if (rc != 0)
		return rc;
	rc = size_from_caps(d);
	if (rc == 0) {
		mlx5_qpn_locality(&d->id.da, &d->id.numa_node, d->id.cores, sizeof(d->id.cores));
		rc = create_pool(d);
	}
	if (rc == 0)
		rc = open_lease(d);
	if (rc == 0)
		rc = first_reservation(d);
	if (rc != 0) {
		destroy(d);
		return rc;
	}
	publish(d, devargs); /* before the control thread: it reads d->proc.mp */
	start_ctrl(d);
	DEV_LOG(INFO,
		"%s: %s backend, GUID %016" PRIx64 ", QPNs from %s, ranges of 2^%u, up to %" PRIu64
		", quarantine %" PRIu64 " us",
		d->id.da.name,
		(d->id.backend->flags & MLX5_QPN_BACKEND_F_EMULATED) ? "emulated" : "hardware",
		d->id.caps.node_guid, d->sup.ops->name, d->sup.log_range, d->sup.limit,
		d->id.da.quarantine_us);
	return 0;
}

} /* namespace */

extern "C" {

int
mlx5_qpn_dev_probe(const char *devargs, struct mlx5_qpn_dev **out)
{
	if (devargs == nullptr || out == nullptr)
		return -EINVAL;
	/* The device's memory comes from the EAL (its heap, memzones): before rte_eal_init() every
	 * allocation fails, and the probe would end in a misleading -ENOMEM. The lcore count is 0
	 * until the EAL has initialised. */
	if (rte_lcore_count() == 0) {
		DEV_LOG(ERR, "EAL not initialised: call rte_eal_init() before probing a device");
		return -EPERM;
	}
	auto *d = new (std::nothrow) mlx5_qpn_dev();
	if (d == nullptr)
		return -ENOMEM;
	int rc = mlx5_qpn_devargs_parse(devargs, &d->id.da);
	if (rc != 0) {
		delete d;
		return rc;
	}
	if (registry_has(d->id.da.name)) {
		DEV_LOG(ERR, "device %s is already probed", d->id.da.name);
		delete d;
		return -EEXIST;
	}
	if (rte_eal_process_type() == RTE_PROC_SECONDARY)
		return probe_secondary(d, devargs, out);
	rc = probe_primary(d, devargs);
	if (rc != 0)
		return rc;
	registry_add(d);
	*out = d;
	return 0;
}

void
mlx5_qpn_dev_close(struct mlx5_qpn_dev *d)
{
	if (d == nullptr)
		return;
	if (!registry_remove(d))
		return; /* not a probed device */
	destroy(d);
}

int
mlx5_qpn_dev_purge(const char *name)
{
	if (name == nullptr || name[0] == '\0')
		return -EINVAL;
	const mlx5_qpn_backend_desc *be = mlx5_qpn_backend_of_name(name);
	if (be == nullptr)
		return -ENODEV;
	if (be->purge == nullptr)
		return -EOPNOTSUPP;
	if (be->name_key != nullptr && strncmp(name, be->name_key, strlen(be->name_key)) == 0 &&
	    name[strlen(be->name_key)] == '=')
		name += strlen(be->name_key) + 1; /* "ib=NAME": the device is NAME */
	if (registry_has(name))
		return -EBUSY; /* probed here: close it first */
	uint64_t guid = 0;
	int rc = be->purge(name, &guid);
	if (rc == -EBUSY)
		return rc; /* the backend named the live holder */
	/* The device's lease file goes with the backend's state: the next probe starts afresh.
	 * Not while a live process has it open: its entries keep the quarantine of QPNs that
	 * process holds or let go (invariants 1 and 5), on hardware as on the emulated device. */
	int32_t pid = 0;
	if (guid != 0 && qpn::lease::live_user(guid, &pid)) {
		DEV_LOG(ERR,
			"device %s: its lease file (GUID %016" PRIx64
			") is open in live process %d: not removed (close the device there first)",
			name, guid, int(pid));
		return -EBUSY;
	}
	if (guid != 0 && qpn::lease::unlink(guid) == 0 && rc == -ENOENT)
		rc = 0;
	return rc;
}

} /* extern "C" */
