/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The two ways an application reaches mlx5_qpn_reserved_alloc()/_dealloc(): the inline calls of
 * mlx5_qpn.h and the exported functions (MLX5_QPN_NO_INLINE), each from a C and from a C++
 * translation unit (dev_paths_*.c, dev_paths_*.cpp, test_dev_paths.cpp), as function pointers,
 * so that one test runs the same script through all four and compares what they did.
 */
#ifndef QPN_TESTS_DEV_PATHS_H
#define QPN_TESTS_DEV_PATHS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct mlx5_qpn_dev;

struct dev_paths {
	const char *name;
	int (*alloc)(struct mlx5_qpn_dev *dev, uint32_t *qpn);
	int (*dealloc)(struct mlx5_qpn_dev *dev, uint32_t qpn);
};

extern const struct dev_paths dev_paths_c_inline;
extern const struct dev_paths dev_paths_c_exported;
extern const struct dev_paths dev_paths_cpp_exported;

#ifdef __cplusplus
}
#endif

#endif /* QPN_TESTS_DEV_PATHS_H */
