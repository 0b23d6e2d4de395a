/* SPDX-License-Identifier: BSD-3-Clause */
/* librdmacm loaded once by the app itself (rdmacm_glue.h). */
#include "rdmacm_glue.h"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <mutex>

namespace {

struct sym_desc {
	const char *name; /* the exported name (ibv_* macros would rewrite a member call) */
	size_t offset;
};

#define RC_SYM(sym, member)                                                                        \
	{                                                                                          \
#sym, offsetof(rdmacm_glue, member)                                                \
	}

constexpr sym_desc kSyms[] = {
	RC_SYM(rdma_create_event_channel, create_event_channel),
	RC_SYM(rdma_destroy_event_channel, destroy_event_channel),
	RC_SYM(rdma_create_id, create_id),
	RC_SYM(rdma_destroy_id, destroy_id),
	RC_SYM(rdma_resolve_addr, resolve_addr),
	RC_SYM(rdma_resolve_route, resolve_route),
	RC_SYM(rdma_connect, connect),
	RC_SYM(rdma_accept, accept),
	RC_SYM(rdma_reject, reject),
	RC_SYM(rdma_disconnect, disconnect),
	RC_SYM(rdma_get_cm_event, get_cm_event),
	RC_SYM(rdma_ack_cm_event, ack_cm_event),
	RC_SYM(rdma_listen, listen),
	RC_SYM(rdma_bind_addr, bind_addr),
	RC_SYM(rdma_establish, establish),
	RC_SYM(rdma_init_qp_attr, init_qp_attr),
	RC_SYM(ibv_get_device_guid, get_device_guid),
	RC_SYM(ibv_get_device_name, get_device_name),
};

#undef RC_SYM

std::once_flag g_once;
rdmacm_glue g_table;
bool g_ok;
char g_err[512];

void
load()
{
	/* Never unloaded: the table lives as long as the process. */
	void *h = dlopen("librdmacm.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (h == nullptr) {
		const char *e = dlerror();
		snprintf(g_err, sizeof(g_err), "cannot load librdmacm.so.1: %s",
			 e != nullptr ? e : "unknown dlopen error");
		return;
	}
	for (const sym_desc &s : kSyms) {
		void *p = dlsym(h, s.name);
		if (p == nullptr) {
			snprintf(g_err, sizeof(g_err), "symbol %s missing from librdmacm.so.1",
				 s.name);
			memset(&g_table, 0, sizeof(g_table));
			dlclose(h);
			return;
		}
		/* Object pointer to function pointer: copy the bits, as POSIX dlsym intends. */
		memcpy(reinterpret_cast<char *>(&g_table) + s.offset, &p, sizeof(p));
	}
	g_ok = true;
}

} /* namespace */

const rdmacm_glue *
rdmacm_glue_get()
{
	std::call_once(g_once, load);
	return g_ok ? &g_table : nullptr;
}

const char *
rdmacm_glue_error()
{
	std::call_once(g_once, load);
	return g_err;
}
