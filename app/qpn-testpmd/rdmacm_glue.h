/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qpn-testpmd's own librdmacm loader. The app is never linked against librdmacm (a host without
 * rdma-core still runs the emulated device): librdmacm.so.1 is dlopen()ed on first use and the
 * calls conn_rdmacm.cpp makes are resolved into one table, as the driver does for verbs/mlx5
 * (hw/mlx5_qpn_glue.h). Pointer types come from the real prototypes in <rdma/rdma_cma.h> and
 * <infiniband/verbs.h>, so a prototype change in rdma-core is a compile error here.
 *
 * The two libibverbs calls (the device's name and node GUID of a cm_id, for the device check)
 * are resolved through the librdmacm handle: dlsym() on a handle searches its dependencies, and
 * librdmacm depends on libibverbs.
 *
 * Thread safety: the first call loads the table exactly once; afterwards it is immutable.
 */
#ifndef QPN_TESTPMD_RDMACM_GLUE_H
#define QPN_TESTPMD_RDMACM_GLUE_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

struct rdmacm_glue {
	__typeof__(rdma_create_event_channel) *create_event_channel;
	__typeof__(rdma_destroy_event_channel) *destroy_event_channel;
	__typeof__(rdma_create_id) *create_id;
	__typeof__(rdma_destroy_id) *destroy_id;
	__typeof__(rdma_resolve_addr) *resolve_addr;
	__typeof__(rdma_resolve_route) *resolve_route;
	__typeof__(rdma_connect) *connect;
	__typeof__(rdma_accept) *accept;
	__typeof__(rdma_reject) *reject;
	__typeof__(rdma_disconnect) *disconnect;
	__typeof__(rdma_get_cm_event) *get_cm_event;
	__typeof__(rdma_ack_cm_event) *ack_cm_event;
	__typeof__(rdma_listen) *listen;
	__typeof__(rdma_bind_addr) *bind_addr;
	__typeof__(rdma_establish) *establish;
	/* the connection's resolved AV (the route of the DC sends to the peer) */
	__typeof__(rdma_init_qp_attr) *init_qp_attr;
	/* libibverbs, reached through librdmacm's handle */
	__typeof__(ibv_get_device_guid) *get_device_guid;
	__typeof__(ibv_get_device_name) *get_device_name;
};

/* The process-wide table, or NULL when librdmacm.so.1 or one of its calls is missing; then
 * rdmacm_glue_error() says which, in one line. Loads on first call. */
const rdmacm_glue *rdmacm_glue_get();

/* Why rdmacm_glue_get() fails, or "" when it succeeds. Loads the table if needed. */
const char *rdmacm_glue_error();

#endif /* QPN_TESTPMD_RDMACM_GLUE_H */
