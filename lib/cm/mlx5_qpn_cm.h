/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_CM_H
#define MLX5_QPN_CM_H

/**
 * @file
 * Model of the InfiniBand connection manager (IBA vol. 1 ch. 12) as far as QPN reuse matters.
 *
 * An *agent* (struct mlx5_qpn_cm) plays the CM of one node (one node GUID). It runs the active
 * side (REQ -> REP -> RTU) and the passive side (REQ -> REP -> RTU), disconnects (DREQ/DREP),
 * rejects (REJ with the IBA reason codes) and message-receipt acks (MRA), and keeps every
 * connection's (remote node GUID, remote QPN) pair in a table:
 *
 * - a REQ (passive side) or REP (active side) naming a pair that a live connection holds is
 *   rejected with MLX5_QPN_CM_REJ_STALE_CONN, and the live connection holding the pair is sent a
 *   DREQ, as Linux's ib_cm does;
 * - a closed connection stays in *timewait* for mlx5_qpn_cm_timewait_ms() before its slot and
 *   comm id may be reused. With MLX5_QPN_CM_POLICY_LIVE the pair leaves the table when timewait
 *   starts (current kernels); with MLX5_QPN_CM_POLICY_STRICT it stays until timewait ends, so a
 *   REQ reusing the pair during timewait is rejected as stale too.
 *
 * Time is never read inside: every call that can start or fire a timer takes @c now_ns, a
 * monotonic time in nanoseconds of the caller's choice, so tests are deterministic.
 *
 * Frames have a compact binary encoding of their own (network byte order, see
 * mlx5_qpn_cm_msg_encode()); every received frame is validated and a malformed one is dropped,
 * counted and logged (once per burst).
 *
 * Thread safety: an agent is used by one thread at a time (calls on one agent must not overlap).
 * Different agents are independent. The ring transport (mlx5_qpn_cm_fabric_*) is safe for many
 * senders and one receiver per node.
 *
 * Two fabrics carry frames between agents, one object each with the same verbs where they do
 * the same thing: struct mlx5_qpn_cm_fabric (rings in this process: _create/_destroy, as every
 * object made in process memory) and struct mlx5_qpn_cm_shm_fabric (a named shared-memory
 * segment other processes open too: _open/_close, _unlink, and a service directory:
 * _publish/_lookup); both _attach a node, whose transport the agent takes, and count _drops.
 *
 * All functions return 0 (or a count) on success and a negative errno on failure.
 */

#include <stddef.h>
#include <stdint.h>

/* Marks a public name kept for one ABI as an alias of its successor, as in mlx5_qpn.h (this
 * header stands alone: it includes no other public header). */
#ifndef MLX5_QPN_DEPRECATED
#if defined(__GNUC__) || defined(__clang__)
#define MLX5_QPN_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define MLX5_QPN_DEPRECATED(msg)
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Largest encoded frame, in bytes (header + the largest message + its private data). */
#define MLX5_QPN_CM_FRAME_MAX 256
/** Largest private data of any message (RTU/DREP carry up to 224 bytes in IBA). */
#define MLX5_QPN_CM_PRIVATE_DATA_MAX 224
/** Longest agent name, without the terminating NUL. */
#define MLX5_QPN_CM_NAMESIZE 32
/** Largest QPN: QPNs are 24 bits. */
#define MLX5_QPN_CM_QPN_MAX 0xFFFFFFu
/**
 * Most connections one agent can hold, timewait entries included (a comm id is the slot in 20
 * bits and a 12-bit reuse generation above, XORed with an operand the agent draws at random when
 * created, as Linux's CM does): at a 1 s timewait an agent holds about its connections/s in
 * timewait alone.
 */
#define MLX5_QPN_CM_MAX_CONNS 1048575u

/** CM message types (values are the IBA CM attribute ids). */
enum mlx5_qpn_cm_msg_type {
	MLX5_QPN_CM_MSG_REQ = 0x10,  /**< Connection request. */
	MLX5_QPN_CM_MSG_MRA = 0x11,  /**< Message receipt acknowledgement. */
	MLX5_QPN_CM_MSG_REJ = 0x12,  /**< Reject. */
	MLX5_QPN_CM_MSG_REP = 0x13,  /**< Reply to request. */
	MLX5_QPN_CM_MSG_RTU = 0x14,  /**< Ready to use. */
	MLX5_QPN_CM_MSG_DREQ = 0x15, /**< Disconnect request. */
	MLX5_QPN_CM_MSG_DREP = 0x16, /**< Disconnect reply. */
};

