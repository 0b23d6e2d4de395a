/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TESTPMD_LATENCY_H
#define QPN_TESTPMD_LATENCY_H

/*
 * A log-linear latency histogram (8 linear sub-buckets per power of two, ~12% resolution):
 * fixed size, O(1) record with no allocation, mergeable, good enough for p50/p99/p99.9; min, max
 * and the sum (for the mean) are exact.
 */
#include <cstdint>
#include <cstring>

struct latency_hist {
	static constexpr unsigned kSub = 8;
	static constexpr unsigned kBuckets = 64 * kSub;
	uint64_t count[kBuckets];
	uint64_t n;
	uint64_t min; /* meaningful when n != 0 */
	uint64_t max;
	uint64_t sum;

	latency_hist() { reset(); }
	void reset() { memset(this, 0, sizeof(*this)); }

	static unsigned index(uint64_t v)
	{
		if (v < kSub)
			return static_cast<unsigned>(v);
		unsigned msb = 63 - static_cast<unsigned>(__builtin_clzll(v));
		unsigned sub = static_cast<unsigned>((v >> (msb - 3)) & (kSub - 1));
		return (msb - 2) * kSub + sub;
	}
	/* Upper bound of a bucket (what a percentile reports: never under-states). */
	static uint64_t upper(unsigned i)
	{
		if (i < kSub)
			return i;
		unsigned msb = i / kSub + 2, sub = i % kSub;
		return ((static_cast<uint64_t>(kSub) + sub + 1) << (msb - 3)) - 1;
	}
	void record(uint64_t v)
	{
		count[index(v)]++;
		if (n == 0 || v < min)
			min = v;
		n++;
		sum += v;
		if (v > max)
			max = v;
	}
	double mean() const
	{
		return n == 0 ? 0.0 : static_cast<double>(sum) / static_cast<double>(n);
	}
	void merge(const latency_hist &o)
	{
		for (unsigned i = 0; i < kBuckets; i++)
			count[i] += o.count[i];
		if (o.n != 0 && (n == 0 || o.min < min))
			min = o.min;
		n += o.n;
		sum += o.sum;
		if (o.max > max)
			max = o.max;
	}
	uint64_t percentile(double p) const
	{
		if (n == 0)
			return 0;
		uint64_t want = static_cast<uint64_t>(p / 100.0 * static_cast<double>(n));
		if (want >= n)
			want = n - 1;
		uint64_t seen = 0;
		for (unsigned i = 0; i < kBuckets; i++) {
			seen += count[i];
			if (seen > want)
				return upper(i) < max ? (upper(i) > min ? upper(i) : min) : max;
		}
		return max;
	}
};

#endif
