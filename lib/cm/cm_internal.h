/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Internals of the CM model shared by its translation units (not installed).
 */
#ifndef MLX5_QPN_CM_INTERNAL_H
#define MLX5_QPN_CM_INTERNAL_H

#include "mlx5_qpn_cm.h"
#include "cm_timer_wheel.h"

#include <rte_log.h>

#include "mlx5_qpn_log.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

extern int mlx5_qpn_cm_logtype;

#define CM_LOG(level, ...) MLX5_QPN_LOG(cm, level, __VA_ARGS__)

namespace cm_impl {

/* Test hooks of the shared-memory transport (cm_shm_ring.cpp). shm_send_test_hook, when
 * set, is called by a sender at stage 1 (queue position taken, slot not claimed) and stage 2
 * (slot claimed, frame not published): a test stops or kills the sender there. A consumer skips
 * a position whose claim is not marked after shm_stall_grace_ns (default 1 s). */
extern void (*shm_send_test_hook)(int stage);
extern uint64_t shm_stall_grace_ns;

/* Test hook of the comm ids (cm_agent.cpp): when set, an agent's comm-id operand comes from it
 * instead of the random draw, so a test can make two incarnations of one node collide. */
extern uint32_t (*comm_id_operand_test_hook)();

/*
 * Zeroed memory for a table used all over (hash map, ring), every page present: an agent's
 * tables are allocated once at create, and first-touch page faults on the data path cost ~34 us
 * each in this VM (~28k a second in a 1 s timewait run, ~25 % of its samples). Large tables
 * are mmap()ed with MAP_POPULATE, which maps every page in one call (~20x faster than touching
 * them one by one, which cost 1.4 s at each qpn-testpmd start); small ones come from
 * new (std::nothrow) unsigned char[]() and are written once more, a byte a page. (Zeroing alone
 * does not do it: GCC may fold an allocation and its zeroing into calloc, which leaves fresh
 * pages untouched.) nullptr on overflow or no memory. Free with table_free() and the same sizes.
 */
void *table_alloc(size_t n, size_t size);
void table_free(void *p, size_t n, size_t size);

/* IBA time exponent -> ns: 4.096 us * 2^t (t <= 31 keeps this well inside 64 bits). */
constexpr uint64_t
iba_time_ns(uint8_t t)
{
	return uint64_t(4096) << (t > 31 ? 31 : t);
}

/*
 * Fixed-size open-addressing hash map from (GUID, 32-bit id) to a connection slot. Sized at
 * creation (at least twice the connection count, a power of two) so an insert never fails and
 * probes stay short; linear probing with backward-shift deletion keeps it tombstone-free.
 */
class KeyMap {
public:
	bool init(uint32_t max_entries);
	void fini();
	/* Slot holding the key, or -1. */
	int find(uint64_t guid, uint32_t id) const;
	/* Key must be absent; there is always room by construction. */
	void insert(uint64_t guid, uint32_t id, uint32_t slot);
	void erase(uint64_t guid, uint32_t id);
	uint32_t size() const { return count_; }

private:
	struct Ent {
		uint64_t guid;
		uint32_t id;
		uint32_t slot1; /* slot + 1; 0: empty */
	};
	uint32_t home(uint64_t guid, uint32_t id) const;
	Ent *ents_ = nullptr;
	uint32_t mask_ = 0;
	uint32_t count_ = 0;
};

/* Bounded FIFO of trivially copyable items, allocated once. */
template <typename T> class Fifo {
public:
	bool init(uint32_t cap);
	void fini();
	bool full() const { return count_ == cap_; }
	bool empty() const { return count_ == 0; }
	T *push_slot(); /* nullptr when full */
	const T *front() const { return empty() ? nullptr : &items_[head_]; }
	void pop();

private:
	T *items_ = nullptr;
	uint32_t cap_ = 0, head_ = 0, count_ = 0;
};

struct OutFrame {
	uint64_t dst;
	uint16_t len;
	uint8_t data[MLX5_QPN_CM_FRAME_MAX];
};

struct Conn {
	uint32_t comm_id; /* 0: slot free */
	uint16_t gen;     /* bumped at each reuse so comm ids differ (12 bits, never 0) */
	uint8_t state;    /* enum mlx5_qpn_cm_state */
	bool active;
	bool pair_in_table;
	bool rid_in_table;
	bool mra_sent;
	bool mra_rcvd; /* an MRA extended the current wait already */
	uint8_t retries;
	uint8_t max_retries;
	uint8_t packet_life_time;
	uint8_t peer_ack_delay;
	uint64_t remote_guid;
	uint32_t remote_comm_id;
	uint32_t local_qpn;
	uint32_t remote_qpn;
	uint64_t service_id;
	uint64_t timer_ns; /* 0: no timer */
	uint64_t wait_ns;  /* one attempt's wait for a response */
	uint32_t timewait_ms;
	uint16_t last_len; /* last REQ/REP/DREQ/MRA sent, for retransmits and duplicates */
	uint8_t last[MLX5_QPN_CM_FRAME_MAX];
};

} // namespace cm_impl

