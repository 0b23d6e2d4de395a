/* SPDX-License-Identifier: BSD-3-Clause */
#include "pool_checker.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <tuple>

namespace {

uint64_t
checker_now_ns()
{
	return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
					     std::chrono::steady_clock::now().time_since_epoch())
					     .count());
}

uint64_t
thread_token()
{
	static std::atomic<uint64_t> next{1};
	thread_local uint64_t token = next.fetch_add(1);
	return token;
}

} // namespace

PoolChecker::PoolChecker(const std::vector<std::pair<uint32_t, uint32_t>> &ranges,
			 uint64_t quarantine_ns)
    : quarantine_ns_(quarantine_ns)
{
	for (auto &r : ranges)
		capacity_ += r.second;
	entries_ = std::vector<Entry>(capacity_);
	uint32_t i = 0;
	for (auto &r : ranges)
		for (uint32_t k = 0; k < r.second; k++)
			index_.emplace(r.first + k, i++);
}

void
PoolChecker::violation(const std::string &msg)
{
	violations_.fetch_add(1);
	std::lock_guard<std::mutex> g(msg_mutex_);
	if (messages_.size() < 32)
		messages_.push_back(msg);
}

std::vector<std::string>
PoolChecker::messages() const
{
	std::lock_guard<std::mutex> g(msg_mutex_);
	return messages_;
}

uint64_t
PoolChecker::on_acquire(uint32_t qpn)
{
	uint64_t now = checker_now_ns();
	auto it = index_.find(qpn);
	if (it == index_.end()) {
		violation("invariant 3: QPN 0x" + std::to_string(qpn) + " is outside every range");
		return 0;
	}
	Entry &e = entries_[it->second];
	const uint64_t hand_out = e.hand_outs.fetch_add(1) + 1;
	uint64_t expect = 0;
	if (!e.owner.compare_exchange_strong(expect, thread_token()))
		violation("invariant 1: QPN " + std::to_string(qpn) + " handed out while held by " +
			  "holder " + std::to_string(expect));
	uint64_t rel = e.released_ns.load();
	if (rel != 0 && now - rel < quarantine_ns_)
		violation("invariant 2: QPN " + std::to_string(qpn) + " reused " +
			  std::to_string(now - rel) + " ns after its release (quarantine " +
			  std::to_string(quarantine_ns_) + " ns)");
	return hand_out;
}

void
PoolChecker::on_release(uint32_t qpn)
{
	auto it = index_.find(qpn);
	if (it == index_.end()) {
		violation("release of QPN " + std::to_string(qpn) + " outside every range");
		return;
	}
	Entry &e = entries_[it->second];
	/* Time first, owner second: whoever sees the owner cleared also sees this time. */
	e.released_ns.store(checker_now_ns());
	uint64_t me = thread_token();
	uint64_t expect = me;
	if (!e.owner.compare_exchange_strong(expect, 0))
		violation("release of QPN " + std::to_string(qpn) + " not held by the releaser");
}

void
PoolChecker::on_handover(uint32_t qpn)
{
	/* The QPN must be held (by the thread that passed it on): the caller becomes its holder. A
	 * QPN outside every range is never held, so it is reported as such too. */
	auto it = index_.find(qpn);
	if (it == index_.end() || entries_[it->second].owner.exchange(thread_token()) == 0)
		violation("handover of QPN " + std::to_string(qpn) + " that nobody holds");
}

void
PoolChecker::on_drain_complete(uint64_t got)
{
	if (got != capacity_)
		violation("invariant 4: " + std::to_string(got) +
			  " QPNs free at the end, capacity " + std::to_string(capacity_));
}

uint64_t
PoolChecker::free_begin()
{
	return checker_now_ns();
}

void
PoolChecker::on_free_end(uint32_t qpn, uint64_t hand_out, uint64_t begin_ns, int rc)
{
	const uint64_t end = checker_now_ns();
	std::lock_guard<std::mutex> g(free_mutex_);
	frees_.push_back({qpn, hand_out, begin_ns, end, rc});
}

void
PoolChecker::check_frees()
{
	std::lock_guard<std::mutex> g(free_mutex_);
	/* The accepted frees of each hand-out, by start. */
	std::vector<FreeCall> ok;
	for (const FreeCall &f : frees_)
		if (f.rc == 0)
			ok.push_back(f);
	std::sort(ok.begin(), ok.end(), [](const FreeCall &a, const FreeCall &b) {
		return std::tie(a.qpn, a.hand_out, a.begin_ns) <
		       std::tie(b.qpn, b.hand_out, b.begin_ns);
	});
	/* Within a hand-out: one that began after an earlier one had ended was a double free. */
	uint64_t first_end = 0;
	for (size_t i = 0; i < ok.size(); i++) {
		const FreeCall &f = ok[i];
		if (i == 0 || f.qpn != ok[i - 1].qpn || f.hand_out != ok[i - 1].hand_out) {
			first_end = f.end_ns;
			continue;
		}
		if (f.begin_ns > first_end)
			violation("double free accepted: QPN " + std::to_string(f.qpn) +
				  " hand-out " + std::to_string(f.hand_out) + " freed again " +
				  std::to_string(f.begin_ns - first_end) +
				  " ns after an accepted free of it had returned");
		first_end = std::min(first_end, f.end_ns);
	}
}