/** IBA reject reasons (IBA vol. 1 table 107; same numbers as Linux's enum ib_cm_rej_reason). */
enum mlx5_qpn_cm_rej_reason {
	MLX5_QPN_CM_REJ_NO_QP = 1,
	MLX5_QPN_CM_REJ_NO_EEC = 2,
	MLX5_QPN_CM_REJ_NO_RESOURCES = 3,
	MLX5_QPN_CM_REJ_TIMEOUT = 4,
	MLX5_QPN_CM_REJ_UNSUPPORTED = 5,
	MLX5_QPN_CM_REJ_INVALID_COMM_ID = 6,
	MLX5_QPN_CM_REJ_INVALID_COMM_INSTANCE = 7,
	MLX5_QPN_CM_REJ_INVALID_SERVICE_ID = 8,
	MLX5_QPN_CM_REJ_INVALID_TRANSPORT_TYPE = 9,
	MLX5_QPN_CM_REJ_STALE_CONN = 10,
	MLX5_QPN_CM_REJ_RDC_NOT_EXIST = 11,
	MLX5_QPN_CM_REJ_INVALID_GID = 12,
	MLX5_QPN_CM_REJ_INVALID_LID = 13,
	MLX5_QPN_CM_REJ_INVALID_SL = 14,
	MLX5_QPN_CM_REJ_INVALID_TRAFFIC_CLASS = 15,
	MLX5_QPN_CM_REJ_INVALID_HOP_LIMIT = 16,
	MLX5_QPN_CM_REJ_INVALID_PACKET_RATE = 17,
	MLX5_QPN_CM_REJ_INVALID_ALT_GID = 18,
	MLX5_QPN_CM_REJ_INVALID_ALT_LID = 19,
	MLX5_QPN_CM_REJ_INVALID_ALT_SL = 20,
	MLX5_QPN_CM_REJ_INVALID_ALT_TRAFFIC_CLASS = 21,
	MLX5_QPN_CM_REJ_INVALID_ALT_HOP_LIMIT = 22,
	MLX5_QPN_CM_REJ_INVALID_ALT_PACKET_RATE = 23,
	MLX5_QPN_CM_REJ_PORT_CM_REDIRECT = 24,
	MLX5_QPN_CM_REJ_PORT_REDIRECT = 25,
	MLX5_QPN_CM_REJ_INVALID_MTU = 26,
	MLX5_QPN_CM_REJ_INSUFFICIENT_RESP_RESOURCES = 27,
	MLX5_QPN_CM_REJ_CONSUMER_DEFINED = 28,
	MLX5_QPN_CM_REJ_INVALID_RNR_RETRY = 29,
	MLX5_QPN_CM_REJ_DUPLICATE_LOCAL_COMM_ID = 30,
	MLX5_QPN_CM_REJ_INVALID_CLASS_VERSION = 31,
	MLX5_QPN_CM_REJ_INVALID_FLOW_LABEL = 32,
	MLX5_QPN_CM_REJ_INVALID_ALT_FLOW_LABEL = 33,
	/* 34 is not assigned. */
	MLX5_QPN_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED = 35,
};
/** Size of a per-reason counter array (indexed by the reason code). */
#define MLX5_QPN_CM_REJ_REASON_SLOTS 36

/** Which message a REJ or MRA refers to (IBA "message rejected" / "message MRAed"). */
enum mlx5_qpn_cm_msg_ref {
	MLX5_QPN_CM_REF_REQ = 0,
	MLX5_QPN_CM_REF_REP = 1,
	MLX5_QPN_CM_REF_OTHER = 2,
};

/**
 * One decoded CM message. Fields a type does not carry are ignored by the encoder and set to 0
 * by the decoder.
 */
struct mlx5_qpn_cm_msg {
	uint8_t type;             /**< enum mlx5_qpn_cm_msg_type. */
	uint8_t private_data_len; /**< Bytes used in private_data (type-dependent maximum). */
	uint64_t src_guid;        /**< Sender's node GUID (all types). */
	uint32_t local_comm_id;  /**< Sender's comm id (all types; 0 in a REJ of an unknown REQ). */
	uint32_t remote_comm_id; /**< Receiver's comm id (all types but REQ, where it is 0). */
	uint64_t service_id;     /**< REQ: service requested. */
	uint32_t qpn;            /**< REQ/REP: sender's QPN; DREQ: receiver's QPN (24 bits). */
	uint8_t packet_life_time;    /**< REQ: path packet life time exponent (0..31). */
	uint8_t ack_delay;           /**< REQ/REP: sender's CA ACK delay exponent (0..31). */
	uint8_t cm_response_timeout; /**< REQ: how long the requester waits for a REP (0..31). */
	uint8_t max_cm_retries;      /**< REQ: retries the requester makes (0..15). */
	uint8_t msg_ref;             /**< REJ/MRA: enum mlx5_qpn_cm_msg_ref (MRA: REQ or REP). */
	uint8_t service_timeout;     /**< MRA: extra time the sender needs, exponent (0..31). */
	uint16_t reason;             /**< REJ: enum mlx5_qpn_cm_rej_reason. */
	uint8_t private_data[MLX5_QPN_CM_PRIVATE_DATA_MAX]; /**< Opaque consumer data. */
};

/**
 * Most private data a message type may carry (IBA sizes: REQ 92, MRA 222, REJ 148, REP 196,
 * RTU 224, DREQ 220, DREP 224).
 * @return the size, or 0 for an unknown type.
 */
