/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registry of probed devices (process-local, one mutex): lookups by name for the public
 * API, telemetry and the data path. The mutex is never taken while a grow mutex is held
 * (mlx5_qpn_mp.h explains the order), and queries by name copy under it so that a concurrent
 * close cannot free the device underneath.
 */
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "mlx5_qpn_dev_internal.h"
#include "mlx5_qpn_dev_priv.h"

namespace {

std::mutex g_devs_mutex;
std::vector<mlx5_qpn_dev *> g_devs;

} /* namespace */

namespace mlx5_qpn_dev_impl {

void
registry_add(mlx5_qpn_dev *d)
{
	std::lock_guard<std::mutex> g(g_devs_mutex);
	g_devs.push_back(d);
}

bool
registry_has(const char *name)
{
	std::lock_guard<std::mutex> g(g_devs_mutex);
	for (auto *x : g_devs)
		if (strcmp(x->da.name, name) == 0)
			return true;
	return false;
}

bool
registry_remove(mlx5_qpn_dev *d)
{
	std::lock_guard<std::mutex> g(g_devs_mutex);
	auto it = std::find(g_devs.begin(), g_devs.end(), d);
	if (it == g_devs.end())
		return false;
	g_devs.erase(it);
	return true;
}

} /* namespace mlx5_qpn_dev_impl */

extern "C" {

struct mlx5_qpn_dev *
mlx5_qpn_dev_get(const char *name)
{
	if (name == nullptr)
		return nullptr;
	std::lock_guard<std::mutex> g(g_devs_mutex);
	for (auto *d : g_devs)
		if (strcmp(d->da.name, name) == 0)
			return d;
	return nullptr;
}

int
mlx5_qpn_dev_query(const char *name, struct mlx5_qpn_dev_info *info,
		   struct mlx5_qpn_dev_stats *stats, char *pool_name, size_t len)
{
	if (name == nullptr)
		return -ENODEV;
	std::lock_guard<std::mutex> g(g_devs_mutex);
	for (auto *d : g_devs) {
		if (strcmp(d->da.name, name) != 0)
			continue;
		if (info != nullptr) {
			mlx5_qpn_dev_info_get(d, info);
			snprintf(pool_name, len, "%s", d->pool_name);
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
	for (; k < n && k < g_devs.size(); k++)
		snprintf(names[k], 32, "%s", g_devs[k]->da.name);
	return k;
}

unsigned int
mlx5_qpn_dev_list(const char **names, unsigned int n)
{
	std::lock_guard<std::mutex> g(g_devs_mutex);
	for (unsigned i = 0; i < n && i < g_devs.size(); i++)
		names[i] = g_devs[i]->da.name;
	return static_cast<unsigned int>(g_devs.size());
}

} /* extern "C" */
