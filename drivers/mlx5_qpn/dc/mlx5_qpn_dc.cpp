/* SPDX-License-Identifier: BSD-3-Clause */
/* DC data path: placeholder until the emulated data path lands (every call -EOPNOTSUPP). */
#include <cerrno>

#include "mlx5_qpn_dc.h"

extern "C" {
int mlx5_qpn_cq_create(struct mlx5_qpn_dev *, uint32_t, struct mlx5_qpn_cq **) { return -EOPNOTSUPP; }
void mlx5_qpn_cq_destroy(struct mlx5_qpn_cq *) {}
int mlx5_qpn_cq_poll(struct mlx5_qpn_cq *, struct mlx5_qpn_wc *, unsigned int) { return -EINVAL; }
int mlx5_qpn_dct_create(struct mlx5_qpn_dev *, struct mlx5_qpn_cq *, uint64_t, struct mlx5_qpn_dct **) { return -EOPNOTSUPP; }
uint32_t mlx5_qpn_dct_number(const struct mlx5_qpn_dct *) { return 0; }
void mlx5_qpn_dct_destroy(struct mlx5_qpn_dct *) {}
int mlx5_qpn_dci_create(struct mlx5_qpn_dev *, struct mlx5_qpn_cq *, uint32_t, struct mlx5_qpn_dci **) { return -EOPNOTSUPP; }
uint32_t mlx5_qpn_dci_qpn(const struct mlx5_qpn_dci *) { return 0; }
int mlx5_qpn_dci_post_send(struct mlx5_qpn_dci *, uint32_t, uint64_t, const void *, uint32_t, uint64_t) { return -EOPNOTSUPP; }
void mlx5_qpn_dci_ring(struct mlx5_qpn_dci *) {}
void mlx5_qpn_dci_destroy(struct mlx5_qpn_dci *) {}
int mlx5_qpn_dev_service_run(struct mlx5_qpn_dev *) { return -EOPNOTSUPP; }
}