uint8_t mlx5_qpn_cm_private_data_max(uint8_t type);

/**
 * Encode a message into a frame (network byte order).
 *
 * @param msg  message; its fields are checked as mlx5_qpn_cm_msg_decode() checks them.
 * @param buf  output buffer.
 * @param size its size; MLX5_QPN_CM_FRAME_MAX always suffices.
 * @return the frame length (> 0); -EINVAL for a NULL argument or a field out of range;
 *         -ENOSPC if @p size is too small.
 */
int mlx5_qpn_cm_msg_encode(const struct mlx5_qpn_cm_msg *msg, void *buf, size_t size);

/**
 * Decode and validate one received frame. Never reads beyond @p len.
 *
 * @return 0; -EINVAL for a NULL argument; -EBADMSG for a truncated frame or a length that does
 *         not match its type; -EPROTO for a bad magic, version or type; -ERANGE for a field out of
 *         range (24-bit QPN, 5-bit exponents, unknown reject reason, reserved bits set, ...).
 *         On error @p msg is unspecified.
 */
int mlx5_qpn_cm_msg_decode(const void *frame, size_t len, struct mlx5_qpn_cm_msg *msg);

/** Short name of a message type ("REQ", ...), or "?" if unknown. */
const char *mlx5_qpn_cm_msg_name(uint8_t type);

/** Short name of a reject reason ("STALE_CONN", ...), or "?" if unknown. */
const char *mlx5_qpn_cm_rej_reason_name(uint16_t reason);

/** Non-zero if @p reason is an IBA reject reason code (1..33 or 35). */
int mlx5_qpn_cm_rej_reason_valid(uint16_t reason);

/**
 * The IBA ACK timeout exponent a CM uses for a path, as Linux's cm_ack_timeout() derives it:
 * the round trip (packet life time + 1, i.e. twice the one-way life time) combined with the
 * responder's CA ACK delay: adding two exponents means max(a, b) + 1 when they are within one of
 * each other, else the larger one; the result is capped at 31.
 *
 * @param packet_life_time  path packet life time exponent (values above 31 are clamped).
 * @param ack_delay         the responder CA's ACK delay exponent (values above 31 are clamped).
 */
uint8_t mlx5_qpn_cm_ack_timeout(uint8_t packet_life_time, uint8_t ack_delay);

/**
 * Timewait of a connection in milliseconds: 1 << max(t - 8, 0) with t =
 * mlx5_qpn_cm_ack_timeout() (Linux's cm_convert_to_ms(): 4.096 us * 2^t rounded to a power of
 * two of ms). Example: packet life time 16 and ACK delay 16 give t = 18 and 1024 ms.
 */
uint32_t mlx5_qpn_cm_timewait_ms(uint8_t packet_life_time, uint8_t ack_delay);

/** Timewait policies. */
enum mlx5_qpn_cm_policy {
	/** The (GUID, QPN) pair leaves the table when timewait starts (current Linux). */
	MLX5_QPN_CM_POLICY_LIVE = 0,
	/** The pair stays in the table until timewait ends (older kernels, strict reading). */
	MLX5_QPN_CM_POLICY_STRICT = 1,
};

/** Connection states. */
enum mlx5_qpn_cm_state {
	MLX5_QPN_CM_STATE_IDLE = 0,    /**< Slot free (or unknown comm id). */
	MLX5_QPN_CM_STATE_REQ_SENT,    /**< Active: REQ sent, waiting for REP (or REJ/MRA). */
	MLX5_QPN_CM_STATE_REQ_RCVD,    /**< Passive: REQ delivered to the consumer. */
	MLX5_QPN_CM_STATE_REP_SENT,    /**< Passive: REP sent, waiting for RTU. */
	MLX5_QPN_CM_STATE_ESTABLISHED, /**< Both: connected. */
	MLX5_QPN_CM_STATE_DREQ_SENT,   /**< Both: DREQ sent, waiting for DREP. */
	MLX5_QPN_CM_STATE_TIMEWAIT,    /**< Both: closed, waiting out the timewait. */
};

/** Name of a state ("ESTABLISHED", ...), or "?" if unknown. */
const char *mlx5_qpn_cm_state_name(int state);

/**
 * Transport hooks. The agent calls send() for each frame it emits and recv_burst() from
 * mlx5_qpn_cm_poll(). Frames are copied both ways; the hooks keep no pointer into the agent.
 */
struct mlx5_qpn_cm_frame {
	uint64_t src_guid; /**< Sender's node GUID (filled by the transport). */
	/**
	 * When the sender sent it: the now_ns of the sender's call that emitted it (filled by the
	 * transport from the send hook; 0: not known, the receiver's now_ns is used). The agents
	 * of one fabric must share one monotonic clock (qpn-testpmd: mlx5_qpn_clock_ns()).
	 */
	uint64_t sent_ns;
	uint16_t len;                        /**< Frame length. */
	uint8_t data[MLX5_QPN_CM_FRAME_MAX]; /**< Frame bytes. */
};

