/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The backend registry (mlx5_qpn_backend.h). A fixed table filled by the backends' load-time
 * constructors, before main() and before any thread: no lock, and lookups only read it.
 */
#include <cerrno>
#include <cstring>

#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_dev_log.h"

namespace {

const mlx5_qpn_backend_desc *g_backends[MLX5_QPN_BACKENDS_MAX];
unsigned int g_nb_backends;

} /* namespace */

extern "C" {

int
mlx5_qpn_backend_register(const struct mlx5_qpn_backend_desc *desc)
{
	if (desc == nullptr || desc->name == nullptr || desc->ops == nullptr ||
	    (desc->name_prefix == nullptr && desc->name_key == nullptr))
		return -EINVAL;
	if (mlx5_qpn_backend_find(desc->name) != nullptr)
		return -EEXIST;
	if (g_nb_backends == MLX5_QPN_BACKENDS_MAX)
		return -ENOSPC;
	g_backends[g_nb_backends++] = desc;
	return 0;
}

const struct mlx5_qpn_backend_desc *
mlx5_qpn_backend_at(unsigned int i)
{
	return i < g_nb_backends ? g_backends[i] : nullptr;
}

const struct mlx5_qpn_backend_desc *
mlx5_qpn_backend_find(const char *name)
{
	for (unsigned int i = 0; name != nullptr && i < g_nb_backends; i++)
		if (strcmp(g_backends[i]->name, name) == 0)
			return g_backends[i];
	return nullptr;
}

const struct mlx5_qpn_backend_desc *
mlx5_qpn_backend_of_name(const char *name)
{
	if (name == nullptr)
		return nullptr;
	const mlx5_qpn_backend_desc *any = nullptr;
	for (unsigned int i = 0; i < g_nb_backends; i++) {
		const mlx5_qpn_backend_desc *be = g_backends[i];
		size_t n;
		if (be->name_prefix != nullptr &&
		    strncmp(name, be->name_prefix, strlen(be->name_prefix)) == 0)
			return be;
		if (be->name_key != nullptr &&
		    strncmp(name, be->name_key, n = strlen(be->name_key)) == 0 && name[n] == '=')
			return be;
		if (be->name_key != nullptr && be->name_prefix == nullptr && any == nullptr)
			any = be;
	}
	return any;
}

} /* extern "C" */
