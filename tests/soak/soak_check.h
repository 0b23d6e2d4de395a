/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_SOAK_CHECK_H
#define QPN_SOAK_CHECK_H

/*
 * The soak's independent checker: it knows nothing of the pool, the lease or the device, only
 * the event logs of every process (soak_log.h), and judges invariants 1, 2 and 5 of the brief:
 * a QPN handed out while another holder has it, or less than the quarantine after it was let go
 * (freed, held at close, held or quarantined at a kill). Only *definite* violations count: each
 * record bounds the real event from the safe side (see soak_log.h), so a report is never a
 * false alarm; a hand-out whose log record was lost to a kill is simply not judged.
 */

#include <cstdint>
#include <string>
#include <vector>

#include "soak_log.h"

namespace soak {

/* One process lifetime ("incarnation") as the checker sees it. */
struct Life {
	std::vector<Rec> recs;     /* its own log, in order */
	uint64_t kill_ns = 0;      /* driver's kill record (0: not killed) */
	bool exited_clean = false; /* its close completed and it exited 0 */
};

struct Violation {
	uint32_t qpn;
	size_t first_life, second_life;
	uint64_t let_go_ns; /* lower bound of the first holder's let-go */
	uint64_t handed_ns; /* upper bound of the second hand-out */
	bool overlap;       /* handed out while the first still held it */
};

struct Report {
	uint64_t allocs = 0, frees = 0;
	uint64_t holds_judged = 0;
	uint64_t kills = 0;
	uint64_t reclaimed = 0; /* QPNs held or quarantined by a killed process, handed out
					  * again later by anyone */
	uint64_t min_reclaim_delay_ns = UINT64_MAX; /* smallest kill -> next hand-out of a QPN
						     * held at the kill (>= the quarantine) */
	/* One per killed life whose QPNs (held or quarantined at the kill) were handed out again
	 * by another process: kill -> the first such hand-out, which is when its ranges were back
	 * at the latest (>= the quarantine; how much later also depends on when someone asked).
	 * In the order of the lives. */
	std::vector<uint64_t> return_delays_ns;
	std::vector<Violation> violations;
};

/* Judge all lives against a quarantine of `quarantine_ns`. */
Report check(const std::vector<Life> &lives, uint64_t quarantine_ns);

} /* namespace soak */

#endif
