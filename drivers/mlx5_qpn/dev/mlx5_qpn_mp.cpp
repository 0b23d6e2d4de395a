/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DPDK multi-process support: the primary's device info memzone and IPC grow handler, a
 * secondary's attach, grow request and primary liveness check (mlx5_qpn_mp.h has the design).
 */
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <new>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_memzone.h>

#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_dev_log.h"
#include "mlx5_qpn_mp.h"
#include "mlx5_qpn_text.h"
#include "qpn_shm.h"

namespace {

constexpr auto rlx = std::memory_order_relaxed;
constexpr uint64_t kInfoMagic = 0x4d4c58354d50494eull; /* "MLX5MPIN" */
constexpr uint32_t kInfoVersion = 1;
constexpr unsigned kMaxSecondaries = 64;
constexpr uint64_t kTickNs = 50000000ull; /* reclaim dead processes every 50 ms */

enum : uint32_t { kLive = 1, kClosed = 2 };

/* The device info memzone "qpn_mp_<dev>". Written once by the primary before it is published
 * (state = kLive), except the atomics and the secondaries table (under `lock`). */
struct MpInfo {
	uint64_t magic;
	uint32_t version;
	uint32_t size;
	qpn::shm::ProcId primary;
	std::atomic<uint32_t> state;
	char name[MLX5_QPN_DEV_NAMESIZE];
	char devargs[MLX5_QPN_DEVARGS_MAX + 1];
	mlx5_qpn_mp_devinfo di;
	std::atomic<uint64_t> grown;          /* the primary's grow counter (mirror) */
	std::atomic<uint64_t> ipc_requests;   /* grow requests handled */
	std::atomic<uint64_t> ipc_grows;      /* of those, ranges reserved */
	std::atomic<uint64_t> dead_reclaimed; /* QPNs of dead processes recovered, by any process */
	pthread_mutex_t lock;                 /* robust, process-shared: secondaries[] */
	qpn::shm::ProcId secondaries[kMaxSecondaries];
};

/* IPC messages (both ends are this file of the same build: version-checked by size). */
struct MpReq {
	uint32_t op; /* 1: grow */
	uint32_t force;
	uint64_t seen;
	char name[MLX5_QPN_DEV_NAMESIZE];
};
struct MpRep {
	int32_t rc;
	uint32_t rsvd;
	uint64_t grown;
};
static_assert(sizeof(MpReq) <= RTE_MP_MAX_PARAM_LEN && sizeof(MpRep) <= RTE_MP_MAX_PARAM_LEN);

void
zone_name(const char *dev, char *out, size_t len)
{
	snprintf(out, len, "qpn_mp_%.24s", dev);
}

} /* namespace */

struct mlx5_qpn_mp {
	mlx5_qpn_mp *next_primary = nullptr; /* g_primaries: serving allocates nothing */
	bool secondary = false;
	MpInfo *info = nullptr;
	const rte_memzone *mz = nullptr; /* primary */
	mlx5_qpn_dev *dev = nullptr;     /* primary */
	mlx5_qpn_pool *pool = nullptr;
	char name[MLX5_QPN_DEV_NAMESIZE] = {};
	int slot = -1; /* secondary: its entry in info->secondaries */
	std::atomic<uint64_t> grow_requests{0};
	std::atomic<uint64_t> dead_reclaimed{0};
	std::atomic<uint64_t> next_tick_ns{0};
	std::atomic<uint64_t> full_until_ns{0}; /* secondary: the primary said -ENOSPC lately */
	std::atomic<bool> dead_logged{false};
};