/** How an agent sends and receives frames: a struct of hooks (ring fabric, shm fabric, ...). */
struct mlx5_qpn_cm_transport {
	void *ctx; /**< Passed to the hooks. */
	/**
	 * Send a frame to node @p dst_guid; 0 or a negative errno (the frame is then lost).
	 * @p sent_ns is the now_ns of the agent's call that sends it: the transport hands it to
	 * the receiver (mlx5_qpn_cm_frame::sent_ns).
	 */
	int (*send)(void *ctx, uint64_t dst_guid, const void *frame, uint16_t len,
		    uint64_t sent_ns);
	/** Receive up to @p n frames; returns how many (>= 0) or a negative errno. */
	int (*recv_burst)(void *ctx, struct mlx5_qpn_cm_frame *frames, unsigned int n);
};

/** Agent creation parameters. */
struct mlx5_qpn_cm_params {
	const char *name;          /**< For logs (at most MLX5_QPN_CM_NAMESIZE characters). */
	uint64_t node_guid;        /**< This node's GUID; not 0. */
	uint32_t policy;           /**< enum mlx5_qpn_cm_policy (any other value: EINVAL). */
	uint32_t max_conns;        /**< Connection slots, 1..MLX5_QPN_CM_MAX_CONNS. */
	uint32_t event_queue_size; /**< Events kept until polled; 0: 2 * max_conns (at least 64). */
	uint32_t outbox_size;      /**< Frames kept when no transport; 0: 2 * max_conns (>= 64). */
	uint8_t packet_life_time;  /**< Path packet life time exponent sent in REQs (0..31). */
	uint8_t ack_delay;         /**< This CA's ACK delay exponent (0..31). */
	uint8_t cm_response_timeout; /**< Wait for a response: 4.096 us * 2^x (0..31). */
	uint8_t max_cm_retries;      /**< Retransmissions before giving up (0..15). */
	/**
	 * Transport; copied. NULL: emitted frames are queued in an outbox read with
	 * mlx5_qpn_cm_output() (tests, fuzzing, custom wiring).
	 */
	const struct mlx5_qpn_cm_transport *transport;
};

/** Opaque agent. */
struct mlx5_qpn_cm;

/**
 * Create an agent.
 * @return the agent, or NULL with rte_errno set: EINVAL (bad parameter), ENOMEM.
 */
struct mlx5_qpn_cm *mlx5_qpn_cm_create(const struct mlx5_qpn_cm_params *params);

/** Destroy an agent; NULL is a no-op. Connections vanish without any message. */
void mlx5_qpn_cm_destroy(struct mlx5_qpn_cm *cm);

/**
 * Accept REQs for @p service_id on this agent.
 * @return 0; -EINVAL (NULL agent); -EEXIST (already listening); -ENOSPC (too many services).
 */
int mlx5_qpn_cm_listen(struct mlx5_qpn_cm *cm, uint64_t service_id);

/** Stop listening. @return 0; -EINVAL; -ENOENT (not listening). */
int mlx5_qpn_cm_unlisten(struct mlx5_qpn_cm *cm, uint64_t service_id);

/**
 * Active side: open a connection to @p remote_guid by sending a REQ.
 *
 * @param cm          the agent.
 * @param remote_guid the passive side's node GUID.
 * @param service_id  the service it listens on.
 * @param local_qpn   this side's QPN (24 bits), presented in the REQ.
 * @param pd          private data for the REQ; may be NULL if pd_len is 0.
 * @param pd_len      private data length (at most 92 bytes).
 * @param now_ns      the caller's clock.
 * @param[out] conn_id the new connection's local comm id.
 * @return 0; -EINVAL (bad argument); -ENOSPC (no free slot); -ENOBUFS (frame could not be
 *         queued or sent: the connection is not created).
 */
int mlx5_qpn_cm_connect(struct mlx5_qpn_cm *cm, uint64_t remote_guid, uint64_t service_id,
			uint32_t local_qpn, const void *pd, uint8_t pd_len, uint64_t now_ns,
			uint32_t *conn_id);

/**
 * Passive side: accept a connection in REQ_RCVD by sending a REP with @p local_qpn.
 * @return 0; -EINVAL (bad argument, pd_len > 196); -ENOENT (unknown conn id); -EPERM (wrong
 *         state); -ENOBUFS (REP not sent; the connection stays in REQ_RCVD).
 */
int mlx5_qpn_cm_accept(struct mlx5_qpn_cm *cm, uint32_t conn_id, uint32_t local_qpn, const void *pd,
		       uint8_t pd_len, uint64_t now_ns);

/**
 * Reject a connection in REQ_RCVD (consumer's decision) or REP_SENT with a REJ of @p reason.
 * The slot is freed (REQ_RCVD) or enters timewait (REP_SENT), as in Linux's ib_send_cm_rej().
 * @return 0; -EINVAL (bad argument or reason); -ENOENT; -EPERM (wrong state).
 */
