/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registry of probed devices (process-local, one mutex): lookups by name for the public
 * API, telemetry and the data path. The mutex is never taken while a grow mutex is held
 * (mlx5_qpn_mp.h explains the order), and queries by name copy under it so that a concurrent
 * close cannot free the device underneath.
 */
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "mlx5_qpn_dev_internal.h"
#include "mlx5_qpn_dev_priv.h"

namespace {

/* The probed devices in probe order: a list through mlx5_qpn_dev::reg_next, so that registering
 * a device allocates nothing and cannot fail at the end of a probe. */
std::mutex g_devs_mutex;
mlx5_qpn_dev *g_devs;

#define FOREACH_DEV(d) for (mlx5_qpn_dev *d = g_devs; d != nullptr; d = d->reg_next)

} /* namespace */

namespace mlx5_qpn_dev_impl {

void
registry_add(mlx5_qpn_dev *d)
{
	std::lock_guard<std::mutex> g(g_devs_mutex);
	mlx5_qpn_dev **p = &g_devs;
	while (*p != nullptr)
		p = &(*p)->reg_next;
	d->reg_next = nullptr;
	*p = d;
}

bool
registry_has(const char *name)
{
	std::lock_guard<std::mutex> g(g_devs_mutex);
	FOREACH_DEV(x)
	if (strcmp(x->id.da.name, name) == 0)
		return true;
	return false;
}

bool
registry_remove(mlx5_qpn_dev *d)
{
	std::lock_guard<std::mutex> g(g_devs_mutex);
	for (mlx5_qpn_dev **p = &g_devs; *p != nullptr; p = &(*p)->reg_next)
		if (*p == d) {
			*p = d->reg_next;
			d->reg_next = nullptr;
			return true;
		}
	return false;
}

} /* namespace mlx5_qpn_dev_impl */

extern "C" {

struct mlx5_qpn_dev *
mlx5_qpn_dev_lookup(const char *name)
{
	if (name == nullptr)
		return nullptr;
	std::lock_guard<std::mutex> g(g_devs_mutex);
	FOREACH_DEV(d)
	if (strcmp(d->id.da.name, name) == 0)
		return d;
	return nullptr;
}

/* The 2.0 ABI's name: the same function under a second symbol. */
struct mlx5_qpn_dev *mlx5_qpn_dev_get(const char *name)
	__attribute__((alias("mlx5_qpn_dev_lookup")));

int
mlx5_qpn_dev_query(const char *name, struct mlx5_qpn_dev_info *info,
		   struct mlx5_qpn_dev_stats *stats, char *pool_name, size_t len)
{
	if (name == nullptr)
		return -ENODEV;
	std::lock_guard<std::mutex> g(g_devs_mutex);
	FOREACH_DEV(d)
	{
		if (strcmp(d->id.da.name, name) != 0)
			continue;
		if (info != nullptr) {
			mlx5_qpn_dev_info_get(d, info);
			snprintf(pool_name, len, "%s", d->sup.pool_name);
			info->pool_name = pool_name;
		}
		if (stats != nullptr)
			mlx5_qpn_dev_stats_get(d, stats);
		return 0;
	}
	return -ENODEV;
}

unsigned int
mlx5_qpn_dev_names(char (*names)[32], unsigned int n)
{
	std::lock_guard<std::mutex> g(g_devs_mutex);
	unsigned int k = 0;
	FOREACH_DEV(d)
	{
		if (k >= n)
			break;
		snprintf(names[k++], 32, "%s", d->id.da.name);
	}
	return k;
}

unsigned int
mlx5_qpn_dev_list(const char **names, unsigned int n)
{
	std::lock_guard<std::mutex> g(g_devs_mutex);
	unsigned int k = 0;
	FOREACH_DEV(d)
	{
		if (k < n)
			names[k] = d->id.da.name;
		k++;
	}
	return k;
}

} /* extern "C" */