namespace {

std::mutex g_mp_mutex;    /* the primaries the handler serves */
mlx5_qpn_mp *g_primaries; /* a list through next_primary */
bool g_action_registered;

/* Ask the pool to take back what dead processes held (caches, allocated QPNs) into quarantine. */
void
reclaim(mlx5_qpn_mp *mp)
{
	if (mp->pool == nullptr)
		return;
	/* Cheap when nobody died: a look at the pool's process table. */
	int n = mlx5_qpn_pool_reclaim_dead(mp->pool);
	if (n > 0) {
		mp->dead_reclaimed.fetch_add(n, rlx);
		mp->info->dead_reclaimed.fetch_add(n, rlx);
		DEV_LOG(NOTICE, "%s: recovered %d QPNs of dead processes (into quarantine)",
			mp->name, n);
	}
}

int
lock_info(MpInfo *in)
{
	int rc = qpn::shm::mutex_lock(&in->lock);
	if (rc == 1) { /* a secondary died inside attach/detach: the table is still valid */
		pthread_mutex_consistent(&in->lock);
		rc = 0;
	}
	return rc;
}

int
handler(const struct rte_mp_msg *msg, const void *peer)
{
	MpRep rep = {};
	MpReq req = {};
	if (msg->len_param != sizeof(req)) {
		rep.rc = -EPROTO;
	} else {
		memcpy(&req, msg->param, sizeof(req));
		req.name[sizeof(req.name) - 1] = '\0';
		rep.rc = -ENODEV;
		std::lock_guard<std::mutex> g(g_mp_mutex);
		for (auto *mp = g_primaries; mp != nullptr; mp = mp->next_primary) {
			if (strcmp(mp->name, req.name) != 0 || req.op != 1)
				continue;
			mp->info->ipc_requests.fetch_add(1, rlx);
			reclaim(mp);
			rep.rc = mlx5_qpn_dev_grow_if(mp->dev, req.seen,
						      static_cast<int>(req.force != 0), &rep.grown);
			/* The mirror may lag (grows before publish): the next request sees it right. */
			mp->info->grown.store(rep.grown, std::memory_order_release);
			if (rep.rc == 1)
				mp->info->ipc_grows.fetch_add(1, rlx);
			break;
		}
	}
	struct rte_mp_msg out = {};
	snprintf(out.name, sizeof(out.name), "%s", msg->name);
	out.len_param = sizeof(rep);
	memcpy(out.param, &rep, sizeof(rep));
	return rte_mp_reply(&out, static_cast<const char *>(peer));
}

/* Primary: the handler serves this device from now on. Registers the action once a process. */
void
serve(mlx5_qpn_mp *mp)
{
	std::lock_guard<std::mutex> g(g_mp_mutex);
	if (!g_action_registered) {
		if (rte_mp_action_register(MLX5_QPN_MP_ACTION, handler) == 0)
			g_action_registered = true;
		else if (rte_errno != ENOTSUP) /* ENOTSUP: IPC is off (--no-shconf, --in-memory) */
			DEV_LOG(WARNING,
				"%s: cannot register IPC action %s (%s): secondaries cannot "
				"grow the pool",
				mp->name, MLX5_QPN_MP_ACTION, rte_strerror(rte_errno));
	}
	mp->next_primary = g_primaries;
	g_primaries = mp;
}

void
unserve(mlx5_qpn_mp *mp)
{
	std::lock_guard<std::mutex> g(g_mp_mutex); /* waits for a request in progress */
	for (mlx5_qpn_mp **p = &g_primaries; *p != nullptr; p = &(*p)->next_primary)
		if (*p == mp) {
			*p = mp->next_primary;
			break;
		}
	if (g_primaries == nullptr && g_action_registered) {
		rte_mp_action_unregister(MLX5_QPN_MP_ACTION);
		g_action_registered = false;
	}
}

/* ---- devargs agreement ------------------------------------------------------------------- */

using mlx5_qpn_dev_impl::DevargPairs;
using mlx5_qpn_dev_impl::Text;

bool
is_name_key(const char *key)
{
	const mlx5_qpn_backend_desc *be;
	for (unsigned i = 0; (be = mlx5_qpn_backend_at(i)) != nullptr; i++)
		if (be->name_key != nullptr && strcmp(be->name_key, key) == 0)
			return true;
	return false;
}

/* The key=value pairs of devargs that parsed, without the device name ("simN" or a backend's
 * naming key, "ib=..."): split in place, no allocation. */
void
pairs_of(const char *devargs, DevargPairs *out)
{
	const char *comma = strchr(devargs, ',');
	size_t first = comma != nullptr ? size_t(comma - devargs) : strlen(devargs);
	const char *rest = memchr(devargs, '=', first) == nullptr ?
				   (comma != nullptr ? comma + 1 : "") :
				   devargs;
	out->init(rest, strlen(rest)); /* parsed devargs: at most MLX5_QPN_DEVARGS_MAX */
}

/*
 * Every key the secondary gave must leave the primary's device as it is: the primary's devargs
 * with that one key set to the secondary's value must parse to the same settings. So a bare name
 * always agrees, and "quarantine_us=2000000" agrees with a primary that took the default.
 */
int
check_agreement(const mlx5_qpn_devargs *sda, const char *sdevargs, const MpInfo *in,
		const mlx5_qpn_devargs *pda)
{
	if (sda->backend != pda->backend) {
		DEV_LOG(ERR,
			"%s: the primary probed this device as \"%s\": a secondary attaches to it "
			"as it is",
			sda->name, in->devargs);
		return -EINVAL;
	}
	/* Both parsed already (MpInfo keeps parsed devargs): each fits, and holds only pairs. */
	DevargPairs mine, theirs;
	pairs_of(sdevargs, &mine);
	pairs_of(in->devargs, &theirs);
	const mlx5_qpn_backend_desc *be = sda->backend;
	const char *mk, *mv, *tk, *tv;
	for (size_t m = 0; (mk = mine.next(&m, &mv)) != nullptr;) {
		if (is_name_key(mk))
			continue;
		char buf[MLX5_QPN_DEVARGS_MAX + 1];
		Text merged(buf, sizeof(buf));
		if (be->name_key != nullptr)
			merged.add(be->name_key).add("=");
		merged.add(sda->name);
		for (size_t t = 0; (tk = theirs.next(&t, &tv)) != nullptr;)
			if (!is_name_key(tk) && strcmp(tk, mk) != 0)
				merged.add(",").add(tk).add("=").add(tv);
		merged.add(",").add(mk).add("=").add(mv);
		if (merged.cut) {
			DEV_LOG(ERR,
				"%s: devarg %s=%s with the primary's devargs (\"%s\") is longer than "
				"%d characters: a secondary attaches with fewer keys or the bare name",
				sda->name, mk, mv, in->devargs, MLX5_QPN_DEVARGS_MAX);
			return -E2BIG;
		}
		mlx5_qpn_devargs x;
		if (mlx5_qpn_devargs_parse(merged.p, &x) != 0 || memcmp(&x, pda, sizeof(x)) != 0) {
			DEV_LOG(ERR,
				"%s: devarg %s=%s differs from the primary's device (probed as "
				"\"%s\"): a secondary attaches to the device as it is; give the same "
				"value or the bare name",
				sda->name, mk, mv, in->devargs);
			return -EINVAL;
		}
	}
	return 0;
}

} /* namespace */