int mlx5_qpn_cm_reject(struct mlx5_qpn_cm *cm, uint32_t conn_id, uint16_t reason, const void *pd,
		       uint8_t pd_len, uint64_t now_ns);

/**
 * Passive side: ask the requester for more time (MRA for the REQ) while the consumer decides.
 * @return 0; -EINVAL (service_timeout > 31); -ENOENT; -EPERM (not REQ_RCVD); -ENOBUFS.
 */
int mlx5_qpn_cm_mra(struct mlx5_qpn_cm *cm, uint32_t conn_id, uint8_t service_timeout,
		    uint64_t now_ns);

/**
 * Close an ESTABLISHED connection by sending a DREQ (state DREQ_SENT; timewait starts with the
 * DREP or when the DREQ times out). @return 0; -EINVAL; -ENOENT; -EPERM (not ESTABLISHED).
 */
int mlx5_qpn_cm_disconnect(struct mlx5_qpn_cm *cm, uint32_t conn_id, uint64_t now_ns);

/**
 * Process one received frame. A malformed frame is dropped and counted; a valid frame that
 * does not fit the state of its connection is counted as unexpected and ignored (or answered
 * as IBA asks: REJ INVALID_COMM_ID to a REP for no connection, DREP to a stray DREQ).
 * @return 0 (frame used or ignored); -EINVAL (NULL agent or frame); the decoder's error for a
 *         malformed frame.
 */
int mlx5_qpn_cm_input(struct mlx5_qpn_cm *cm, const void *frame, size_t len, uint64_t now_ns);

/**
 * Fire due timers: retransmit REQ/REP/DREQ, give up after max_cm_retries (REQ: REJ TIMEOUT;
 * REP: REJ TIMEOUT and timewait; DREQ: timewait), expire a REQ the consumer left unanswered
 * until the requester surely gave up (response timeout * (retries + 2), plus the MRA's service
 * timeout: event REJECTED with TIMEOUT, slot freed), end timewaits (timewait entries expire
 * when now_ns >= start + timewait). A timer fires on the first tick whose now_ns is >= its
 * deadline, never earlier. Cost: the timers due plus the ~1 ms wheel slots walked since the last
 * tick, not the connections held (timers are ordered by deadline in a timing wheel).
 * @return the number of timers fired (>= 0), or -EINVAL.
 */
int mlx5_qpn_cm_tick(struct mlx5_qpn_cm *cm, uint64_t now_ns);

/**
 * Receive up to one burst (32 frames) from the transport, process it, then tick at @p now_ns.
 *
 * Each frame is handled at the time it was sent (mlx5_qpn_cm_frame::sent_ns; @p now_ns when
 * the transport does not know it), after the timers due by then: the model of a CM that handles
 * a frame as it arrives on a fabric without latency, as the kernel's does whatever the
 * application is doing. Why not at @p now_ns: a caller reads its clock before the poll, so a
 * frame sent on another lcore after that read would be handled before it was sent (a REQ sent
 * just after its pair's timewait ended would be refused as STALE_CONN); and a poll that comes
 * late (its lcore descheduled) would start a timewait late, by as much as the lcore was away,
 * which no kernel CM does (the peer's QPN then comes back "early" against it). A send time more
 * than 1 s after @p now_ns is taken as @p now_ns + 1 s (a bad or hostile stamp must not end
 * every timewait at once).
 * @return frames received (>= 0); -EINVAL; -ENOTSUP (no transport); a transport error.
 */
int mlx5_qpn_cm_poll(struct mlx5_qpn_cm *cm, uint64_t now_ns);

/**
 * Take the oldest frame of the outbox (agents without a transport).
 * @param cm           the agent.
 * @param[out] dst_guid destination node.
 * @param buf          where the frame is copied.
 * @param size         bytes available at buf.
 * @return the frame length; -EINVAL; -EAGAIN (empty); -ENOSPC (@p size too small; the frame
 *         stays queued).
 */
int mlx5_qpn_cm_output(struct mlx5_qpn_cm *cm, uint64_t *dst_guid, void *buf, size_t size);

/** Event types. */
enum mlx5_qpn_cm_event_type {
	/** Passive: a REQ to be accepted or rejected (remote_qpn, service_id, private data). */
	MLX5_QPN_CM_EVENT_REQ = 1,
	/** Both: the connection is established. */
	MLX5_QPN_CM_EVENT_ESTABLISHED,
	/** Both: the connection attempt failed (reason: the REJ's, or TIMEOUT, or STALE_CONN). */
	MLX5_QPN_CM_EVENT_REJECTED,
	/** Both: an established connection is closed (DREQ/DREP or REJ); timewait started. */
	MLX5_QPN_CM_EVENT_DISCONNECTED,
	/** Both: timewait ended; the conn id is gone and the QPN may be reused. */
	MLX5_QPN_CM_EVENT_TIMEWAIT_EXIT,
};

