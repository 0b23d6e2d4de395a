/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdma-core glue: dlopen the libraries once and resolve every entry point into one table.
 * A missing library or symbol is reported as text, never as a crash at first call.
 */
#include "mlx5_qpn_glue.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

#include <atomic>
#include <mutex>

#include "mlx5_qpn_hw_log.h"

namespace {

enum lib_idx { LIB_VERBS = 0, LIB_MLX5 = 1, LIB_COUNT };

/* Sonames: the ABI major versions the prototypes in the installed headers belong to. */
constexpr const char *kLibName[LIB_COUNT] = {"libibverbs.so.1", "libmlx5.so.1"};

struct sym_desc {
	lib_idx lib;
	const char *name; /* exported name (the real symbol, not a header macro) */
	size_t offset;    /* of the member in struct mlx5_qpn_glue */
	bool optional;    /* absent from older rdma-core: the member stays NULL */
};

#define GLUE_SYM(lib, sym, member)                                                                 \
	{                                                                                          \
		lib, #sym, offsetof(struct mlx5_qpn_glue, member), false                           \
	}
#define GLUE_OPT(lib, sym, member)                                                                 \
	{                                                                                          \
		lib, #sym, offsetof(struct mlx5_qpn_glue, member), true                            \
	}

/*
 * dlsym() returns the default version of versioned symbols (ibv_*@@IBVERBS_1.1), which is the
 * one the headers' prototypes describe.
 */
constexpr sym_desc kSyms[] = {
	GLUE_SYM(LIB_VERBS, ibv_get_device_list, get_device_list),
	GLUE_SYM(LIB_VERBS, ibv_free_device_list, free_device_list),
	GLUE_SYM(LIB_VERBS, ibv_get_device_name, get_device_name),
	GLUE_SYM(LIB_VERBS, ibv_get_device_guid, get_device_guid),
	GLUE_SYM(LIB_VERBS, ibv_open_device, open_device),
	GLUE_SYM(LIB_VERBS, ibv_close_device, close_device),
	GLUE_SYM(LIB_VERBS, ibv_query_device, query_device),
	GLUE_SYM(LIB_VERBS, ibv_query_port, query_port),
	GLUE_SYM(LIB_VERBS, ibv_get_async_event, get_async_event),
	GLUE_SYM(LIB_VERBS, ibv_ack_async_event, ack_async_event),
	GLUE_SYM(LIB_VERBS, ibv_alloc_pd, alloc_pd),
	GLUE_SYM(LIB_VERBS, ibv_dealloc_pd, dealloc_pd),
	GLUE_SYM(LIB_VERBS, ibv_create_cq, create_cq),
	GLUE_SYM(LIB_VERBS, ibv_destroy_cq, destroy_cq),
	GLUE_SYM(LIB_VERBS, ibv_create_qp, create_qp),
	GLUE_SYM(LIB_VERBS, ibv_destroy_qp, destroy_qp),
	/* The DC data path (mlx5_qpn_hw_dc.cpp). */
	GLUE_SYM(LIB_VERBS, ibv_modify_qp, modify_qp),
	GLUE_SYM(LIB_VERBS, ibv_create_srq, create_srq),
	GLUE_SYM(LIB_VERBS, ibv_destroy_srq, destroy_srq),
	GLUE_SYM(LIB_VERBS, ibv_create_ah, create_ah),
	GLUE_SYM(LIB_VERBS, ibv_destroy_ah, destroy_ah),
	GLUE_SYM(LIB_VERBS, ibv_reg_mr, reg_mr),
	GLUE_SYM(LIB_VERBS, ibv_dereg_mr, dereg_mr),
	GLUE_SYM(LIB_VERBS, _ibv_query_gid_ex, query_gid_ex),
	GLUE_SYM(LIB_VERBS, ibv_fork_init, fork_init),
	/* IBVERBS_1.13, newer than the rest: without it the kernel's copy-on-fork is unknown. */
	GLUE_OPT(LIB_VERBS, ibv_is_fork_initialized, is_fork_initialized),
	GLUE_SYM(LIB_MLX5, mlx5dv_is_supported, dv_is_supported),
	GLUE_SYM(LIB_MLX5, mlx5dv_open_device, dv_open_device),
	GLUE_SYM(LIB_MLX5, mlx5dv_create_qp, dv_create_qp), /* the DC data path */
	GLUE_SYM(LIB_MLX5, mlx5dv_init_obj, dv_init_obj),   /* the DC data path */
	GLUE_SYM(LIB_MLX5, mlx5dv_devx_general_cmd, devx_general_cmd),
	GLUE_SYM(LIB_MLX5, mlx5dv_devx_obj_create, devx_obj_create),
	GLUE_SYM(LIB_MLX5, mlx5dv_devx_obj_destroy, devx_obj_destroy),
	/* rdma-core 34 and later (MLX5_1.18); without them the backend serves QPNs from DEVX
	 * RESERVED_QPN objects or ordinary UD QPs. */
	GLUE_OPT(LIB_MLX5, mlx5dv_reserved_qpn_alloc, reserved_qpn_alloc),
	GLUE_OPT(LIB_MLX5, mlx5dv_reserved_qpn_dealloc, reserved_qpn_dealloc),
	GLUE_SYM(LIB_MLX5, mlx5dv_devx_alloc_uar, devx_alloc_uar),
	GLUE_SYM(LIB_MLX5, mlx5dv_devx_free_uar, devx_free_uar),
};

#undef GLUE_SYM
#undef GLUE_OPT

void
set_err(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
	if (err == nullptr || errlen == 0)
		return;
	snprintf(err, errlen, fmt, a, b);
}

/* dlerror() text, never NULL; it already names the file or the symbol. */
const char *
last_dlerror()
{
	const char *e = dlerror();
	return e != nullptr ? e : "unknown dlopen error";
}

void *
open_lib(const char *libdir, const char *soname, char *err, size_t errlen)
{
	char path[4096];
	const char *what = soname;
	if (libdir != nullptr && libdir[0] != '\0') {
		int n = snprintf(path, sizeof(path), "%s/%s", libdir, soname);
		if (n < 0 || static_cast<size_t>(n) >= sizeof(path)) {
			set_err(err, errlen, "cannot load %s: library directory too long%s", soname,
				"");
			return nullptr;
		}
		what = path;
	}
	void *h = dlopen(what, RTLD_LAZY | RTLD_LOCAL);
	if (h == nullptr)
		set_err(err, errlen, "cannot load %s: %s", soname, last_dlerror());
	return h;
}

/*
 * Resolve the symbols of one library; false (and err set) at the first missing required one.
 * A missing optional one leaves its member NULL.
 */
bool
resolve(struct mlx5_qpn_glue *glue, lib_idx lib, char *err, size_t errlen)
{
	for (const sym_desc &s : kSyms) {
		if (s.lib != lib)
			continue;
		dlerror();
		void *p = dlsym(glue->handle[lib], s.name);
		if (p == nullptr && s.optional)
			continue;
		if (p == nullptr) {
			set_err(err, errlen, "symbol %s missing from %s", s.name, kLibName[lib]);
			return false;
		}
		/* Object pointer to function pointer: copy the bits, as POSIX dlsym intends. */
		memcpy(reinterpret_cast<char *>(glue) + s.offset, &p, sizeof(p));
	}
	return true;
}

void
clear_lib(struct mlx5_qpn_glue *glue, lib_idx lib)
{
	void *null = nullptr;
	for (const sym_desc &s : kSyms)
		if (s.lib == lib)
			memcpy(reinterpret_cast<char *>(glue) + s.offset, &null, sizeof(null));
	if (glue->handle[lib] != nullptr)
		dlclose(glue->handle[lib]);
	glue->handle[lib] = nullptr;
}

/* The process-wide table, its error texts and whether each was logged already. */
struct global_glue {
	std::once_flag once;
	struct mlx5_qpn_glue table;
	bool ok;
	char err[512];
	std::once_flag logged;
};

global_glue g_glue;

/* mlx5_qpn_glue_set_override(): a fake table for tests, returned instead of g_glue.table. */
std::atomic<const struct mlx5_qpn_glue *> g_override{nullptr};

void
global_load()
{
	memset(&g_glue.table, 0, sizeof(g_glue.table));
	const char *libdir = getenv("MLX5_QPN_GLUE_LIBDIR");
	g_glue.ok = mlx5_qpn_glue_load(libdir, &g_glue.table, g_glue.err, sizeof(g_glue.err)) == 0;
}

void
ensure_loaded()
{
	std::call_once(g_glue.once, global_load);
}

} /* namespace */

