/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The C-ABI face of libmlx5_qpn: every installed header, included the way an application does
 * (<mlx5_qpn/...>), compiled as strict C11 with -Wall -Wextra -Werror and nothing on the include
 * path but <builddir>/include (tests/c_abi/meson.build), then linked against the shared library.
 * A C++-only construct, a missing extern "C", an internal header pulled in by a public one, or a
 * public header that needs another's include order fails the build here.
 *
 * It also calls each deprecated name as a C application built against the 2.1 ABI does (the
 * warning suppressed here alone) and asks the dynamic linker that the old and the new symbol
 * are one function of the shared library.
 *
 * And it runs without the EAL, as an application that forgot rte_eal_init() does: a probe then
 * says so (-EPERM, "EAL not initialised"), not that it is out of memory.
 */
#define _POSIX_C_SOURCE 200809L /* dlopen(), dlsym() under -std=c11 */

#include <mlx5_qpn/mlx5_qpn_dc.h>
#include <mlx5_qpn/mlx5_qpn_cm.h>
#include <mlx5_qpn/mlx5_qpn.h>
#include <mlx5_qpn/mlx5_qpn_pool.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Each deprecated name and its successor. */
static const char *const renamed[][2] = {
	{"mlx5_qpn_dev_get", "mlx5_qpn_dev_lookup"},
	{"mlx5_qpn_dc_ah_create", "mlx5_qpn_ah_create"},
	{"mlx5_qpn_dc_ah_destroy", "mlx5_qpn_ah_destroy"},
	{"mlx5_qpn_dct_number", "mlx5_qpn_dct_qpn"},
	{"mlx5_qpn_cm_shm_attach", "mlx5_qpn_cm_shm_fabric_attach"},
	{"mlx5_qpn_cm_shm_detach", "mlx5_qpn_cm_shm_fabric_detach"},
	{"mlx5_qpn_cm_shm_drops", "mlx5_qpn_cm_shm_fabric_drops"},
	{"mlx5_qpn_cm_shm_publish", "mlx5_qpn_cm_shm_fabric_publish"},
	{"mlx5_qpn_cm_shm_lookup", "mlx5_qpn_cm_shm_fabric_lookup"},
	{"mlx5_qpn_cm_shm_unlink", "mlx5_qpn_cm_shm_fabric_unlink"},
};

/* The old and the new symbol resolve to one address of the library. */
static int
same_symbols(void)
{
	void *self = dlopen(NULL, RTLD_NOW);
	int bad = 0;

	if (self == NULL) {
		fprintf(stderr, "c_abi: dlopen(NULL): %s\n", dlerror());
		return 1;
	}
	for (size_t i = 0; i < sizeof(renamed) / sizeof(renamed[0]); i++) {
		void *old_sym = dlsym(self, renamed[i][0]);
		void *new_sym = dlsym(self, renamed[i][1]);

		if (old_sym == NULL || new_sym == NULL || old_sym != new_sym) {
			fprintf(stderr, "c_abi: %s (%p) is not %s (%p)\n", renamed[i][0], old_sym,
				renamed[i][1], new_sym);
			bad = 1;
		}
	}
	dlclose(self);
	return bad;
}

/* Calls through the old names answer as the new ones do (no device or EAL needed). */
static int
old_names_work(void)
{
	struct mlx5_qpn_cm_shm_service svc;
	int bad = 0;

	memset(&svc, 0, sizeof(svc));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	svc.dct_number = 0x1234; /* the field's old name: the same bytes as dct_qpn */
	if (mlx5_qpn_cm_shm_unlink("c_abi_no_such_fabric") != -ENOENT ||
	    mlx5_qpn_cm_shm_drops(NULL) != 0 || mlx5_qpn_dct_number(NULL) != 0 ||
	    mlx5_qpn_dev_get(NULL) != NULL || mlx5_qpn_cm_shm_detach(NULL, 1) != -EINVAL)
		bad = 1;
	mlx5_qpn_dc_ah_destroy(NULL);
#pragma GCC diagnostic pop
	if (svc.dct_qpn != 0x1234)
		bad = 1;
	if (bad)
		fprintf(stderr, "c_abi: a deprecated name answers unlike its successor\n");
	return bad;
}

/* README's example without its rte_eal_init(): refused at once, the device left NULL. */
static int
probe_without_eal(void)
{
	struct mlx5_qpn_dev *dev = NULL;
	int rc = mlx5_qpn_dev_probe("cabi_noeal0", &dev);

	if (rc != -EPERM || dev != NULL) {
		fprintf(stderr,
			"c_abi: a probe without the EAL returned %d (%s), expected -EPERM\n", rc,
			strerror(-rc));
		if (rc == 0)
			mlx5_qpn_dev_close(dev);
		return 1;
	}
	return 0;
}

int
main(void)
{
	/* Packet life time 16, ACK delay 16: t = 18, 1 << 10 ms (the header's own example). */
	uint32_t ms = mlx5_qpn_cm_timewait_ms(16, 16);

	if (ms != 1024) {
		fprintf(stderr, "c_abi: mlx5_qpn_cm_timewait_ms(16, 16) = %u, expected 1024\n",
			(unsigned int)ms);
		return 1;
	}
	if (same_symbols() || old_names_work() || probe_without_eal())
		return 1;
	printf("c_abi: OK (%s)\n", mlx5_qpn_cm_rej_reason_name(10));
	return 0;
}
