/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef QPN_APP_RUN_META_H
#define QPN_APP_RUN_META_H

/**
 * @file
 * What a result was measured on, for every JSON the apps write: the tool and its version, the
 * git revision it was built from, the whole command line with the EAL part apart, the machine
 * (kernel, CPU model, cores, TSC rate) and the DPDK version. Figures are compared across runs and
 * machines; without this they cannot be.
 */

struct json_writer;

/**
 * Keep the command line before rte_eal_init() rearranges argv. Call first thing in main().
 * Copies argv's pointers (at most 256; the strings live as long as the process).
 */
void run_meta_save_argv(int argc, char **argv);

/** Write `"meta": {...}` as a member of the object being written. Call after rte_eal_init(). */
void run_meta_json(json_writer &js, const char *tool);

#endif /* QPN_APP_RUN_META_H */
