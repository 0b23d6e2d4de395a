/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_BACKEND_H
#define MLX5_QPN_BACKEND_H

/**
 * @file
 * Internal: the backend registry, the one way the generic layer finds a backend (the shape of
 * DPDK's RTE_PMD_REGISTER_* with a driver's `valid_arguments`).
 *
 * Each backend folder registers one descriptor from a load-time constructor (RTE_INIT): its
 * name, how it recognises a device in devargs, its ops table (mlx5_qpn_ops.h), its own devargs
 * keys with their defaults and cross-key checks, and its maintenance hooks. The generic layer
 * never names a backend: devargs parsing, probe, locality, device info and purge all go
 * through the descriptor found here.
 *
 * Thread safety: registration happens in constructors, before main() and before any other
 * thread exists; lookups afterwards only read.
 */

#include <cstddef>
#include <cstdint>

#include "mlx5_qpn_devargs.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mlx5_qpn_dev_ops;

/** How a backend's devarg value is read (mlx5_qpn_devargs_take()). */
enum mlx5_qpn_devarg_type {
	MLX5_QPN_DEVARG_UINT = 0, /**< Decimal or 0x-hex, checked against [min, max]. */
	MLX5_QPN_DEVARG_GUID,     /**< 64-bit GUID, three forms (doc/guides/driver.md §3), != 0. */
	MLX5_QPN_DEVARG_CORES,    /**< Core list "0-3" or "0:2:4", into a char array. */
};

/** One devargs key a backend takes: where its value goes in the backend's args struct. */
struct mlx5_qpn_devarg_key {
	const char *name; /**< The key as written ("ports"). */
	enum mlx5_qpn_devarg_type type;
	uint64_t min, max; /**< UINT, GUID: allowed range. */
	size_t off;        /**< Offset of the field in the args struct. */
	size_t width;      /**< UINT/GUID: 4 or 8 bytes; CORES: size of the array. */
};

/** Flags of a backend's devices; reported in mlx5_qpn_dev_info.flags. */
#define MLX5_QPN_BACKEND_F_EMULATED (1u << 0) /**< = MLX5_QPN_DEV_F_EMULATED. */

/** A backend, as it registers itself. */
struct mlx5_qpn_backend_desc {
	const char *name; /**< "sim", "hw": mlx5_qpn_dev_info.backend. */
	uint32_t flags;   /**< MLX5_QPN_BACKEND_F_*. */
	/** A bare leading devargs token with this prefix names one of its devices ("sim" for
	 * "sim0"); NULL if it takes none. Such names hold letters, digits and '_'. */
	const char *name_prefix;
	/** The devargs key that names one of its devices ("ib" for "ib=mlx5_0"); NULL if none.
	 * Such names hold letters, digits, '_', '-' and '.'. */
	const char *name_key;
	/** Who takes the backend's own keys, for a refusal on another backend ("the emulated
	 * device (simN)"). */
	const char *owner;
	const struct mlx5_qpn_dev_ops *ops; /**< Its operations table. */

	/** Its own devargs keys; the generic layer refuses every key that neither it nor the
	 * chosen backend takes. Parsed values go to mlx5_qpn_devargs.be_args. */
	const struct mlx5_qpn_devarg_key *keys;
	unsigned int nb_keys;
	/** Set the defaults of be_args (already zeroed). NULL: all zero. */
	void (*args_default)(void *args);
	/** Cross-key checks after every key was read (one log line per refusal through
	 * mlx5_qpn_devargs_refuse()). @return 0 or -EINVAL. NULL: none. */
	int (*args_check)(const void *args);
	/**
	 * Where the device sits, as its devargs tell (numa and cores of the emulated device):
	 * *numa (-1: unknown) and *cores (a core list or "", valid until da goes).
	 * NULL: the generic layer asks hwloc for the OS device of the same name.
	 */
	void (*where)(const struct mlx5_qpn_devargs *da, int *numa, const char **cores);
	/**
	 * Remove the backend's own state that crashed processes left for a device name (the
	 * emulated device's shared memory segment) and say which device the name is: *guid gets
	 * its node GUID (0: unknown), whose lease file the generic layer then removes, since the
	 * lease is the generic layer's and no backend touches it. *guid is set on -ENOENT too (a
	 * lease can outlive the backend's state). @return 0; -ENOENT none; -EINVAL bad name;
	 * -EBUSY in use. NULL: the backend keeps no such state (mlx5_qpn_dev_purge() says
	 * -EOPNOTSUPP).
	 */
	int (*purge)(const char *name, uint64_t *guid);
};

/** Most backends the registry holds. */
#define MLX5_QPN_BACKENDS_MAX 8

/**
 * Register a backend (from an RTE_INIT constructor of its folder). The descriptor must live for
 * the process. @return 0; -EEXIST a backend of that name is registered; -ENOSPC registry full;
 * -EINVAL bad descriptor.
 */
int mlx5_qpn_backend_register(const struct mlx5_qpn_backend_desc *desc);

/** The registered backend of that name ("sim", "hw"); NULL if none. */
const struct mlx5_qpn_backend_desc *mlx5_qpn_backend_find(const char *name);

/** The i-th registered backend (registration order); NULL past the end. */
const struct mlx5_qpn_backend_desc *mlx5_qpn_backend_at(unsigned int i);

/**
 * The backend a device name belongs to: "simN" by the backend's name prefix, "ib=NAME" by its
 * name key, any other name by the backend that takes names through a key and has no prefix
 * (the hardware one takes ibv device names). NULL if none.
 */
const struct mlx5_qpn_backend_desc *mlx5_qpn_backend_of_name(const char *name);

/**
 * Read one devargs value into a backend's args struct, as the generic layer reads its own:
 * numbers decimal or 0x-hex within the key's range, GUIDs in their three forms, core lists.
 * A refusal logs one line naming "key=value" and why.
 * @return 0; -EINVAL refused.
 */
int mlx5_qpn_devargs_take(const struct mlx5_qpn_devarg_key *key, const char *value, void *args);

/** Log one refusal "bad devarg KEY=VALUE: WHY" (the text quoted if it holds blanks).
 * @return -EINVAL. */
int mlx5_qpn_devargs_refuse(const char *key, const char *value, const char *why);

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_BACKEND_H */
