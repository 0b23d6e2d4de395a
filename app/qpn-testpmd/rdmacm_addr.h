/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Addresses of qpn-testpmd's hardware connections: --hw-peer and --hw-bind as typed, and the
 * probed device's own address. Without --hw-bind the listener binds the first IPv4 address of
 * the probed device's netdev, so that it receives only requests routed through that device
 * (a request through another device is refused anyway by the GUID check, rdmacm_fsm.h).
 */
#ifndef QPN_TESTPMD_RDMACM_ADDR_H
#define QPN_TESTPMD_RDMACM_ADDR_H

#include <cstdint>
#include <netinet/in.h>
#include <string>
#include <vector>

/* A dotted IPv4 address into *A; false with *why. */
bool rdmacm_parse_ipv4(const std::string &host, in_addr *a, std::string *why);

/* IPv4:PORT (PORT 1..65535) into *SA; false with *why. */
bool rdmacm_parse_peer(const std::string &s, sockaddr_in *sa, std::string *why);

/* The netdevs of RDMA device IBDEV: the entries of SYSFS/class/infiniband/IBDEV/device/net
 * (SYSFS: "/sys", or a copy for tests), sorted by name; empty when there is none. */
std::vector<std::string> rdmacm_netdevs(const std::string &sysfs, const std::string &ibdev);

/* The first IPv4 address of IBDEV's netdevs (in rdmacm_netdevs() order); false with *why. */
bool rdmacm_netdev_ipv4(const std::string &ibdev, in_addr *a, std::string *why);

/* The non-zero GIDs of IBDEV's port PORT (SYSFS/class/infiniband/IBDEV/ports/PORT/gids/N, as the
 * kernel prints them: eight groups of four hex digits), at most MAX into GIDS in table order;
 * returns how many. What tells a VF without a node GUID apart (rdmacm_identify). */
unsigned rdmacm_port_gids(const std::string &sysfs, const std::string &ibdev, unsigned port,
			  uint8_t (*gids)[16], unsigned max);

#endif /* QPN_TESTPMD_RDMACM_ADDR_H */
