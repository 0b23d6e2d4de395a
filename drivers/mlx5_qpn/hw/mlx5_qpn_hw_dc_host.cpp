/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a host allows of DC, read before the first DC object so that a refusal is one line
 * naming its cause rather than "mlx5dv_create_qp failed" (see mlx5_qpn_hw_priv.h):
 *  - the device's DC transport: cmd_hca_cap.dct (clear: the kernel's check_qp_type refuses
 *    every IBV_QPT_DRIVER QP with EOPNOTSUPP);
 *  - a RoCE bond: while RoCE LAG is active the kernel's create_dct refuses a DCT with
 *    EOPNOTSUPP unless cmd_hca_cap.lag_dct is set; LAG is read with QUERY_LAG (lag_state), as
 *    UCX reads it;
 *  - CQ errors: a ConnectX that overruns a CQ raises IBV_EVENT_CQ_ERR on the context and
 *    completes nothing more on that CQ; the context's events are read without waiting where
 *    the DC layer asks (the cq_check op).
 */
#include <cerrno>
#include <cstring>
#include <fcntl.h>

#include <mutex>

#include "mlx5_qpn_glue.h"
#include "mlx5_qpn_hw_dc_path.h"
#include "mlx5_qpn_hw_log.h"
#include "mlx5_qpn_hw_priv.h"
#include "mlx5_qpn_hw_sizing.h"
#include "mlx5_qpn_prm.h"

namespace mlx5_qpn_hw {

namespace {

const char *
tri(int v)
{
	return v < 0 ? "unknown" : v > 0 ? "yes" : "no";
}

/* QUERY_LAG's lag_state, or -1 when the command is refused (an older firmware or kernel). */
int
query_lag(mlx5_qpn_hw_dev *dev)
{
	uint32_t in[MLX5_QPN_HW_QUERY_LAG_LEN / 4] = {};
	uint32_t out[MLX5_QPN_HW_QUERY_LAG_LEN / 4] = {};
	mlx5_qpn_prm::set(reinterpret_cast<uint8_t *>(in), mlx5_qpn_prm::in_opcode,
			  MLX5_QPN_HW_CMD_OP_QUERY_LAG);
	errno = 0;
	if (dev->glue->devx_general_cmd(dev->ctx, in, sizeof(in), out, sizeof(out)) != 0) {
		HW_LOG(DEBUG, "%s: QUERY_LAG refused (%s): RoCE LAG unknown", dev->name,
		       strerror(errno != 0 ? errno : EIO));
		return -1;
	}
	return mlx5_qpn_hw_lag_state(out, sizeof(out));
}

} /* namespace */

void
read_dc_host(mlx5_qpn_hw_dev *dev, const void *caps_out, size_t outlen)
{
	const int dct = mlx5_qpn_hw_caps_dct(caps_out, outlen);
	const int lag_dct = mlx5_qpn_hw_caps_lag_dct(caps_out, outlen);
	dev->dc_cap = int8_t(dct);
	dev->lag_dct = int8_t(lag_dct);
	dev->lag_state = int8_t(query_lag(dev));
}

int
dc_host_check(mlx5_qpn_hw_dev *dev, bool dct, const char *what)
{
	if (dev->dc_cap == 0) {
		HW_LOG(ERR,
		       "%s: %s: the device has no DC transport (cmd_hca_cap.dct clear): the kernel "
		       "makes no DCI or DCT on it",
		       dev->name, what);
		return -EOPNOTSUPP;
	}
	if (dct && dev->lag_state > 0 && dev->lag_dct == 0) {
		HW_LOG(ERR,
		       "%s: %s: RoCE LAG is active (the ports are bonded) and the firmware's "
		       "lag_dct cap is clear: the kernel makes no DCT on a bond; use a port "
		       "outside the bond or a firmware with lag_dct",
		       dev->name, what);
		return -EOPNOTSUPP;
	}
	return 0;
}

void
dc_host_refused(const mlx5_qpn_hw_dev *dev, bool dct, int rc)
{
	if (rc != -EOPNOTSUPP)
		return;
	HW_LOG(ERR,
	       "%s: %s: the kernel refused DC (EOPNOTSUPP): the device has no DC transport "
	       "(cmd_hca_cap.dct)%s (dct cap %s, RoCE LAG %s, lag_dct %s)",
	       dev->name, dct ? "DCT" : "DCI",
	       dct ? ", or its ports are a RoCE bond without the lag_dct cap" : "",
	       tri(dev->dc_cap), tri(dev->lag_state), tri(dev->lag_dct));
}

void
log_dc_host(mlx5_qpn_hw_dev *dev)
{
	struct ibv_port_attr pa;
	const char *link = "unknown";
	const char *grh = "unknown";
	if (dc_port_query(dev, dev->port, "probe", &pa) == 0) {
		link = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand";
		grh = (pa.flags & IBV_QPF_GRH_REQUIRED) != 0 ? "yes" : "no";
	}
	HW_LOG(INFO,
	       "%s: DC host: dct cap %s, RoCE LAG %s (lag_dct %s), port %u %s, grh_required %s",
	       dev->name, tri(dev->dc_cap),
	       dev->lag_state < 0 ? "unknown" :
	       dev->lag_state > 0 ? "active" :
				    "inactive",
	       tri(dev->lag_dct), dev->port, link, grh);
}

void
dc_async_nonblock(mlx5_qpn_hw_dev *dev)
{
	const int fd = dev->ctx->async_fd;
	if (fd < 0)
		return; /* no file behind the context's events (a test's fake) */
	const int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
		HW_LOG(WARNING, "%s: async events stay blocking (%s): CQ errors go unseen",
		       dev->name, strerror(errno));
}

int
dc_cq_check(mlx5_qpn_hw_dev *dev, struct ibv_cq *cq)
{
	std::lock_guard<std::mutex> g(dev->dc_lock);
	const int fd = dev->ctx->async_fd;
	if (fd >= 0 && (fcntl(fd, F_GETFL) & O_NONBLOCK) == 0)
		return 0; /* reading would wait for an event: nothing known */
	struct ibv_async_event ev;
	while (dev->glue->get_async_event(dev->ctx, &ev) == 0) {
		if (ev.event_type == IBV_EVENT_CQ_ERR) {
			HW_LOG(ERR,
			       "%s: DC: CQ error on a completion queue (an overrun: the device "
			       "completes nothing more on it); its DCIs fail with -EIO",
			       dev->name);
			if (dev->nb_cq_err < sizeof(dev->cq_err) / sizeof(dev->cq_err[0]))
				dev->cq_err[dev->nb_cq_err++] = ev.element.cq;
		} else {
			HW_LOG(INFO, "%s: async event %d", dev->name, int(ev.event_type));
		}
		dev->glue->ack_async_event(&ev);
	}
	for (unsigned int i = 0; i < dev->nb_cq_err; i++)
		if (dev->cq_err[i] == cq)
			return -EIO;
	return 0;
}

} /* namespace mlx5_qpn_hw */
