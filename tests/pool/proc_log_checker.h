/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_TEST_PROC_LOG_CHECKER_H
#define QPN_TEST_PROC_LOG_CHECKER_H

/*
 * An independent checker of the pool's invariants across processes (BRIEF §4, 1, 4 and 5), fed
 * after the fact from a log that every process appends to in shared memory, in log order:
 *
 *   alloc(pid, qpn, t)  appended after the pool call returned, t read after it;
 *   free(pid, qpn, t)   appended before the pool call, t read before it;
 *   kill(pid, t)        appended by the killer before kill(2), t read before it.
 *
 * A killed process lets go of everything it held at its death, which comes after t_kill: a QPN it
 * held or released may be handed out again only quarantine_ns after max(t_kill, its release).
 * A process killed after appending a free but before the call counts as having released then
 * (the pool holds the QPN until the death, later: fine). Entries a process appended after its
 * kill entry (it ran on until the signal landed) are its last acts: the same bound applies.
 * Times are the pool's clock; every bound is taken on the side that can only hide a violation,
 * never invent one. The checker never looks at the pool.
 */

#include <cstdint>
#include <map>
#include <string>
#include <vector>

class ProcLogChecker {
public:
	ProcLogChecker(uint32_t first, uint32_t count, uint64_t quarantine_ns);

	void on_alloc(uint32_t pid, uint32_t qpn, uint64_t t);
	void on_free(uint32_t pid, uint32_t qpn, uint64_t t);
	void on_kill(uint32_t pid, uint64_t t);
	/* Invariant 4: `got` QPNs could be allocated once every holder was gone. */
	void on_drain_complete(uint64_t got);

	uint64_t violations() const { return violations_; }
	const std::vector<std::string> &messages() const { return messages_; }

private:
	struct Q {
		uint32_t holder = 0;     /* live holder's pid; 0: none */
		uint64_t free_after = 0; /* no hand-out before this time */
	};
	void violation(const std::string &m);

	uint32_t first_, count_;
	uint64_t quarantine_ns_;
	std::vector<Q> q_;
	std::map<uint32_t, uint64_t> killed_; /* pid -> t_kill */
	uint64_t violations_ = 0;
	std::vector<std::string> messages_;
};

#endif