extern "C" {

int
mlx5_qpn_glue_load(const char *libdir, struct mlx5_qpn_glue *glue, char *err, size_t errlen)
{
	if (err != nullptr && errlen > 0)
		err[0] = '\0';
	if (glue == nullptr)
		return -EINVAL;
	memset(glue, 0, sizeof(*glue));
	/* libibverbs first: libmlx5 depends on it and resolves against the loaded copy. */
	for (lib_idx lib : {LIB_VERBS, LIB_MLX5}) {
		glue->handle[lib] = open_lib(libdir, kLibName[lib], err, errlen);
		if (glue->handle[lib] == nullptr) {
			mlx5_qpn_glue_unload(glue);
			return -ENOENT;
		}
		if (!resolve(glue, lib, err, errlen)) {
			mlx5_qpn_glue_unload(glue);
			return -ENOSYS;
		}
	}
	/* The single-QPN pair is used as a pair: half of it is none of it. */
	if (glue->reserved_qpn_alloc == nullptr || glue->reserved_qpn_dealloc == nullptr) {
		glue->reserved_qpn_alloc = nullptr;
		glue->reserved_qpn_dealloc = nullptr;
	}
	return 0;
}

void
mlx5_qpn_glue_unload(struct mlx5_qpn_glue *glue)
{
	if (glue == nullptr)
		return;
	for (lib_idx lib : {LIB_MLX5, LIB_VERBS})
		clear_lib(glue, lib);
}

void
mlx5_qpn_glue_set_override(const struct mlx5_qpn_glue *glue)
{
	g_override.store(glue, std::memory_order_release);
}

const struct mlx5_qpn_glue *
mlx5_qpn_glue_get_quiet(void)
{
	const struct mlx5_qpn_glue *o = g_override.load(std::memory_order_acquire);
	if (o != nullptr)
		return o;
	ensure_loaded();
	return g_glue.ok ? &g_glue.table : nullptr;
}

const struct mlx5_qpn_glue *
mlx5_qpn_glue_get(void)
{
	const struct mlx5_qpn_glue *g = mlx5_qpn_glue_get_quiet();
	if (g == nullptr)
		std::call_once(g_glue.logged,
			       [] { HW_LOG(ERR, "rdma-core unavailable: %s", g_glue.err); });
	return g;
}

const char *
mlx5_qpn_glue_error(void)
{
	ensure_loaded();
	return g_glue.err;
}

} /* extern "C" */
