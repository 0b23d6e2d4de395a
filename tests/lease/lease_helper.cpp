/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A second process for the lease tests: its own EAL (own --file-prefix), probes a device by
 * devargs, allocates `nalloc` QPNs, releases the first `nrelease` of them into quarantine and
 * reports on stdout, one per line:
 *   H <qpn>   held (allocated) at report time
 *   R <qpn>   released into quarantine
 *   READY     (or "ERR <rc>" and exit 1)
 * then waits for a line on stdin: "close" closes the device and exits 0. The tests SIGKILL it
 * instead to model a crash. Usage: lease_helper <devargs> <nalloc> <nrelease>
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include <rte_eal.h>

#include "mlx5_qpn.h"

int
main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s <devargs> <nalloc> <nrelease>\n", argv[0]);
		return 2;
	}
	unsigned nalloc = unsigned(strtoul(argv[2], nullptr, 0));
	unsigned nrel = unsigned(strtoul(argv[3], nullptr, 0));
	std::string prefix = "--file-prefix=lease_helper_" + std::to_string(getpid());
	std::vector<std::string> eal = {argv[0], "--no-huge", "--no-pci",
					"-m",    "64",        "-l",
					"0",     prefix,      "--log-level=lib.eal:error"};
	std::vector<char *> eargv;
	for (auto &a : eal)
		eargv.push_back(a.data());
	if (rte_eal_init(int(eargv.size()), eargv.data()) < 0) {
		printf("ERR eal\n");
		return 1;
	}
	mlx5_qpn_dev *dev = nullptr;
	int rc = mlx5_qpn_dev_probe(argv[1], &dev);
	std::vector<uint32_t> q(nalloc);
	for (unsigned i = 0; rc == 0 && i < nalloc; i++) {
		/* -EAGAIN: all free QPNs in quarantine or cooling; wait for them. */
		for (int tries = 0; tries < 100000; tries++) {
			rc = mlx5_qpn_reserved_alloc(dev, &q[i]);
			if (rc != -EAGAIN)
				break;
			usleep(1000);
		}
	}
	for (unsigned i = 0; rc == 0 && i < nrel && i < nalloc; i++)
		rc = mlx5_qpn_reserved_dealloc(dev, q[i]);
	if (rc != 0) {
		printf("ERR %d\n", rc);
		fflush(stdout);
		mlx5_qpn_dev_close(dev);
		rte_eal_cleanup();
		return 1;
	}
	for (unsigned i = 0; i < nalloc; i++)
		printf("%c %u\n", i < nrel ? 'R' : 'H', q[i]);
	printf("READY\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof(line), stdin) != nullptr)
		if (strncmp(line, "close", 5) == 0)
			break;
	mlx5_qpn_dev_close(dev);
	printf("CLOSED\n");
	fflush(stdout);
	rte_eal_cleanup();
	return 0;
}
