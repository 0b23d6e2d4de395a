/* SPDX-License-Identifier: BSD-3-Clause */
#include "proc_log_checker.h"

#include <algorithm>

ProcLogChecker::ProcLogChecker(uint32_t first, uint32_t count, uint64_t quarantine_ns)
    : first_(first), count_(count), quarantine_ns_(quarantine_ns), q_(count)
{
}

void
ProcLogChecker::violation(const std::string &m)
{
	violations_++;
	if (messages_.size() < 32)
		messages_.push_back(m);
}

void
ProcLogChecker::on_alloc(uint32_t pid, uint32_t qpn, uint64_t t)
{
	if (qpn - first_ >= count_) {
		violation("invariant 3: QPN " + std::to_string(qpn) + " outside the range");
		return;
	}
	Q &e = q_[qpn - first_];
	auto k = killed_.find(pid);
	if (k != killed_.end()) {
		/* The killed process's last act: it holds the QPN until its death. */
		e.holder = 0;
		e.free_after = std::max(e.free_after, k->second + quarantine_ns_);
		return;
	}
	if (e.holder != 0)
		violation("invariant 1: QPN " + std::to_string(qpn) + " handed to " +
			  std::to_string(pid) + " while held by " + std::to_string(e.holder));
	if (t < e.free_after)
		violation("invariant 5: QPN " + std::to_string(qpn) + " handed to " +
			  std::to_string(pid) + " " + std::to_string(e.free_after - t) +
			  " ns before its quarantine ended");
	e.holder = pid;
}

void
ProcLogChecker::on_free(uint32_t pid, uint32_t qpn, uint64_t t)
{
	if (qpn - first_ >= count_)
		return;
	Q &e = q_[qpn - first_];
	auto k = killed_.find(pid);
	uint64_t rel = k != killed_.end() ? std::max(t, k->second) : t;
	if (k == killed_.end() && e.holder != pid)
		violation("free of QPN " + std::to_string(qpn) + " by " + std::to_string(pid) +
			  ", which does not hold it");
	e.holder = 0;
	e.free_after = std::max(e.free_after, rel + quarantine_ns_);
}

void
ProcLogChecker::on_kill(uint32_t pid, uint64_t t)
{
	killed_[pid] = t;
	for (Q &e : q_)
		if (e.holder == pid) {
			e.holder = 0;
			e.free_after = std::max(e.free_after, t + quarantine_ns_);
		}
}

void
ProcLogChecker::on_drain_complete(uint64_t got)
{
	if (got != count_)
		violation("invariant 4: " + std::to_string(got) +
			  " QPNs free at the end, capacity " + std::to_string(count_));
}
