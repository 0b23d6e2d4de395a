/* SPDX-License-Identifier: BSD-3-Clause */
/* Addresses of the hardware connections (rdmacm_addr.h). */
#include "rdmacm_addr.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <ifaddrs.h>

#include "../common/opt_num.h" /* by path: the test suite builds this file too */

std::vector<std::string>
rdmacm_netdevs(const std::string &sysfs, const std::string &ibdev)
{
	std::vector<std::string> out;
	if (ibdev.empty() || ibdev.find('/') != std::string::npos)
		return out;
	std::string dir = sysfs + "/class/infiniband/" + ibdev + "/device/net";
	DIR *d = opendir(dir.c_str());
	if (d == nullptr)
		return out;
	for (dirent *e = readdir(d); e != nullptr; e = readdir(d))
		if (e->d_name[0] != '.')
			out.emplace_back(e->d_name);
	closedir(d);
	std::sort(out.begin(), out.end());
	return out;
}

bool
rdmacm_parse_ipv4(const std::string &host, in_addr *a, std::string *why)
{
	if (inet_pton(AF_INET, host.c_str(), a) == 1)
		return true;
	*why = "expected a dotted IPv4 address";
	return false;
}

bool
rdmacm_parse_peer(const std::string &s, sockaddr_in *sa, std::string *why)
{
	size_t colon = s.rfind(':');
	if (colon == std::string::npos) {
		*why = "expected IPv4:PORT";
		return false;
	}
	uint64_t port;
	if (!opt_num_u64(s.c_str() + colon + 1, 1, 65535, &port, why)) {
		*why = "port: " + *why;
		return false;
	}
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(static_cast<uint16_t>(port));
	if (!rdmacm_parse_ipv4(s.substr(0, colon), &sa->sin_addr, why)) {
		*why = "expected IPv4:PORT (a dotted IPv4 address)";
		return false;
	}
	return true;
}

/* The first IPv4 address of one of the device's netdevs (rdmacm_netdevs()). */
bool
rdmacm_netdev_ipv4(const std::string &ibdev, in_addr *a, std::string *why)
{
	std::vector<std::string> nd = rdmacm_netdevs("/sys", ibdev);
	ifaddrs *ifa = nullptr;
	if (nd.empty() || getifaddrs(&ifa) != 0) {
		*why = ibdev + " has no netdev";
		return false;
	}
	bool found = false;
	for (const std::string &n : nd)
		for (ifaddrs *i = ifa; i != nullptr && !found; i = i->ifa_next)
			if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET &&
			    n == i->ifa_name) {
				*a = reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr;
				found = true;
			}
	freeifaddrs(ifa);
	if (!found)
		*why = "no IPv4 address on " + ibdev + "'s netdev " + nd[0];
	return found;
}

unsigned
rdmacm_port_gids(const std::string &sysfs, const std::string &ibdev, unsigned port,
		 uint8_t (*gids)[16], unsigned max)
{
	if (ibdev.empty() || ibdev.find('/') != std::string::npos)
		return 0;
	std::string dir = sysfs + "/class/infiniband/" + ibdev + "/ports/" + std::to_string(port) +
			  "/gids/";
	static const uint8_t zero[16] = {};
	unsigned n = 0;
	/* The table is dense from 0 (entries not in use read as zero, or fail on RoCE). */
	for (unsigned i = 0; i < 256 && n < max; i++) {
		FILE *f = fopen((dir + std::to_string(i)).c_str(), "re");
		if (f == nullptr) {
			if (errno == ENOENT)
				break;
			continue;
		}
		char line[64] = {};
		bool got = fgets(line, sizeof(line), f) != nullptr;
		fclose(f);
		line[strcspn(line, "\n")] = '\0';
		if (got && inet_pton(AF_INET6, line, gids[n]) == 1 &&
		    memcmp(gids[n], zero, 16) != 0)
			n++;
	}
	return n;
}