/** One event. */
struct mlx5_qpn_cm_event {
	uint32_t type;            /**< enum mlx5_qpn_cm_event_type. */
	uint32_t conn_id;         /**< Local comm id. */
	uint64_t remote_guid;     /**< Peer node. */
	uint32_t remote_qpn;      /**< Peer QPN (0 if not known yet). */
	uint32_t local_qpn;       /**< This side's QPN (0 if not chosen yet). */
	uint64_t service_id;      /**< Service of the connection. */
	uint16_t reason;          /**< REJECTED: reject reason; else 0. */
	uint8_t private_data_len; /**< Bytes of private data from the peer's message. */
	uint8_t private_data[MLX5_QPN_CM_PRIVATE_DATA_MAX]; /**< Peer's private data. */
};

/**
 * Take the oldest event.
 * @return 0; -EINVAL; -EAGAIN (none).
 */
int mlx5_qpn_cm_poll_event(struct mlx5_qpn_cm *cm, struct mlx5_qpn_cm_event *ev);

/** Snapshot of one connection. */
struct mlx5_qpn_cm_conn_info {
	uint32_t state;          /**< enum mlx5_qpn_cm_state. */
	uint8_t active;          /**< 1: active side, 0: passive side. */
	uint8_t pair_in_table;   /**< 1 while (remote_guid, remote_qpn) is in the stale table. */
	uint64_t remote_guid;    /**< Peer's node GUID. */
	uint32_t remote_comm_id; /**< Peer's comm id (0 until known). */
	uint32_t local_qpn;      /**< This side's QPN (presented in the REQ or REP). */
	uint32_t remote_qpn;     /**< The peer's QPN (0 until known). */
	uint64_t service_id;     /**< Service the connection is for. */
	uint64_t timer_ns;       /**< Next timer (retransmit or timewait end), 0 if none. */
	uint32_t timewait_ms;    /**< Timewait this connection gets (or got). */
};

/** @return 0; -EINVAL; -ENOENT (unknown or stale conn id). */
int mlx5_qpn_cm_conn_get(const struct mlx5_qpn_cm *cm, uint32_t conn_id,
			 struct mlx5_qpn_cm_conn_info *info);

/**
 * Whether (remote_guid, remote_qpn) is in the stale-detection table.
 * @return 1 held by a live connection, 2 held by a connection in timewait (strict policy),
 *         0 not held, -EINVAL.
 */
int mlx5_qpn_cm_pair_held(const struct mlx5_qpn_cm *cm, uint64_t remote_guid, uint32_t remote_qpn);

/** Counters of an agent. */
struct mlx5_qpn_cm_stats {
	uint64_t rx[8];      /**< Valid frames received, by type - 0x10 (REQ..DREP). */
	uint64_t tx[8];      /**< Frames emitted, by type - 0x10. */
	uint64_t tx_errors;  /**< Frames the transport or the outbox refused (lost). */
	uint64_t malformed;  /**< Frames dropped by the decoder. */
	uint64_t unexpected; /**< Valid frames not fitting their connection's state. */
	uint64_t duplicates; /**< Duplicate REQs (same remote comm id) absorbed. */
	uint64_t rej_rx[MLX5_QPN_CM_REJ_REASON_SLOTS]; /**< REJs received, by reason. */
	uint64_t rej_tx[MLX5_QPN_CM_REJ_REASON_SLOTS]; /**< REJs sent, by reason. */
	uint64_t stale_rejects;    /**< REQs/REPs rejected with STALE_CONN by this agent. */
	uint64_t stale_dreqs;      /**< DREQs sent to live holders of a stale pair. */
	uint64_t mra_rx;           /**< MRAs received (timers extended). */
	uint64_t retransmits;      /**< REQ/REP/DREQ retransmissions. */
	uint64_t timeouts;         /**< Exchanges given up after max_cm_retries. */
	uint64_t established;      /**< Connections established. */
	uint64_t timewait_entered; /**< Connections that entered timewait. */
	uint64_t timewait_exited;  /**< Timewaits that ended. */
	uint64_t events_dropped;   /**< Events lost because the event queue was full. */
	uint32_t conns;            /**< Slots in use now (timewait included). */
	uint32_t timewait_entries; /**< Connections in timewait now. */
	uint32_t pairs;            /**< (GUID, QPN) pairs in the table now. */
};

/** @return 0 or -EINVAL. */
int mlx5_qpn_cm_stats_get(const struct mlx5_qpn_cm *cm, struct mlx5_qpn_cm_stats *stats);

/* ---- In-process transport over DPDK rings ---- */

/** A set of nodes exchanging frames through one rte_ring per node (the emulated fabric). */
struct mlx5_qpn_cm_fabric;

/**
 * Create a fabric.
 * @param name       unique name (for the rings and the frame mempool).
 * @param max_nodes  nodes that can attach (1..64).
 * @param ring_size  frames each node can have pending (power of two, 2..65536).
 * @return the fabric, or NULL with rte_errno set (EINVAL, ENOMEM, EEXIST).
 */
struct mlx5_qpn_cm_fabric *mlx5_qpn_cm_fabric_create(const char *name, unsigned int max_nodes,
						     unsigned int ring_size);

