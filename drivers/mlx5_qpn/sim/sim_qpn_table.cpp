/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The emulated device's QPN table: rdmavt's alloc_qpn rules over a flat 2^24-bit bitmap.
 * See sim_qpn_table.h for the rules and the deliberate deviations.
 */
#include "sim_qpn_table.h"

#include <cerrno>
#include <cstring>

namespace mlx5_qpn_sim {

bool
QpnTable::cfg_ok(const QpnTableCfg &cfg)
{
	/* qpn_inc is bounded before the shift: (qpn_inc << qos_shift) must not wrap. */
	return cfg.qpn_inc != 0 && cfg.qpn_inc <= kMaxIncr && cfg.qos_shift < 16 &&
	       (cfg.qpn_inc << cfg.qos_shift) <= kMaxIncr && cfg.qpn_start < kQpnSpace &&
	       cfg.res_start < kQpnSpace && cfg.res_count <= kQpnSpace - cfg.res_start &&
	       cfg.nb_ports >= 1 && cfg.nb_ports <= kMaxPorts;
}

bool
QpnTable::valid() const
{
	return cfg_ok(cfg_) && incr_ == (cfg_.qpn_inc << cfg_.qos_shift) && last_ < kQpnSpace &&
	       flags_ < (1u << (2 * kMaxPorts)) && used_ <= kQpnSpace && bit(kMcastQpn);
}

int
QpnTable::init(const QpnTableCfg &cfg)
{
	if (!cfg_ok(cfg))
		return -EINVAL;
	cfg_ = cfg;
	incr_ = cfg.qpn_inc << cfg.qos_shift;
	last_ = cfg.qpn_start;
	flags_ = 0;
	reset_bitmap();
	return 0;
}

void
QpnTable::reset_bitmap()
{
	memset(map_, 0, sizeof(map_));
	used_ = 0;
	set(kMcastQpn); /* not counted: it is not a QPN anyone can hold */
	if (cfg_.premark_special)
		mark_range(0, 2);
	if (cfg_.res_count)
		mark_range(cfg_.res_start, cfg_.res_count);
}

void
QpnTable::mark_range(uint32_t first, uint32_t count)
{
	if (first >= kQpnSpace)
		return;
	if (count > kQpnSpace - first)
		count = kQpnSpace - first;
	for (uint32_t i = first; i < first + count; i++) {
		if (!bit(i)) {
			set(i);
			used_++;
		}
	}
}

bool
QpnTable::is_static(uint32_t i) const
{
	if (i == kMcastQpn || (cfg_.premark_special && i < 2))
		return true;
	return (cfg_.res_count != 0u) && i >= cfg_.res_start && i - cfg_.res_start < cfg_.res_count;
}

int
QpnTable::to_index(uint32_t qpn, uint8_t prefix, uint32_t *idx) const
{
	if (prefix == kAipPrefix) {
		if ((qpn >> kAipShift) != kAipPrefix)
			return -EINVAL;
		*idx = qpn & (kAipSpace - 1);
		return 0;
	}
	if (qpn >= kQpnSpace)
		return -EINVAL;
	*idx = qpn;
	return 0;
}

bool
QpnTable::test(uint32_t qpn, uint8_t prefix) const
{
	uint32_t idx;

	return to_index(qpn, prefix, &idx) == 0 && bit(idx);
}

int
QpnTable::alloc(QpType type, uint32_t port, uint8_t prefix)
{
	if (type == QpType::SMI || type == QpType::GSI) {
		if (port < 1 || port > cfg_.nb_ports)
			return -EINVAL;
		uint32_t ret = static_cast<uint32_t>(type == QpType::GSI);
		uint32_t n = 1u << (ret + 2 * (port - 1));

		if (flags_ & n)
			return -EINVAL;
		flags_ |= n;
		return int(ret);
	}
	if (type != QpType::ORDINARY)
		return -EINVAL;

	const uint32_t space = space_of(prefix);
	const uint32_t npages = space / kBitsPerPage;
	uint32_t qpn = last_ + incr_;

	if (qpn >= space)
		qpn = incr_ | ((last_ & 1) ^ 1);
	uint32_t page = qpn / kBitsPerPage;
	uint32_t off = qpn % kBitsPerPage;

	/* 2 * npages + 1 page segments: the start page's tail, every other page with the current
	 * bit-0 parity, every page with the flipped parity after the wrap, and the start page's head
	 * again. So one call gives up only when neither parity has a free QPN on the walk. */
	for (uint32_t seg = 0; seg <= 2 * npages; seg++) {
		const uint32_t base = page * kBitsPerPage;

		if (incr_ == 1) {
			/* Stride 1: skip whole used words instead of testing bit by bit. */
			while (off < kBitsPerPage) {
				uint32_t i = base + off;
				uint64_t free_bits = ~map_[i >> 6] >> (i & 63);

				if (free_bits) {
					uint32_t k = uint32_t(__builtin_ctzll(free_bits));

					if (off + k < kBitsPerPage) {
						set(i + k);
						used_++;
						last_ = i + k;
						return int(with_prefix(i + k, prefix));
					}
				}
				off += 64 - (i & 63);
			}
			off = kBitsPerPage +
			      1; /* bit 0 of the overflowed offset, as the step loop */
		} else {
			while (off < kBitsPerPage) {
				uint32_t i = base + off;

				if (!bit(i)) {
					set(i);
					used_++;
					last_ = i;
					return int(with_prefix(i, prefix));
				}
				off += incr_;
			}
		}
		if (page + 1 < npages) {
			page++;
			off = incr_ | (off & 1);
		} else {
			page = 0;
			off = incr_ | ((off & 1) ^ 1);
		}
	}
	return -ENOMEM;
}

int
QpnTable::free(uint32_t qpn, uint8_t prefix)
{
	uint32_t idx;

	if (to_index(qpn, prefix, &idx) < 0 || is_static(idx) || !bit(idx))
		return -EINVAL;
	clr(idx);
	used_--;
	return 0;
}

bool
QpnTable::block_free(uint32_t first, uint32_t n) const
{
	if (n >= 64) {
		for (uint32_t w = first >> 6; w < (first + n) >> 6; w++)
			if (map_[w])
				return false;
		return true;
	}
	uint64_t mask = ((uint64_t(1) << n) - 1) << (first & 63);
	return (map_[first >> 6] & mask) == 0;
}

int
QpnTable::reserve_block(uint32_t log_size, uint8_t prefix, bool first_fit)
{
	const uint32_t space = space_of(prefix);

	if (log_size > kQpnBits || (uint32_t(1) << log_size) > space)
		return -EINVAL;
	const uint32_t n = uint32_t(1) << log_size;
	uint32_t start = ((last_ + 1) + n - 1) & ~(n - 1);

	if (start >= space || first_fit)
		start = 0;
	for (int pass = 0; pass < 2; pass++) {
		uint32_t lo = pass ? 0 : start;
		uint32_t hi = pass ? start : space;

		for (uint32_t b = lo; b < hi;) {
			if (n < 64 && map_[b >> 6] == ~uint64_t(0)) {
				/* A full word holds no small block: jump to the next word. */
				b = (b | 63) + 1;
				continue;
			}
			if (block_free(b, n)) {
				mark_range(b, n);
				last_ = b + n - 1;
				return int(with_prefix(b, prefix));
			}
			b += n;
		}
	}
	return -ENOMEM;
}

int
QpnTable::free_block(uint32_t first_qpn, uint32_t log_size, uint8_t prefix)
{
	uint32_t idx;

	if (to_index(first_qpn, prefix, &idx) < 0 || log_size > kQpnBits)
		return -EINVAL;
	const uint32_t n = uint32_t(1) << log_size;
	if ((idx & (n - 1)) || n > space_of(prefix) - idx)
		return -EINVAL;
	for (uint32_t i = idx; i < idx + n; i++)
		if (!bit(i) || is_static(i))
			return -EINVAL;
	for (uint32_t i = idx; i < idx + n; i++)
		clr(i);
	used_ -= n;
	return 0;
}

} // namespace mlx5_qpn_sim
