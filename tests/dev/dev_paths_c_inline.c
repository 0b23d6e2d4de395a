/* SPDX-License-Identifier: BSD-3-Clause */
/* The inline mlx5_qpn_reserved_alloc()/_dealloc() as a C caller compiles them (dev_paths.h). */
#include "mlx5_qpn.h"

#include "dev_paths.h"

const struct dev_paths dev_paths_c_inline = {
	.name = "C, inline",
	.alloc = mlx5_qpn_reserved_alloc,
	.dealloc = mlx5_qpn_reserved_dealloc,
};