/** Destroy a fabric and its rings; no agent may use its transports any more. NULL: no-op. */
void mlx5_qpn_cm_fabric_destroy(struct mlx5_qpn_cm_fabric *fabric);

/**
 * Attach node @p guid and fill @p tp with its transport (send: multi-producer safe;
 * recv_burst: one consumer). Attach all nodes before traffic starts.
 * @return 0; -EINVAL; -EEXIST (guid attached); -ENOSPC (max_nodes reached); -ENOMEM.
 */
int mlx5_qpn_cm_fabric_attach(struct mlx5_qpn_cm_fabric *fabric, uint64_t guid,
			      struct mlx5_qpn_cm_transport *tp);

/** Frames the fabric dropped (unknown destination or full ring). */
uint64_t mlx5_qpn_cm_fabric_drops(const struct mlx5_qpn_cm_fabric *fabric);


/* ---- Cross-process transport over POSIX shared memory ---- */

/**
 * A fabric in POSIX shared memory ("/mlx5_qpn_cmfab_<name>"), shared by every process that
 * opens the same name: the way two separate DPDK primaries (each with its own --file-prefix and
 * no hugepages) exchange CM frames. It holds a fixed table of nodes (GUID, owner pid) and per
 * node a bounded lock-free queue of fixed-size frame slots (many senders in any process, one
 * receiver), plus a small *service directory* where a passive side publishes what an active side
 * needs to reach it (service id, node GUID, DCT's QPN, DC key).
 *
 * Delivery is best effort, as on a real fabric: a frame to an unknown GUID or to a full queue is
 * dropped and counted (the CM retransmits); a send never blocks. A node whose owner process died
 * is reclaimed by the next attach that needs a slot or names its GUID; frames still queued for a
 * node's previous owner are discarded (and counted) by the new one. Its directory entries are
 * ignored once the publisher is dead. Liveness is the pid *and* its start time, so a reused pid
 * is not taken for a dead owner.
 *
 * The segment is its owner's alone (created with O_EXCL and mode 0600; an existing one of another
 * user or with group/other permission bits is refused with -EACCES); every index and length read
 * back from it is bounded before use, and a corrupted header gets -EPROTO. The last user to close
 * removes it.
 *
 * No EAL is needed (plain shared memory and atomics): a fork()ed child may open the fabric by
 * name. A handle must not be used across fork(); the child opens its own.
 *
 * A sender that dies between reserving a queue slot and publishing it does not stall the queue:
 * the slot carries a claim word naming its sender, and the receiver skips the slot of a dead
 * claimer (counted as a drop). The few instructions between reserving a position and claiming it
 * are covered by a grace period (1 s) instead: a live sender stalled longer than that at that
 * exact point loses its frame (-ETIMEDOUT, counted).
 *
 * Thread safety: send (the transport hook) is safe from any thread of any process; recv_burst of
 * one node from one thread at a time; open/attach/detach/publish/close from any thread.
 */
struct mlx5_qpn_cm_shm_fabric;

/** Most nodes of a shared-memory fabric. */
#define MLX5_QPN_CM_SHM_MAX_NODES 64
/** Entries of the service directory. */
#define MLX5_QPN_CM_SHM_MAX_SERVICES 64
/** Longest fabric name (without the NUL): letters, digits, '_', '-', '.'. */
#define MLX5_QPN_CM_SHM_NAMESIZE 32

/**
 * Open (creating it if needed) the fabric @p name. Creation and a concurrent open are
 * serialised by a file lock on the segment, waited for at most a few seconds; a segment left
 * half-initialised by a crashed creator is initialised again. The creator's geometry wins: later openers get the existing one
 * (@p max_nodes and @p slots_per_node are then only checked for range).
 *
 * @param name            the fabric (at most MLX5_QPN_CM_SHM_NAMESIZE characters).
 * @param max_nodes       1..MLX5_QPN_CM_SHM_MAX_NODES.
 * @param slots_per_node  frames pending per node: a power of two in 2..65536. Memory is
 *                        reserved sparsely: pages are used as queues fill.
 * @param[out] out        the handle.
 * @return 0; -EINVAL (bad name or geometry); -EPROTO (a segment of another layout version, or
 *         corrupted); -EACCES (a segment another user could reach: wrong owner or mode);
 *         -ETIMEDOUT (its init lock stayed held); -ENOMEM; another negative errno from
 *         shm_open/ftruncate/mmap.
 */
int mlx5_qpn_cm_shm_fabric_open(const char *name, unsigned int max_nodes,
				unsigned int slots_per_node, struct mlx5_qpn_cm_shm_fabric **out);

/**
 * Attach node @p guid, owned by this process, and fill @p tp with its transport. The transport
 * stays valid until the node is detached or the handle closed; do not call it after that (right
 * after a detach its hooks answer -ENOTCONN, but a later attach through the same handle may
 * reuse them).
 * @return 0; -EINVAL; -EEXIST (@p guid attached by a live process); -ENOSPC (every node slot
 *         used by a live process).
 */
