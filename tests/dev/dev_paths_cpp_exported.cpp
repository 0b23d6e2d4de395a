/* SPDX-License-Identifier: BSD-3-Clause */
/* The exported mlx5_qpn_reserved_alloc()/_dealloc(), as a C++ caller reaches them with
 * MLX5_QPN_NO_INLINE (dev_paths.h). */
#define MLX5_QPN_NO_INLINE 1
#include "mlx5_qpn.h"

#include "dev_paths.h"

extern "C" const struct dev_paths dev_paths_cpp_exported = {
	.name = "C++, exported",
	.alloc = mlx5_qpn_reserved_alloc,
	.dealloc = mlx5_qpn_reserved_dealloc,
};
