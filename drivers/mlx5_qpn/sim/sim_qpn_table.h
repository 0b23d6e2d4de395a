/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_SIM_QPN_TABLE_H
#define MLX5_QPN_SIM_QPN_TABLE_H

/**
 * @file
 * Internal: the device-global QPN table of the emulated mlx5 device.
 *
 * It follows the rules of the kernel's rdmavt QPN allocator (drivers/infiniband/sw/rdmavt/qp.c:
 * init_qpn_table / alloc_qpn / rvt_free_qpn), so that the emulated device hands out QPNs the
 * way a software RDMA device does:
 *  - a bitmap of 2^24 bits in pages of 4096 * 8 bits; a `last` cursor starts at qpn_start;
 *  - ordinary QPNs: the next available QPN after the last one handed out, stepping by
 *    incr = qpn_inc << qos_shift; inside a page the scan steps by incr, the next page starts at
 *    offset (incr | current bit 0); past the top the scan wraps to page 0 at (incr | flipped bit 0),
 *    and the cursor itself wraps the same way when last + incr reaches the top;
 *  - SMI/GSI answer 0/1 once per port (flags bit (type + 2 * (port - 1))), -EINVAL the second time;
 *  - a driver-reserved range [res_start, res_start + res_count) is pre-marked used;
 *  - exclude_prefix == 0x81 (AIP) confines allocation to 16 bits, the prefix is OR-ed into bits
 *    16..23 of the result;
 *  - -ENOMEM when nothing is free;
 *  - QPN 0xFFFFFF is the multicast QPN: never available, as on the hardware (its bit is always
 *    set and never counted in used(); no QP and no reserved block ever includes it).
 * Deviations, all deliberate and documented: every page exists up front (no lazy pages, so the
 * kernel's "scan the pages in use before growing" order is plain address order); one allocation
 * scans both bit-0 parities before giving up (the kernel may report -ENOMEM after one parity);
 * the scan never leaves the confined space (AIP stays below 2^16); free() checks that the QPN is
 * allocated and outside the driver-reserved range, and takes the prefix explicitly instead of
 * guessing it from bits 16..23.
 *
 * Reserved ranges (RESERVED_QPN objects) take an aligned block of 2^g free QPNs from the same
 * bitmap, so an object never overlaps an ordinary QP: the search starts at the first 2^g-aligned
 * QPN after the cursor, walks up to the top and wraps to 0; the cursor then moves to the block's
 * last QPN, so ordinary QPs continue after it (a fresh device hands out blocks and QPs in
 * ascending order, like firmware that allocates from one QPN space).
 *
 * The class is standard layout with no pointers: an instance can live in shared memory mapped at
 * different addresses in different processes. It is not thread safe: the emulated device calls
 * it under its device mutex. It never allocates and never aborts.
 */

#include <cstddef>
#include <cstdint>

namespace mlx5_qpn_sim {

/** QP type for alloc(): the special QPs, or an ordinary one. */
enum class QpType : uint8_t { SMI = 0, GSI = 1, ORDINARY = 2 };

constexpr uint32_t kQpnBits = 24;
constexpr uint32_t kQpnSpace = 1u << kQpnBits;
constexpr uint32_t kBitsPerPage = 4096 * 8; /* RVT_BITS_PER_PAGE */
constexpr uint32_t kNbPages = kQpnSpace / kBitsPerPage;
constexpr uint8_t kAipPrefix = 0x81; /* RVT_AIP_QP_PREFIX */
constexpr uint32_t kAipShift = 16;
constexpr uint32_t kAipSpace = 1u << kAipShift;
constexpr uint32_t kMaxPorts = 4;
constexpr uint32_t kMcastQpn = kQpnSpace - 1; /* 0xFFFFFF: never handed out */
/* Largest stride accepted: rdmavt drivers use qpn_inc 1 and qos_shift <= 3; a stride must stay
 * well inside one bitmap page for the page-walk rules to mean anything. */
constexpr uint32_t kMaxIncr = 4096;

/** Table parameters (rdmavt's dparms). */
struct QpnTableCfg {
	uint32_t qpn_start = 0;       /**< Initial cursor: the first QPN is qpn_start + incr. */
	uint32_t qpn_inc = 1;         /**< Stride before the QoS shift (>= 1). */
	uint32_t qos_shift = 0;       /**< incr = qpn_inc << qos_shift. */
	uint32_t res_start = 0;       /**< Driver-reserved range start. */
	uint32_t res_count = 0;       /**< Driver-reserved range length (0: none). */
	uint32_t nb_ports = 1;        /**< Ports that may create SMI/GSI (1..4). */
	bool premark_special = false; /**< Mark QPN 0 and 1 used (QP0/QP1 are not ordinary QPNs). */
};

class QpnTable {
public:
	/** Reset to an empty table with the given parameters. -EINVAL for bad parameters. */
	int init(const QpnTableCfg &cfg);

