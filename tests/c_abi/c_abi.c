/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The C-ABI face of libmlx5_qpn: every installed header, included the way an application does
 * (<mlx5_qpn/...>), compiled as strict C11 with -Wall -Wextra -Werror and nothing on the include
 * path but <builddir>/include (tests/c_abi/meson.build), then linked against the shared library.
 * A C++-only construct, a missing extern "C", an internal header pulled in by a public one, or a
 * public header that needs another's include order fails the build here.
 */
#include <mlx5_qpn/mlx5_qpn_dc.h>
#include <mlx5_qpn/mlx5_qpn_cm.h>
#include <mlx5_qpn/mlx5_qpn.h>
#include <mlx5_qpn/mlx5_qpn_pool.h>

#include <stdio.h>

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
	printf("c_abi: OK (%s)\n", mlx5_qpn_cm_rej_reason_name(10));
	return 0;
}