struct mlx5_qpn_cm {
	char name[MLX5_QPN_CM_NAMESIZE + 1];
	mlx5_qpn_cm_params params;
	mlx5_qpn_cm_transport tp;
	bool has_tp;
	uint32_t max_conns;
	/* XORed into every local comm id, drawn at random at create (Linux's random_id_operand):
	 * a node that restarts with the same GUID does not hand out its dead incarnation's ids. */
	uint32_t id_operand;
	cm_impl::Conn *conns;
	uint32_t *free_slots; /* stack of free slot indices */
	uint32_t nb_free;
	cm_impl::TimerWheel timers; /* one timer per connection slot, by deadline */
	cm_impl::KeyMap pairs;      /* (remote GUID, remote QPN) -> slot: stale detection */
	cm_impl::KeyMap rids;       /* (remote GUID, remote comm id) -> slot: duplicate REQs */
	static constexpr uint32_t kMaxServices = 64;
	uint64_t services[kMaxServices];
	uint32_t nb_services;
	cm_impl::Fifo<mlx5_qpn_cm_event> events;
	cm_impl::Fifo<cm_impl::OutFrame> outbox;
	mlx5_qpn_cm_stats stats;
	/* Rate limit of the malformed-frame log: one line per burst. */
	bool mal_burst;
	uint64_t mal_burst_start;
	uint64_t mal_suppressed;
	bool ev_drop_logged;
	/* The time of the call in progress: what the frames it sends are stamped with. */
	uint64_t now_ns;
	mlx5_qpn_cm_frame rx_burst[32];
};

/*
 * The CM agent (cm_agent.cpp, cm_conn.cpp, cm_active.cpp, cm_passive.cpp, cm_disconnect.cpp,
 * cm_timer.cpp, cm_input.cpp): active and passive connection state machines, the
 * stale-connection check on the (remote GUID, remote QPN) table, retransmission timers and
 * timewait.
 *
 * Behaviour follows Linux's drivers/infiniband/core/cm.c where IBA leaves a choice:
 * - REQ handling order: duplicate (same remote comm id) first, then stale pair, then listener;
 * - a stale REQ/REP gets REJ STALE_CONN and the connection holding the pair gets a DREQ;
 * - a REJ with reason TIMEOUT or STALE_CONN puts the rejected connection into timewait, any
 *   other reason frees it at once;
 * - a DREQ for no connection is answered with a DREP, a DREQ in timewait gets the DREP again;
 * - a duplicate REP (our RTU was lost) gets the RTU again.
 * Simplifications: the consumer's REP-received and DREQ-received steps are automatic (RTU and
 * DREP are sent by the agent), there are no LAP/APR/SIDR messages and no alternate paths.
 */
