/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_SOAK_LOG_H
#define QPN_SOAK_LOG_H

/*
 * The soak's event log: one file per worker incarnation, fixed-size records appended with one
 * write(2) each, so a SIGKILL loses at most the record being written and never tears the file
 * (a short tail is ignored by the reader). Times are CLOCK_MONOTONIC, which all processes of the
 * host share.
 *
 * What each record bounds (the checker relies on exactly this):
 *  - kAllocEnd: written after the allocation returned, so the real hand-out is <= t;
 *  - kFreeBegin: written before the free call, so the real release is >= t;
 *  - kCloseBegin: written before mlx5_qpn_dev_close(): every QPN still held is let go at >= t;
 *  - kKill: written by the driver before kill(SIGKILL): the death is >= t.
 */

#include <cstdint>
#include <string>
#include <vector>

namespace soak {

enum Op : uint32_t {
	kAllocEnd = 1,
	kFreeBegin = 2,
	kCloseBegin = 3,
	kKill = 4,   /* driver log: qpn field = worker incarnation */
	kStart = 5,  /* worker started (qpn field unused) */
	kProbed = 6, /* device probed */
};

struct Rec {
	uint32_t op;
	uint32_t qpn;
	uint64_t t_ns;
};
static_assert(sizeof(Rec) == 16, "log records are written whole");

/* Read a log; a torn tail (killed mid-write) is dropped. */
std::vector<Rec> read_log(const std::string &path);

uint64_t now_ns();

} /* namespace soak */

#endif
