/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_APP_FMT_NS_H
#define QPN_APP_FMT_NS_H

#include <string>

/* A duration in ns as people read it, with its unit: "8.5ns", "850ns", "12.3us", "4.56ms",
 * "1.20s" (both apps' tables: a latency's tail spans six orders of magnitude). */
std::string fmt_ns(double ns);

#endif
