/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_VEC_H
#define MLX5_QPN_VEC_H

/*
 * Internal: a growable array that cannot throw. The library is built with -fno-exceptions, where
 * std::vector's allocation failure is std::terminate: an abort on a path whose C API promises
 * -ENOMEM. NtVec's push_back() says false instead, and the caller returns -ENOMEM with nothing
 * lost. For trivially copyable elements only (realloc moves them), which is all the driver keeps:
 * range objects, cooling entries, device pointers.
 */

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace mlx5_qpn_dev_impl {

/*
 * Test seam (not installed, not exported: the tests link the static archive): while positive,
 * each NtVec::push_back() takes one off and fails as if realloc() had, whether or not it had to
 * grow, so that a test reaches every caller's -ENOMEM path deterministically. 0 outside tests;
 * it costs one relaxed load per push_back(), which only slow paths (growth, cooling) call.
 * Defined in mlx5_qpn_grow.cpp.
 */
extern std::atomic<int> g_test_fail_push_backs;
/* While g_test_fail_push_backs is positive, this many push_back() calls first succeed (a test
 * reaches the second of two bookkeeping steps). */
extern std::atomic<int> g_test_pass_push_backs;

inline bool
test_push_back_fails()
{
	int n = g_test_fail_push_backs.load(std::memory_order_relaxed);
	if (n <= 0)
		return false;
	int k = g_test_pass_push_backs.load(std::memory_order_relaxed);
	while (k > 0)
		if (g_test_pass_push_backs.compare_exchange_weak(k, k - 1,
								 std::memory_order_relaxed))
			return false;
	while (n > 0)
		if (g_test_fail_push_backs.compare_exchange_weak(n, n - 1,
								 std::memory_order_relaxed))
			return true;
	return false;
}

template <typename T> class NtVec {
	static_assert(std::is_trivially_copyable_v<T>, "NtVec moves its elements with realloc");

public:
	NtVec() = default;
	NtVec(const NtVec &) = delete;
	NtVec &operator=(const NtVec &) = delete;
	~NtVec() { free(p_); } // NOLINT(cppcoreguidelines-no-malloc): grown by realloc

	/** Append; false (nothing changed) if memory is short. */
	[[nodiscard]] bool push_back(const T &v)
	{
		if (test_push_back_fails())
			return false;
		if (n_ == cap_) {
			size_t cap = cap_ != 0 ? 2 * cap_ : 8;
			// NOLINTNEXTLINE(cppcoreguidelines-no-malloc): grows in place when it can
			void *q = realloc(static_cast<void *>(p_), cap * sizeof(T));
			if (q == nullptr)
				return false;
			p_ = static_cast<T *>(q);
			cap_ = cap;
		}
		p_[n_++] = v;
		return true;
	}
	/** Remove the element at @p it, keeping the order of the others. */
	void erase(T *it)
	{
		std::memmove(static_cast<void *>(it), it + 1, size_t(end() - it - 1) * sizeof(T));
		n_--;
	}
	void pop_back() { n_--; }
	void clear() { n_ = 0; }
	T *begin() { return p_; }
	T *end() { return p_ + n_; }
	const T *begin() const { return p_; }
	const T *end() const { return p_ + n_; }
	T &operator[](size_t i) { return p_[i]; }
	const T &operator[](size_t i) const { return p_[i]; }
	T &back() { return p_[n_ - 1]; }
	size_t size() const { return n_; }
	bool empty() const { return n_ == 0; }

private:
	T *p_ = nullptr;
	size_t n_ = 0;
	size_t cap_ = 0;
};

} /* namespace mlx5_qpn_dev_impl */

#endif /* MLX5_QPN_VEC_H */
