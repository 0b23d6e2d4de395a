/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_DEVARGS_H
#define MLX5_QPN_DEVARGS_H

/**
 * @file
 * Device arguments of the mlx5_qpn driver, in DPDK's "name,key=value,..." syntax.
 *
 * The first token names the device: a bare name is claimed by the backend whose name prefix it
 * carries ("simN..." is the emulated mlx5 device), "ib=<ibv device name>" by the backend whose
 * name key it is (real devices through rdma-core); see mlx5_qpn_backend.h. The grammar (single
 * commas, KEY=VALUE with one '=', no whitespace, no duplicates, numbers decimal or 0x-hex without
 * a leading zero) is checked on the text as written, then rte_kvargs splits it and each key is
 * checked against the allow-list (the generic keys and the chosen backend's own); see doc/guides/driver.md §3 for the keys and every refusal.
 */

#include <cstddef>
#include <cstdint>
#include <cstring>

#ifdef __cplusplus
extern "C" {
#endif

#define MLX5_QPN_DEV_NAMESIZE 32

/**
 * The longest devargs string, in characters (the terminating NUL not counted). It is what the
 * multi-process info memzone keeps of the primary's devargs, and it bounds every buffer the
 * parser uses, so that parsing allocates nothing: longer devargs are refused (-EINVAL, as any
 * bad devargs: the contract of mlx5_qpn_dev_probe() and mlx5_qpn_devargs_check()).
 */
#define MLX5_QPN_DEVARGS_MAX 1023

/** Reserved-QPN policy (like UCX's UCX_RC_MLX5_DCI_... try/yes/no knobs). */
enum mlx5_qpn_rsvd_policy {
	MLX5_QPN_RSVD_TRY = 0, /**< Reserved QPNs if the device has them, else ordinary QPNs. */
	MLX5_QPN_RSVD_YES,     /**< Reserved QPNs or fail with -EOPNOTSUPP. */
	MLX5_QPN_RSVD_NO,      /**< Ordinary QPNs from the device's QPN table only. */
};

struct mlx5_qpn_backend_desc;

/** Room for a backend's own parsed keys (mlx5_qpn_devargs.be_args), in 64-bit words. */
#define MLX5_QPN_BE_ARGS_WORDS 32

/**
 * Parsed device arguments; every field has a default (see mlx5_qpn_devargs_parse()). The
 * generic layer keeps the keys every backend takes; a backend's own keys (the emulated device's
 * guid, ports, fault injection, ...) are parsed into be_args by the rules its descriptor gives
 * (mlx5_qpn_backend.h), and only that backend reads them (e.g. mlx5_qpn_sim_args()).
 */
struct mlx5_qpn_devargs {
	/** The backend that owns the device (mlx5_qpn_backend.h), from the device name. */
	const struct mlx5_qpn_backend_desc *backend;
	char name[MLX5_QPN_DEV_NAMESIZE]; /**< "sim0" or the ibv device name ("mlx5_0"). */

	enum mlx5_qpn_rsvd_policy reserved_qpn; /**< reserved_qpn=try|yes|no (default try). */
	uint64_t quarantine_us; /**< quarantine_us=N (default 2000000: a typical CM timewait). */
	uint32_t cache;         /**< cache=N per-thread cache batch (default 64). */
	uint32_t log_range;     /**< log_range=N: log2 QPNs per reservation (default: caps max). */
	uint32_t low_water;     /**< low_water=N: reserve more when free < N (default 2*cache). */
	uint32_t max_qpns; /**< max_qpns=N: most QPNs the device's pool holds (default 65536). */

	/** The backend's own keys, in its own struct (zeroed, then its defaults). */
	uint64_t be_args[MLX5_QPN_BE_ARGS_WORDS];
};

/**
 * Parse devargs into *da (all defaults first).
 *
 * Allocates nothing (bounded buffers of MLX5_QPN_DEVARGS_MAX), so it cannot fail for memory.
 *
 * @return 0; -EINVAL for a malformed list (empty pair, bare key, "k==v", empty key or value,
 *         whitespace, a [list]), an unknown or duplicate key, a bad or out-of-range value or a bad
 *         device name: one log line names the offending text as written; devargs longer than
 *         MLX5_QPN_DEVARGS_MAX characters (one log line naming their start).
 */
int mlx5_qpn_devargs_parse(const char *devargs, struct mlx5_qpn_devargs *da);

#ifdef __cplusplus
}

namespace mlx5_qpn_dev_impl {

/* A key=value list that passed the grammar check, copied and split in place into "k\0v\0k\0v":
 * the pairs as the parser saw them, without rte_kvargs (which allocates). */
struct DevargPairs {
	char buf[MLX5_QPN_DEVARGS_MAX + 1];
	size_t len = 0;

	/* @return false if the list is longer than MLX5_QPN_DEVARGS_MAX. */
	bool init(const char *list, size_t n)
	{
		if (n > MLX5_QPN_DEVARGS_MAX)
			return false;
		memcpy(buf, list, n);
		buf[n] = '\0';
		len = n;
		for (size_t i = 0; i < n; i++)
			if (buf[i] == ',' || buf[i] == '=')
				buf[i] = '\0';
		return true;
	}
	/* The key at *pos and its value (*v), *pos moved to the next pair; NULL after the last. */
	const char *next(size_t *pos, const char **v) const
	{
		if (*pos >= len)
			return nullptr;
		const char *k = buf + *pos;
		*v = k + strlen(k) + 1;
		*pos = size_t(*v + strlen(*v) + 1 - buf);
		return k;
	}
};

} /* namespace mlx5_qpn_dev_impl */
#endif

#endif /* MLX5_QPN_DEVARGS_H */
