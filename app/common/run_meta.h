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

#include <cstddef>

struct json_writer;

/**
 * Keep the command line before rte_eal_init() rearranges argv. Call first thing in main().
 * Copies argv's pointers (at most 256; the strings live as long as the process).
 */
void run_meta_save_argv(int argc, char **argv);

/**
 * The CPU as one line: /proc/cpuinfo's model name, then its family, model, stepping and
 * microcode, and "VM" under a hypervisor. A model name alone does not say which CPU a figure
 * comes from: a cloud VM's "AMD EPYC" is any of several core generations, whose costs differ
 * (the same loop took twice the cycles on two VMs of that name). "unknown" without cpuinfo.
 */
void run_meta_cpu(char *buf, size_t len);

/** Write `"meta": {...}` as a member of the object being written. Call after rte_eal_init(). */
void run_meta_json(json_writer &js, const char *tool);

#endif /* QPN_APP_RUN_META_H */
