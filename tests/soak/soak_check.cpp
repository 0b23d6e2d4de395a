/* SPDX-License-Identifier: BSD-3-Clause */
#include "soak_check.h"

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <unordered_map>

#include <fcntl.h>
#include <unistd.h>

namespace soak {

uint64_t
now_ns()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

std::vector<Rec>
read_log(const std::string &path)
{
	std::vector<Rec> out;
	int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return out;
	Rec buf[256];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		/* Records are written whole; a torn tail can only be the last bytes. */
		out.insert(out.end(), buf, buf + size_t(n) / sizeof(Rec));
	}
	close(fd);
	return out;
}

namespace {

/* One holding of a QPN: from its hand-out to the moment it was let go. */
struct Hold {
	uint64_t handed; /* >= the real hand-out */
	uint64_t let_go; /* <= the real let-go; UINT64_MAX: never let go in the logs */
	size_t life;
	bool by_kill; /* let go by the death of its holder */
};

} /* namespace */

Report
check(const std::vector<Life> &lives, uint64_t q)
{
	Report r;
	std::unordered_map<uint32_t, std::vector<Hold>> holds;
	/* QPNs a killed life held or had released within the quarantine: candidates to count as
	 * reclaimed when someone is handed them later. (qpn -> kill time) */
	struct Killed {
		uint64_t kill_ns;
		size_t life;
		bool held; /* held at the kill (else released less than the quarantine before) */
	};
	std::unordered_map<uint32_t, std::vector<Killed>> killed_qpns;

	for (size_t li = 0; li < lives.size(); li++) {
		const Life &l = lives[li];
		std::unordered_map<uint32_t, size_t> open; /* qpn -> index in holds[qpn] */
		uint64_t close_ns = 0, last_ns = 0;
		for (const Rec &e : l.recs) {
			last_ns = std::max(last_ns, e.t_ns);
			switch (e.op) {
			case kAllocEnd:
				r.allocs++;
				open[e.qpn] = holds[e.qpn].size();
				holds[e.qpn].push_back({e.t_ns, UINT64_MAX, li, false});
				break;
			case kFreeBegin: {
				r.frees++;
				auto it = open.find(e.qpn);
				if (it != open.end()) {
					holds[e.qpn][it->second].let_go = e.t_ns;
					if (l.kill_ns != 0 && l.kill_ns < e.t_ns + q)
						killed_qpns[e.qpn].push_back(
							{l.kill_ns, li, false});
					open.erase(it);
				}
				break;
			}
			case kCloseBegin:
				if (close_ns == 0)
					close_ns = e.t_ns;
				break;
			default:
				break;
			}
		}
		/* Whatever is still held was let go at the close, else at the kill, else (a death
		 * nobody caused) no earlier than the last thing the process wrote. */
		uint64_t end = close_ns != 0 ? close_ns : (l.kill_ns != 0 ? l.kill_ns : last_ns);
		for (auto &[qpn, idx] : open) {
			Hold &h = holds[qpn][idx];
			h.let_go = std::max(end, h.handed);
			h.by_kill = close_ns == 0 && l.kill_ns != 0;
			if (h.by_kill)
				killed_qpns[qpn].push_back({l.kill_ns, li, true});
		}
		if (l.kill_ns != 0)
			r.kills++;
	}

	std::unordered_map<size_t, uint64_t> returned; /* killed life -> first return delay */
	for (auto &[qpn, hs] : holds) {
		std::sort(hs.begin(), hs.end(),
			  [](const Hold &a, const Hold &b) { return a.handed < b.handed; });
		for (size_t i = 1; i < hs.size(); i++) {
			const Hold &a = hs[i - 1], &b = hs[i];
			r.holds_judged++;
			if (a.let_go == UINT64_MAX || b.handed < a.let_go + q)
				r.violations.push_back(
					{qpn, a.life, b.life, a.let_go, b.handed,
					 a.let_go == UINT64_MAX || b.handed < a.let_go});
		}
		auto k = killed_qpns.find(qpn);
		if (k == killed_qpns.end())
			continue;
		for (const Killed &kq : k->second) {
			for (const Hold &h : hs)
				/* By another process: the victim's own last records can postdate
				 * the kill's time stamp, which is taken before the signal. */
				if (h.handed > kq.kill_ns && h.life != kq.life) {
					r.reclaimed++;
					auto [it, fresh] = returned.emplace(kq.life,
									    h.handed - kq.kill_ns);
					if (!fresh)
						it->second = std::min(it->second,
								      h.handed - kq.kill_ns);
					if (kq.held)
						r.min_reclaim_delay_ns =
							std::min(r.min_reclaim_delay_ns,
								 h.handed - kq.kill_ns);
					break;
				}
		}
	}
	for (size_t li = 0; li < lives.size(); li++)
		if (auto it = returned.find(li); it != returned.end())
			r.return_delays_ns.push_back(it->second);
	return r;
}

} /* namespace soak */