extern "C" {

int
mlx5_qpn_mp_publish(struct mlx5_qpn_dev *dev, const char *name, const char *devargs,
		    const struct mlx5_qpn_mp_devinfo *di, struct mlx5_qpn_mp **out)
{
	*out = nullptr;
	if (strlen(devargs) >= sizeof(MpInfo::devargs))
		return -E2BIG;
	char zname[RTE_MEMZONE_NAMESIZE];
	zone_name(name, zname, sizeof(zname));
	const rte_memzone *mz = rte_memzone_reserve(zname, sizeof(MpInfo), SOCKET_ID_ANY, 0);
	if (mz == nullptr)
		return rte_errno == EEXIST ? -EEXIST : -ENOMEM;
	auto *mp = new (std::nothrow) mlx5_qpn_mp();
	if (mp == nullptr) {
		rte_memzone_free(mz);
		return -ENOMEM;
	}
	memset(mz->addr, 0, sizeof(MpInfo));
	auto *in = new (mz->addr) MpInfo();
	in->magic = kInfoMagic;
	in->version = kInfoVersion;
	in->size = sizeof(MpInfo);
	in->primary = qpn::shm::self();
	snprintf(in->name, sizeof(in->name), "%s", name);
	snprintf(in->devargs, sizeof(in->devargs), "%s", devargs);
	in->di = *di;
	qpn::shm::mutex_init(&in->lock);
	mp->info = in;
	mp->mz = mz;
	mp->dev = dev;
	mp->pool = mlx5_qpn_pool_lookup(di->pool_name);
	snprintf(mp->name, sizeof(mp->name), "%s", name);
	in->state.store(kLive, std::memory_order_release);
	serve(mp);
	*out = mp;
	return 0;
}

void
mlx5_qpn_mp_note_grow(struct mlx5_qpn_mp *mp, uint64_t grown)
{
	if (mp != nullptr && !mp->secondary)
		mp->info->grown.store(grown, std::memory_order_release);
}

void
mlx5_qpn_mp_tick(struct mlx5_qpn_mp *mp, struct mlx5_qpn_pool *pool)
{
	if (mp == nullptr)
		return;
	(void)pool;
	uint64_t now = mlx5_qpn_clock_ns();
	if (now < mp->next_tick_ns.load(rlx))
		return;
	mp->next_tick_ns.store(now + kTickNs, rlx);
	reclaim(mp);
}

int
mlx5_qpn_mp_attach(const struct mlx5_qpn_devargs *da, const char *devargs,
		   struct mlx5_qpn_devargs *pda, struct mlx5_qpn_mp_devinfo *di,
		   struct mlx5_qpn_pool **pool, struct mlx5_qpn_mp **out)
{
	*out = nullptr;
	char zname[RTE_MEMZONE_NAMESIZE];
	zone_name(da->name, zname, sizeof(zname));
	const rte_memzone *mz = rte_memzone_lookup(zname);
	if (mz == nullptr) {
		DEV_LOG(ERR,
			"%s: no primary process has probed this device (a secondary process "
			"attaches to the device its primary probed)",
			da->name);
		return -ENODEV;
	}
	auto *in = static_cast<MpInfo *>(mz->addr);
	if (mz->len < sizeof(MpInfo) || in->magic != kInfoMagic || in->version != kInfoVersion ||
	    in->size != sizeof(MpInfo) || strncmp(in->name, da->name, sizeof(in->name)) != 0) {
		DEV_LOG(ERR, "%s: memzone %s is not this build's device info", da->name, zname);
		return -EPROTO;
	}
	if (in->state.load(std::memory_order_acquire) != kLive || !qpn::shm::alive(in->primary)) {
		DEV_LOG(ERR, "%s: the primary process (pid %d) that probed this device is gone",
			da->name, int(in->primary.pid));
		return -ENODEV;
	}
	char devs[sizeof(in->devargs)];
	snprintf(devs, sizeof(devs), "%s", in->devargs);
	int rc = mlx5_qpn_devargs_parse(devs, pda);
	if (rc != 0)
		return -EPROTO;
	rc = check_agreement(da, devargs, in, pda);
	if (rc != 0)
		return rc;
	struct mlx5_qpn_pool *p = mlx5_qpn_pool_lookup(in->di.pool_name);
	if (p == nullptr) {
		DEV_LOG(ERR, "%s: the primary's pool %s is not in this DPDK instance", da->name,
			in->di.pool_name);
		return -ENODEV;
	}
	auto *mp = new (std::nothrow) mlx5_qpn_mp();
	if (mp == nullptr)
		return -ENOMEM;
	mp->secondary = true;
	mp->info = in;
	mp->pool = p;
	snprintf(mp->name, sizeof(mp->name), "%s", da->name);
	if (lock_info(in) == 0) {
		for (unsigned i = 0; i < kMaxSecondaries; i++)
			if (in->secondaries[i].pid == 0 || !qpn::shm::alive(in->secondaries[i])) {
				in->secondaries[i] = qpn::shm::self();
				mp->slot = int(i);
				break;
			}
		pthread_mutex_unlock(&in->lock);
	}
	*di = in->di;
	*pool = p;
	*out = mp;
	return 0;
}

int
mlx5_qpn_mp_check_primary(struct mlx5_qpn_mp *mp)
{
	if (mp == nullptr || !mp->secondary)
		return 0;
	MpInfo *in = mp->info;
	bool closed = in->state.load(std::memory_order_acquire) != kLive;
	if (!closed && qpn::shm::alive(in->primary))
		return 0;
	if (!mp->dead_logged.exchange(true))
		DEV_LOG(ERR,
			"%s: the primary process (pid %d) %s: this secondary gets no more QPNs "
			"from the device",
			mp->name, int(in->primary.pid), closed ? "closed the device" : "is gone");
	return -ENODEV;
}

int
mlx5_qpn_mp_grow(struct mlx5_qpn_mp *mp, int force)
{
	if (mp == nullptr || !mp->secondary)
		return -EINVAL;
	int rc = mlx5_qpn_mp_check_primary(mp);
	if (rc != 0)
		return rc;
	/* Dead processes' QPNs first, at the tick's rate: an allocation that finds every QPN in
	 * quarantine comes here each time (thousands a second), and a reclaim takes the pool's
	 * range lock. */
	mlx5_qpn_mp_tick(mp, mp->pool);
	/* The device limit is reached: do not ask again for 10 ms (a caller looping on an empty pool
	 * would otherwise keep the primary's IPC thread busy; a shrink makes room again later). */
	if (!force && mlx5_qpn_clock_ns() < mp->full_until_ns.load(rlx))
		return -ENOSPC;
	mp->grow_requests.fetch_add(1, rlx);
	MpReq req = {};
	req.op = 1;
	req.force = static_cast<uint32_t>(force != 0);
	req.seen = mp->info->grown.load(std::memory_order_acquire);
	snprintf(req.name, sizeof(req.name), "%s", mp->name);
	struct rte_mp_msg msg = {};
	snprintf(msg.name, sizeof(msg.name), "%s", MLX5_QPN_MP_ACTION);
	msg.len_param = sizeof(req);
	memcpy(msg.param, &req, sizeof(req));
	struct rte_mp_reply reply = {};
	struct timespec ts = {MLX5_QPN_MP_TIMEOUT_MS / 1000,
			      (MLX5_QPN_MP_TIMEOUT_MS % 1000) * 1000000};
	int r = rte_mp_request_sync(&msg, &reply, &ts);
	int err = rte_errno;
	MpRep rep = {};
	bool got = r == 0 && reply.nb_received == 1 && reply.msgs[0].len_param == sizeof(rep);
	if (got)
		memcpy(&rep, reply.msgs[0].param, sizeof(rep));
	free(reply.msgs); // NOLINT(cppcoreguidelines-no-malloc): DPDK's, the caller frees it
	if (!got) {
		if (mlx5_qpn_mp_check_primary(mp) != 0)
			return -ENODEV;
		DEV_LOG(ERR, "%s: the primary did not answer a grow request within %d ms (%s)",
			mp->name, MLX5_QPN_MP_TIMEOUT_MS, r != 0 ? rte_strerror(err) : "no reply");
		return -ETIMEDOUT;
	}
	if (rep.rc == -ENOSPC)
		mp->full_until_ns.store(mlx5_qpn_clock_ns() + 10000000ull, rlx);
	return rep.rc < 0 ? rep.rc : 0;
}

void
mlx5_qpn_mp_counters(const struct mlx5_qpn_mp *mp, uint64_t *grow_requests, uint64_t *ipc_grows,
		     uint64_t *dead_reclaimed, int32_t *primary_pid)
{
	uint64_t a = 0, b = 0, c = 0;
	int32_t pid = 0;
	if (mp != nullptr) {
		a = mp->secondary ? mp->grow_requests.load(rlx) : mp->info->ipc_requests.load(rlx);
		b = mp->info->ipc_grows.load(rlx);
		c = mp->info->dead_reclaimed.load(rlx);
		pid = mp->info->primary.pid;
	}
	if (grow_requests != nullptr)
		*grow_requests = a;
	if (ipc_grows != nullptr)
		*ipc_grows = b;
	if (dead_reclaimed != nullptr)
		*dead_reclaimed = c;
	if (primary_pid != nullptr)
		*primary_pid = pid;
}

void
mlx5_qpn_mp_close(struct mlx5_qpn_mp *mp)
{
	if (mp == nullptr)
		return;
	MpInfo *in = mp->info;
	if (mp->secondary) {
		if (mp->slot >= 0 && lock_info(in) == 0) {
			if (qpn::shm::is_self(in->secondaries[mp->slot]))
				in->secondaries[mp->slot] = qpn::shm::ProcId();
			pthread_mutex_unlock(&in->lock);
		}
		delete mp;
		return;
	}
	unserve(mp);
	in->state.store(kClosed, std::memory_order_release);
	unsigned live = 0;
	if (lock_info(in) == 0) {
		for (auto &s : in->secondaries)
			live += static_cast<unsigned int>(s.pid != 0 && qpn::shm::alive(s));
		pthread_mutex_unlock(&in->lock);
	}
	if (live != 0)
		DEV_LOG(WARNING,
			"%s: closed by the primary while %u secondary process(es) still use "
			"it: their calls fail from now on (close the primary last)",
			mp->name, live);
	in->magic = 0;
	pthread_mutex_destroy(&in->lock);
	rte_memzone_free(mp->mz);
	delete mp;
}

} /* extern "C" */