namespace cm_impl {

/* comm id = (generation (12 bits) << 20 | slot + 1) ^ the agent's random operand */
constexpr uint32_t kSlotBits = 20;
constexpr uint32_t kSlotMask = (1u << kSlotBits) - 1;
constexpr uint32_t kGenMask = (1u << (32 - kSlotBits)) - 1;

inline unsigned
type_index(uint8_t type)
{
	return unsigned(type - MLX5_QPN_CM_MSG_REQ) & 7u;
}

inline Conn *
lookup(mlx5_qpn_cm *cm, uint32_t comm_id)
{
	uint32_t slot1 = (comm_id ^ cm->id_operand) & kSlotMask;
	if (comm_id == 0 || slot1 == 0 || slot1 > cm->max_conns)
		return nullptr;
	Conn *c = &cm->conns[slot1 - 1];
	return c->comm_id == comm_id ? c : nullptr;
}

inline uint32_t
slot_of(const mlx5_qpn_cm *cm, const Conn *c)
{
	return uint32_t(c - cm->conns);
}

/* cm_conn.cpp: slots, tables, events, sending. */
Conn *alloc_conn(mlx5_qpn_cm *cm);
void pair_remove(mlx5_qpn_cm *cm, Conn *c);
void pair_insert(mlx5_qpn_cm *cm, Conn *c);
void rid_remove(mlx5_qpn_cm *cm, Conn *c);
void free_conn(mlx5_qpn_cm *cm, Conn *c);
void push_event(mlx5_qpn_cm *cm, uint32_t type, const Conn *c, uint16_t reason,
		const mlx5_qpn_cm_msg *msg);
int transmit(mlx5_qpn_cm *cm, uint64_t dst, const uint8_t *frame, uint16_t len);
int send_msg(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t dst, Conn *keep);
mlx5_qpn_cm_msg base_msg(const mlx5_qpn_cm *cm, uint8_t type, const Conn *c);
void set_pd(mlx5_qpn_cm_msg &m, const void *pd, uint8_t len);
void send_rej_to(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &rx, uint16_t reason, uint8_t ref);
void send_rej(mlx5_qpn_cm *cm, Conn *c, uint16_t reason, uint8_t ref, const void *pd = nullptr,
	      uint8_t pd_len = 0);
bool stale_pair(mlx5_qpn_cm *cm, uint64_t guid, uint32_t qpn, uint64_t now_ns);
/* A stale REQ or REP was found to name @p holder's connection: counted (the caller sends the
 * REJ), and an established holder is sent a DREQ. */
void stale_holder(mlx5_qpn_cm *cm, Conn *holder, uint64_t now_ns);
bool listening(const mlx5_qpn_cm *cm, uint64_t service_id);
void unexpected(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, const Conn *c);
Conn *peer_conn(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m);
Conn *conn_arg(mlx5_qpn_cm *cm, uint32_t conn_id, int *rc);
bool pd_ok(const void *pd, uint8_t len, uint8_t type);

/* cm_timer.cpp: response timer and timewait. */
/* The connection's one timer: fire at @p deadline_ns, or none with 0. */
inline void
set_timer(mlx5_qpn_cm *cm, Conn *c, uint64_t deadline_ns)
{
	c->timer_ns = deadline_ns;
	if (deadline_ns == 0)
		cm->timers.cancel(slot_of(cm, c));
	else
		cm->timers.arm(slot_of(cm, c), deadline_ns);
}
void arm(mlx5_qpn_cm *cm, Conn *c, uint64_t now_ns);
void enter_timewait(mlx5_qpn_cm *cm, Conn *c, uint64_t now_ns);

/* cm_passive.cpp, cm_active.cpp, cm_disconnect.cpp: received messages. */
void on_req(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns);
void on_rtu(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m);
void on_rep(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns);
void on_mra(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns);
int send_dreq(mlx5_qpn_cm *cm, Conn *c, uint64_t now_ns);
void on_rej(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns);
void on_dreq(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns);
void on_drep(mlx5_qpn_cm *cm, const mlx5_qpn_cm_msg &m, uint64_t now_ns);

/* cm_input.cpp: the malformed-frame log. */
void end_malformed_burst(mlx5_qpn_cm *cm);
void malformed(mlx5_qpn_cm *cm, int rc, size_t len, uint64_t now_ns);

} // namespace cm_impl

#endif /* MLX5_QPN_CM_INTERNAL_H */
