/* SPDX-License-Identifier: BSD-3-Clause */
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include <hwloc.h>

#include "mlx5_qpn_backend.h"
#include "mlx5_qpn_locality.h"

namespace {

/* The topology is loaded once per process (tens of ms with I/O devices) and only read after. */
std::once_flag g_once;
hwloc_topology_t g_topo = nullptr;

void
load_topology()
{
	if (hwloc_topology_init(&g_topo) != 0) {
		g_topo = nullptr;
		return;
	}
	hwloc_topology_set_io_types_filter(g_topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	if (hwloc_topology_load(g_topo) != 0) {
		hwloc_topology_destroy(g_topo);
		g_topo = nullptr;
	}
}

void
cpuset_list(hwloc_const_cpuset_t set, char *out, size_t len)
{
	if (len == 0)
		return;
	out[0] = '\0';
	if (set != nullptr)
		hwloc_bitmap_list_snprintf(out, len, set);
}

} /* namespace */

extern "C" int
mlx5_qpn_locality(const struct mlx5_qpn_devargs *da, int *numa, char *cores, size_t len)
{
	*numa = -1;
	if (len != 0)
		cores[0] = '\0';
	std::call_once(g_once, load_topology);
	if (g_topo == nullptr)
		return -ENOENT;
	hwloc_obj_t root = hwloc_get_root_obj(g_topo);

	if (da->backend == nullptr || da->backend->where == nullptr) {
		/* Where the backend's devargs do not say (hardware): the OS device of that name. */
		for (hwloc_obj_t os = hwloc_get_next_osdev(g_topo, nullptr); os != nullptr;
		     os = hwloc_get_next_osdev(g_topo, os)) {
			if (os->name == nullptr || strcmp(os->name, da->name) != 0)
				continue;
			hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(g_topo, os);
			if (anc == nullptr)
				break;
			if (anc->nodeset != nullptr && !hwloc_bitmap_iszero(anc->nodeset) &&
			    !hwloc_bitmap_isequal(anc->nodeset, root->nodeset))
				*numa = hwloc_bitmap_first(anc->nodeset);
			cpuset_list(anc->cpuset, cores, len);
			return 0;
		}
		cpuset_list(root->cpuset, cores, len);
		return -ENOENT;
	}

	/* The backend's devargs say where it "sits" (the emulated device's numa and cores). */
	const char *want = "";
	da->backend->where(da, numa, &want);
	if (want[0] != '\0') {
		/* Normalise "0:2:4" (the kvargs-friendly form) to hwloc list syntax. */
		char buf[128];
		snprintf(buf, sizeof(buf), "%s", want);
		for (char *s = buf; *s; s++)
			if (*s == ':')
				*s = ',';
		hwloc_bitmap_t set = hwloc_bitmap_alloc();
		if (set != nullptr && hwloc_bitmap_list_sscanf(set, buf) == 0)
			cpuset_list(set, cores, len);
		hwloc_bitmap_free(set);
		return 0;
	}
	if (*numa >= 0) {
		hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(g_topo,
								      static_cast<unsigned>(*numa));
		if (node != nullptr) {
			cpuset_list(node->cpuset, cores, len);
			return 0;
		}
	}
	cpuset_list(root->cpuset, cores, len);
	return 0;
}