	/** Would init() accept these parameters? */
	static bool cfg_ok(const QpnTableCfg &cfg);

	/**
	 * Are the fields outside the bitmap consistent (parameters as init() accepts them, stride,
	 * cursor, counters)? A table read back from shared memory that another process may have
	 * corrupted is checked with this before use; the bitmap itself is always safe to walk.
	 */
	bool valid() const;

	/**
	 * rdmavt alloc_qpn(). @return the QPN (prefix OR-ed in for AIP), or -EINVAL (second SMI/GSI
	 * of a port, bad port) or -ENOMEM (nothing free).
	 */
	int alloc(QpType type, uint32_t port, uint8_t exclude_prefix);

	/** Return an ordinary QPN. -EINVAL if it is not allocated, reserved, special or foreign. */
	int free(uint32_t qpn, uint8_t exclude_prefix);

	/**
	 * Take an aligned block of 2^log_size free QPNs (see the file comment for the search order).
	 * @return the first QPN (prefix OR-ed in for AIP), -EINVAL (log_size too large for the space),
	 *         -ENOMEM (no free aligned block).
	 * With first_fit, the search starts at QPN 0 instead (the lowest free aligned block: a
	 * block just freed is handed out again at once, as firmware may do).
	 */
	int reserve_block(uint32_t log_size, uint8_t exclude_prefix, bool first_fit = false);

	/** Return a block taken by reserve_block(). -EINVAL if it is not fully allocated. */
	int free_block(uint32_t first_qpn, uint32_t log_size, uint8_t exclude_prefix);

	/** True if the QPN's bit is set (prefix removed for AIP). */
	bool test(uint32_t qpn, uint8_t exclude_prefix) const;

	/** Mark an index range used without any check (repair: rebuild from the records). */
	void mark_range(uint32_t first_index, uint32_t count);

	/** Clear the bitmap and re-mark the static parts (special QPNs, reserved range). */
	void reset_bitmap();

	/** Number of QPNs marked used (static parts included; the multicast QPN is not counted). */
	uint32_t used() const { return used_; }
	uint32_t last() const { return last_; }
	uint32_t incr() const { return incr_; }
	uint32_t special_flags() const { return flags_; }

private:
	static uint32_t space_of(uint8_t prefix)
	{
		return prefix == kAipPrefix ? kAipSpace : kQpnSpace;
	}
	static uint32_t with_prefix(uint32_t idx, uint8_t prefix)
	{
		return prefix == kAipPrefix ? (idx | (uint32_t(kAipPrefix) << kAipShift)) : idx;
	}
	int to_index(uint32_t qpn, uint8_t prefix, uint32_t *idx) const;
	bool bit(uint32_t i) const { return ((map_[i >> 6] >> (i & 63)) & 1) != 0u; }
	void set(uint32_t i) { map_[i >> 6] |= uint64_t(1) << (i & 63); }
	void clr(uint32_t i) { map_[i >> 6] &= ~(uint64_t(1) << (i & 63)); }
	bool is_static(uint32_t i) const;
	bool block_free(uint32_t first, uint32_t n) const;

	QpnTableCfg cfg_;
	uint32_t last_;
	uint32_t incr_;
	uint32_t flags_;
	uint32_t used_;
	uint64_t map_[kQpnSpace / 64];
};

} // namespace mlx5_qpn_sim

#endif /* MLX5_QPN_SIM_QPN_TABLE_H */