int mlx5_qpn_cm_shm_fabric_attach(struct mlx5_qpn_cm_shm_fabric *fab, uint64_t guid,
				  struct mlx5_qpn_cm_transport *tp);

/**
 * Detach node @p guid attached through this handle, and withdraw its directory entries.
 * @return 0; -EINVAL; -ENOENT (not attached through this handle).
 */
int mlx5_qpn_cm_shm_fabric_detach(struct mlx5_qpn_cm_shm_fabric *fab, uint64_t guid);

/** Detach every node of this handle and unmap the segment; the last user's close removes it.
 * NULL: no-op. */
void mlx5_qpn_cm_shm_fabric_close(struct mlx5_qpn_cm_shm_fabric *fab);

/**
 * Remove the segment's name (processes that have it open keep using it).
 * @return 0; -EINVAL (bad name); -ENOENT.
 */
int mlx5_qpn_cm_shm_fabric_unlink(const char *name);

/** Frames the fabric dropped, all processes together (unknown GUID, full queue, stale frame). */
uint64_t mlx5_qpn_cm_shm_fabric_drops(const struct mlx5_qpn_cm_shm_fabric *fab);

/** One service directory entry. */
struct mlx5_qpn_cm_shm_service {
	uint64_t service_id; /**< CM service id the node listens on. */
	uint64_t node_guid;  /**< The listening node (attached through the publishing handle). */
	uint64_t dc_key;     /**< DC key of the DCT behind it (0 if none). */
	union {
		uint32_t dct_qpn; /**< QPN of that DCT (mlx5_qpn_dct_qpn(); 0 if none). */
		/** Deprecated name of dct_qpn (the 2.1 ABI's; the same bytes). */
		uint32_t dct_number MLX5_QPN_DEPRECATED("use dct_qpn");
	};
	int32_t pid; /**< Publisher's pid (filled by publish). */
};

/**
 * Publish an entry; it is withdrawn when its node is detached (or ignored once the publisher
 * died). @p svc->node_guid must be attached through @p fab.
 * @return 0; -EINVAL; -ENOENT (node not attached here); -ENOSPC (directory full).
 */
int mlx5_qpn_cm_shm_fabric_publish(struct mlx5_qpn_cm_shm_fabric *fab,
				   const struct mlx5_qpn_cm_shm_service *svc);

/**
 * Copy up to @p n live entries of @p service_id, in directory order.
 * @return how many were copied (0: none published yet); -EINVAL.
 */
int mlx5_qpn_cm_shm_fabric_lookup(const struct mlx5_qpn_cm_shm_fabric *fab, uint64_t service_id,
				  struct mlx5_qpn_cm_shm_service *out, unsigned int n);

/*
 * Names of the 2.1 ABI, each an exported alias of its successor (the same function) for
 * applications built against it; they leave with the next ABI number. A call compiles with a
 * warning naming the successor.
 */
/** Deprecated name of mlx5_qpn_cm_shm_fabric_attach(). */
int mlx5_qpn_cm_shm_attach(struct mlx5_qpn_cm_shm_fabric *fab, uint64_t guid,
			   struct mlx5_qpn_cm_transport *tp)
	MLX5_QPN_DEPRECATED("use mlx5_qpn_cm_shm_fabric_attach()");
/** Deprecated name of mlx5_qpn_cm_shm_fabric_detach(). */
int mlx5_qpn_cm_shm_detach(struct mlx5_qpn_cm_shm_fabric *fab, uint64_t guid)
	MLX5_QPN_DEPRECATED("use mlx5_qpn_cm_shm_fabric_detach()");
/** Deprecated name of mlx5_qpn_cm_shm_fabric_unlink(). */
int mlx5_qpn_cm_shm_unlink(const char *name)
	MLX5_QPN_DEPRECATED("use mlx5_qpn_cm_shm_fabric_unlink()");
/** Deprecated name of mlx5_qpn_cm_shm_fabric_drops(). */
uint64_t mlx5_qpn_cm_shm_drops(const struct mlx5_qpn_cm_shm_fabric *fab)
	MLX5_QPN_DEPRECATED("use mlx5_qpn_cm_shm_fabric_drops()");
/** Deprecated name of mlx5_qpn_cm_shm_fabric_publish(). */
int mlx5_qpn_cm_shm_publish(struct mlx5_qpn_cm_shm_fabric *fab,
			    const struct mlx5_qpn_cm_shm_service *svc)
	MLX5_QPN_DEPRECATED("use mlx5_qpn_cm_shm_fabric_publish()");
/** Deprecated name of mlx5_qpn_cm_shm_fabric_lookup(). */
int mlx5_qpn_cm_shm_lookup(const struct mlx5_qpn_cm_shm_fabric *fab, uint64_t service_id,
			   struct mlx5_qpn_cm_shm_service *out, unsigned int n)
	MLX5_QPN_DEPRECATED("use mlx5_qpn_cm_shm_fabric_lookup()");

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_CM_H */
