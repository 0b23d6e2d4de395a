/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-perf: the cost of handing out a QPN, ours next to its peers, in one run.
 *
 *   qpn-perf [EAL options] -- [--iterations=N] [--repeat=N] [--cache=N] [--range=N]
 *            [--range-q=N] [--quarantine-us=N] [--burst=N] [--hold=K] [--storm=S]
 *            [--idle-us=N] [--scaling=on|off] [--json=FILE] [--only=LIST] [--block-log=G]
 *            [--budget-ms=N] [--count=instructions] [--quick]
 *
 * Every peer (perf.h) is set up once, checked once (unique in-range QPNs, double free refused
 * where the peer claims to check), then measured repetition after repetition with the peers
 * interleaved, so slow drifts of the machine hit all of them alike; figures are medians over
 * the repetitions. The aims (doc/guides/benchmark.md) are ratios against peers of the same run,
 * never absolute times.
 */
#include "perf_app.h"

RTE_LOG_REGISTER(perf_logtype, mlx5_qpn.perf, INFO);

int
main(int argc, char **argv)
{
	struct perf_opts opts;
	int ret, n;

	run_meta_save_argv(argc, argv);
	perf_save_argv(argc, argv);
	n = rte_eal_init(argc, argv);
	if (n < 0) {
		fprintf(stderr, "qpn-perf: EAL init failed: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	/* getopt sees the program name and then our own options. */
	argv[n] = argv[0];
	ret = perf_parse_args(argc - n, argv + n, &opts);
	if (ret == 0 && !perf_check_only(opts.only))
		ret = -EINVAL;
	if (ret == 0 && perf_qpndev_from_eal() != 0)
		ret = -ENODEV;
	if (ret == 0)
		ret = perf_main(&opts);
	rte_eal_cleanup();
	if (ret == 1)
		return 0; /* --help */
	return ret == 0 ? 0 : (ret == -EINVAL ? 2 : 1);
}
