/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef MLX5_QPN_PRM_WQE_H
#define MLX5_QPN_PRM_WQE_H

/**
 * @file
 * Internal: the mlx5 data-path layouts of the DC path — send WQE segments (control, DC
 * datagram/address vector, inline data), doorbell record slots and the 64-byte CQE (good and
 * error) — as builders and parsers over byte buffers.
 *
 * Facts (PRM; the same layouts are in rdma-core's mlx5dv.h and the kernel's
 * include/linux/mlx5/{qp,device}.h):
 *  - a send WQE is a chain of 16-byte units ("ds") in 64-byte basic blocks (BB);
 *  - control segment, 16 bytes: be32 opmod_idx_opcode (opmod << 24 | wqe_index << 8 | opcode),
 *    be32 qpn_ds (qpn << 8 | ds), u8 signature, u8 rsvd[2], u8 fm_ce_se (0x08: CQ update), be32 imm;
 *  - DC datagram segment = the 48-byte address vector: be64 dc_key at 0, be32 dqp_dct at 8
 *    (DCT number | 0x80000000 "extended AV"), stat_rate_sl 12, fl_mlid 13, be16 rlid 14,
 *    rmac 20, tclass 26, hop_limit 27, be32 grh_gid_fl 28, rgid[16] 32;
 *  - inline data segment: be32 byte_count | 0x80000000, then the bytes, padded to 16;
 *  - send doorbell record: dbrec[1] = be32 of the BB producer counter (low 16 bits);
 *    CQ doorbell record: dbrec[0] = be32 of the consumer index (low 24 bits);
 *  - SRQ receive WQE (linked list): next segment (be16 next_wqe_index at 2), data segment at
 *    16 (byte_count, lkey, addr); a responder CQE may carry a payload of up to 32 bytes in its
 *    first 32 bytes instead (op_own & 0x4, "inline scatter");
 *  - CQE, 64 bytes: be32 flags_rqpn 24 (source QP, low 24 bits), be32 byte_cnt 44,
 *    u8 vendor_err_synd 54 and u8 syndrome 55 (error CQE), be32 sop_drop_qpn 56 (WQE opcode << 24
 *    | QPN on the requester side), be16 wqe_counter 60, u8 signature 62,
 *    u8 op_own 63 (opcode << 4 | owner bit). A CQE is the software's when its opcode is not
 *    "invalid" (0xf) and its owner bit equals (consumer index >> log_depth) & 1.
 *
 * Thread safety: all functions are reentrant; none logs. Big-endian fields are byte exact.
 */

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <rte_byteorder.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLX5_QPN_SEND_WQE_BB        64 /**< Basic block. */
#define MLX5_QPN_SEND_WQE_DS        16 /**< ds unit. */
#define MLX5_QPN_OPCODE_SEND        0x0a
#define MLX5_QPN_WQE_CTRL_CQ_UPDATE 0x08 /**< fm_ce_se: signaled. */
#define MLX5_QPN_CTRL_SEG_SIZE      16
#define MLX5_QPN_DC_AV_SIZE         48 /**< DC datagram segment. */
#define MLX5_QPN_INLINE_HDR_SIZE    4
#define MLX5_QPN_EXTENDED_UD_AV     0x80000000u
#define MLX5_QPN_INLINE_SEG         0x80000000u
#define MLX5_QPN_SND_DBR            1     /**< Send counter slot of a QP dbrec. */
#define MLX5_QPN_CQ_SET_CI          0     /**< Consumer-index slot of a CQ dbrec. */
#define MLX5_QPN_UAR_DB_OFFSET      0x800 /**< Doorbell/BlueFlame register in a UAR page. */

/** Offsets inside the address vector (= DC datagram segment; struct mlx5_wqe_av). */
#define MLX5_QPN_AV_OFF_DC_KEY       0
#define MLX5_QPN_AV_OFF_DQP_DCT      8
#define MLX5_QPN_AV_OFF_STAT_RATE_SL 12
#define MLX5_QPN_AV_OFF_FL_MLID      13
#define MLX5_QPN_AV_OFF_RLID         14
#define MLX5_QPN_AV_OFF_RMAC         20
#define MLX5_QPN_AV_OFF_TCLASS       26
#define MLX5_QPN_AV_OFF_HOP_LIMIT    27
#define MLX5_QPN_AV_OFF_GRH_GID_FL   28
#define MLX5_QPN_AV_OFF_RGID         32
#define MLX5_QPN_AV_GRH              (1u << 30) /**< grh_gid_fl: a GRH is present. */

/** Largest inline payload the DC path accepts, and the WQE it makes (21 ds = 6 BBs). */
#define MLX5_QPN_WQE_MAX_INLINE 256
#define MLX5_QPN_WQE_MAX_BBS    6

#define MLX5_QPN_CQE_SIZE             64
#define MLX5_QPN_CQE_OPCODE_INVALID   0xf
#define MLX5_QPN_CQE_OWNER_MASK       0x1
#define MLX5_QPN_CQE_OFF_FLAGS_RQPN   24
#define MLX5_QPN_CQE_OFF_BYTE_CNT     44
#define MLX5_QPN_CQE_OFF_VENDOR_SYND  54
#define MLX5_QPN_CQE_OFF_SYNDROME     55
#define MLX5_QPN_CQE_OFF_SOP_DROP_QPN 56
#define MLX5_QPN_CQE_OFF_WQE_COUNTER  60
#define MLX5_QPN_CQE_OFF_SIGNATURE    62
#define MLX5_QPN_CQE_OFF_OP_OWN       63

/** op_own bit of a responder CQE whose payload (at most 32 bytes) was scattered into the CQE's
 * first 32 bytes instead of the receive buffer (rdma-core MLX5_INLINE_SCATTER_32). */
#define MLX5_QPN_CQE_INLINE_SCATTER_32  0x4
#define MLX5_QPN_CQE_INLINE_SCATTER_MAX 32

/** A receive WQE of a linked-list SRQ (struct mlx5_wqe_srq_next_seg, then one struct
 * mlx5_wqe_data_seg): be16 next_wqe_index at 2 (the list the device follows), u8 signature at
 * 4; the data segment at 16: be32 byte_count, be32 lkey at 20, be64 addr at 24. The SRQ's
 * doorbell record [0] holds the count of posted WQEs (be32, low 16 bits). */
#define MLX5_QPN_SRQ_OFF_NEXT       2
#define MLX5_QPN_SRQ_OFF_DSEG       16
#define MLX5_QPN_SRQ_WQE_MIN_STRIDE 32
#define MLX5_QPN_SRQ_DBR            0

/** CQE opcodes (op_own >> 4). */
#define MLX5_QPN_PRM_CQE_REQ       0x0
#define MLX5_QPN_PRM_CQE_RESP_SEND 0x2
#define MLX5_QPN_PRM_CQE_REQ_ERR   0xd
#define MLX5_QPN_PRM_CQE_RESP_ERR  0xe

/** Error CQE syndromes (PRM; rdma-core MLX5_CQE_SYNDROME_*). LOCAL_PROT_ERR: a data segment
 * naming memory not registered for it (its key or its range). */
#define MLX5_QPN_SYND_LOCAL_LENGTH_ERR        0x01
#define MLX5_QPN_SYND_LOCAL_QP_OP_ERR         0x02
#define MLX5_QPN_SYND_LOCAL_PROT_ERR          0x04
#define MLX5_QPN_SYND_WR_FLUSH_ERR            0x05
#define MLX5_QPN_SYND_REMOTE_INV_REQ_ERR      0x12
#define MLX5_QPN_SYND_REMOTE_ACCESS_ERR       0x13
#define MLX5_QPN_SYND_REMOTE_OP_ERR           0x14
#define MLX5_QPN_SYND_TRANSPORT_RETRY_EXC_ERR 0x15

static inline void
mlx5_qpn_put_be32(uint8_t *p, uint32_t v)
{
	rte_be32_t b = rte_cpu_to_be_32(v);
	memcpy(p, &b, sizeof(b));
}

static inline void
mlx5_qpn_put_be16(uint8_t *p, uint16_t v)
{
	rte_be16_t b = rte_cpu_to_be_16(v);
	memcpy(p, &b, sizeof(b));
}

static inline void
mlx5_qpn_put_be64(uint8_t *p, uint64_t v)
{
	rte_be64_t b = rte_cpu_to_be_64(v);
	memcpy(p, &b, sizeof(b));
}

static inline uint32_t
mlx5_qpn_get_be32(const uint8_t *p)
{
	rte_be32_t b;
	memcpy(&b, p, sizeof(b));
	return rte_be_to_cpu_32(b);
}

static inline uint16_t
mlx5_qpn_get_be16(const uint8_t *p)
{
	rte_be16_t b;
	memcpy(&b, p, sizeof(b));
	return rte_be_to_cpu_16(b);
}

static inline uint64_t
mlx5_qpn_get_be64(const uint8_t *p)
{
	rte_be64_t b;
	memcpy(&b, p, sizeof(b));
	return rte_be_to_cpu_64(b);
}

/** Write a whole SRQ receive WQE: next index, one data segment of len bytes at addr. */
static inline void
mlx5_qpn_srq_wqe_build(uint8_t *wqe, uint16_t next, uint32_t len, uint32_t lkey, uint64_t addr)
{
	memset(wqe, 0, MLX5_QPN_SRQ_WQE_MIN_STRIDE);
	mlx5_qpn_put_be16(wqe + MLX5_QPN_SRQ_OFF_NEXT, next);
	mlx5_qpn_put_be32(wqe + MLX5_QPN_SRQ_OFF_DSEG, len);
	mlx5_qpn_put_be32(wqe + MLX5_QPN_SRQ_OFF_DSEG + 4, lkey);
	mlx5_qpn_put_be64(wqe + MLX5_QPN_SRQ_OFF_DSEG + 8, addr);
}

/** ds count of a DC SEND with len inline bytes (ctrl + AV + inline header + data, in 16s). */
static inline uint32_t
mlx5_qpn_wqe_dc_send_ds(uint32_t len)
{
	return (MLX5_QPN_CTRL_SEG_SIZE + MLX5_QPN_DC_AV_SIZE + MLX5_QPN_INLINE_HDR_SIZE + len +
		MLX5_QPN_SEND_WQE_DS - 1) /
	       MLX5_QPN_SEND_WQE_DS;
}

/** Basic blocks a WQE of ds units occupies. */
static inline uint32_t
mlx5_qpn_wqe_bbs(uint32_t ds)
{
	return (ds * MLX5_QPN_SEND_WQE_DS + MLX5_QPN_SEND_WQE_BB - 1) / MLX5_QPN_SEND_WQE_BB;
}

/**
 * Build an address vector in software, as rdma-core's mlx5 create_ah fills struct mlx5_wqe_av
 * for InfiniBand (static rate 0, no source path bits, no MAC): rlid, sl and, when is_global,
 * the GRH (flow label | GRH bit | sgid_index << 20, traffic class, hop limit, rgid).
 * The DC key and the DCT number are left 0 (the WQE builder writes them).
 */
static inline void
mlx5_qpn_av_build(uint8_t *av, uint16_t dlid, uint8_t sl, int is_global, uint8_t sgid_index,
		  const uint8_t *dgid, uint8_t hop_limit, uint8_t tclass, uint32_t flow_label)
{
	memset(av, 0, MLX5_QPN_DC_AV_SIZE);
	av[MLX5_QPN_AV_OFF_STAT_RATE_SL] = sl & 0xf;
	mlx5_qpn_put_be16(av + MLX5_QPN_AV_OFF_RLID, dlid);
	if (!is_global)
		return;
	av[MLX5_QPN_AV_OFF_TCLASS] = tclass;
	av[MLX5_QPN_AV_OFF_HOP_LIMIT] = hop_limit;
	mlx5_qpn_put_be32(av + MLX5_QPN_AV_OFF_GRH_GID_FL,
			  (flow_label & 0xfffff) | MLX5_QPN_AV_GRH | ((uint32_t)sgid_index << 20));
	memcpy(av + MLX5_QPN_AV_OFF_RGID, dgid, 16);
}

/**
 * Build a DC SEND WQE with inline data into wqe (at least ds * 16 bytes; the bytes up to the
 * next 16 are zeroed, the rest untouched). The datagram segment is the address vector av
 * (MLX5_QPN_DC_AV_SIZE bytes: its route) with the DC key and the DCT number written over it,
 * as rdma-core's mlx5 provider sets a DC WQE's AV; av NULL is a zero route.
 * @return the ds count (> 0); -EINVAL for len > MLX5_QPN_WQE_MAX_INLINE, a NULL buffer with
 *         len > 0, a QPN or DCT number above 24 bits.
 */
static inline int
mlx5_qpn_wqe_build_dc_send_av(uint8_t *wqe, uint16_t wqe_index, uint32_t qpn, const uint8_t *av,
			      uint32_t dctn, uint64_t dc_key, const void *buf, uint32_t len,
			      uint8_t fm_ce_se)
{
	uint32_t ds;

	if (wqe == nullptr || len > MLX5_QPN_WQE_MAX_INLINE || (buf == nullptr && len > 0) ||
	    qpn > 0xffffff || dctn > 0xffffff)
		return -EINVAL;
	ds = mlx5_qpn_wqe_dc_send_ds(len);
	memset(wqe, 0, ds * MLX5_QPN_SEND_WQE_DS);
	/* Control segment. */
	mlx5_qpn_put_be32(wqe + 0, ((uint32_t)wqe_index << 8) | MLX5_QPN_OPCODE_SEND);
	mlx5_qpn_put_be32(wqe + 4, (qpn << 8) | ds);
	wqe[11] = fm_ce_se;
	/* DC datagram segment: the address vector (the route), the DC key and the target. */
	if (av != nullptr)
		memcpy(wqe + 16, av, MLX5_QPN_DC_AV_SIZE);
	mlx5_qpn_put_be64(wqe + 16 + MLX5_QPN_AV_OFF_DC_KEY, dc_key);
	mlx5_qpn_put_be32(wqe + 16 + MLX5_QPN_AV_OFF_DQP_DCT, dctn | MLX5_QPN_EXTENDED_UD_AV);
	/* Inline data segment. */
	mlx5_qpn_put_be32(wqe + 64, len | MLX5_QPN_INLINE_SEG);
	if (len)
		memcpy(wqe + 68, buf, len);
	return (int)ds;
}

/** mlx5_qpn_wqe_build_dc_send_av() with a zero route (no address vector). */
static inline int
mlx5_qpn_wqe_build_dc_send(uint8_t *wqe, uint16_t wqe_index, uint32_t qpn, uint32_t dctn,
			   uint64_t dc_key, const void *buf, uint32_t len, uint8_t fm_ce_se)
{
	return mlx5_qpn_wqe_build_dc_send_av(wqe, wqe_index, qpn, nullptr, dctn, dc_key, buf, len,
					     fm_ce_se);
}

/** A send WQE as the device reads it. */
struct mlx5_qpn_wqe_fields {
	uint8_t opcode;
	uint8_t opmod;
	uint16_t wqe_index;
	uint32_t qpn;
	uint8_t ds;
	uint8_t fm_ce_se;
	uint32_t imm;
	uint64_t dc_key;
	uint32_t dqp_dct;    /**< Raw, with the extended-AV bit. */
	uint32_t inl_hdr;    /**< Raw inline header, with the inline bit. */
	const uint8_t *data; /**< The inline bytes (inside the given buffer). */
};

/** Parse the control segment only (the first 16 bytes). */
static inline void
mlx5_qpn_wqe_parse_ctrl(const uint8_t *wqe, struct mlx5_qpn_wqe_fields *f)
{
	uint32_t w0 = mlx5_qpn_get_be32(wqe), w1 = mlx5_qpn_get_be32(wqe + 4);

	memset(f, 0, sizeof(*f));
	f->opmod = (uint8_t)(w0 >> 24);
	f->wqe_index = (uint16_t)(w0 >> 8);
	f->opcode = (uint8_t)w0;
	f->qpn = w1 >> 8;
	f->ds = (uint8_t)(w1 & 0x3f);
	f->fm_ce_se = wqe[11];
	f->imm = mlx5_qpn_get_be32(wqe + 12);
}

/**
 * Parse a DC SEND WQE of `avail` bytes (>= the ctrl's ds * 16 when the WQE is complete).
 * @return 0; or the error syndrome the device completes the WQE with:
 *         LOCAL_QP_OP_ERR for a bad opcode, a too-short WQE, a missing extended AV or a
 *         non-inline data segment; LOCAL_LENGTH_ERR for inline data longer than the WQE or
 *         than MLX5_QPN_WQE_MAX_INLINE.
 */
static inline int
mlx5_qpn_wqe_parse_dc_send(const uint8_t *wqe, size_t avail, struct mlx5_qpn_wqe_fields *f)
{
	uint32_t len;

	if (avail < MLX5_QPN_CTRL_SEG_SIZE)
		return MLX5_QPN_SYND_LOCAL_QP_OP_ERR;
	mlx5_qpn_wqe_parse_ctrl(wqe, f);
	if (f->opcode != MLX5_QPN_OPCODE_SEND || f->opmod != 0)
		return MLX5_QPN_SYND_LOCAL_QP_OP_ERR;
	if (f->ds < mlx5_qpn_wqe_dc_send_ds(0) || (size_t)f->ds * MLX5_QPN_SEND_WQE_DS > avail)
		return MLX5_QPN_SYND_LOCAL_QP_OP_ERR;
	f->dc_key = mlx5_qpn_get_be64(wqe + 16);
	f->dqp_dct = mlx5_qpn_get_be32(wqe + 24);
	f->inl_hdr = mlx5_qpn_get_be32(wqe + 64);
	f->data = wqe + 68;
	if (!(f->dqp_dct & MLX5_QPN_EXTENDED_UD_AV) || !(f->inl_hdr & MLX5_QPN_INLINE_SEG))
		return MLX5_QPN_SYND_LOCAL_QP_OP_ERR;
	len = f->inl_hdr & ~MLX5_QPN_INLINE_SEG;
	if (len > MLX5_QPN_WQE_MAX_INLINE || 68 + len > (uint32_t)f->ds * MLX5_QPN_SEND_WQE_DS)
		return MLX5_QPN_SYND_LOCAL_LENGTH_ERR;
	return 0;
}

/** A CQE's fields (good or error). */
struct mlx5_qpn_cqe_fields {
	uint8_t opcode;      /**< op_own >> 4. */
	uint8_t owner;       /**< op_own & 1. */
	uint8_t syndrome;    /**< Error CQE only. */
	uint8_t vendor_synd; /**< Error CQE only. */
	uint8_t wqe_opcode;  /**< sop_drop_qpn >> 24 (requester). */
	uint16_t wqe_counter;
	uint32_t qpn;     /**< sop_drop_qpn & 0xffffff. */
	uint32_t src_qpn; /**< flags_rqpn & 0xffffff (responder). */
	uint32_t byte_cnt;
};

/**
 * Write every field of a CQE except op_own (the writer publishes op_own last, with release
 * order, so that a poller that sees the new owner bit sees the rest).
 * @return the op_own byte to publish.
 */
static inline uint8_t
mlx5_qpn_cqe_fill(uint8_t *cqe, const struct mlx5_qpn_cqe_fields *f)
{
	memset(cqe, 0, MLX5_QPN_CQE_OFF_OP_OWN);
	mlx5_qpn_put_be32(cqe + MLX5_QPN_CQE_OFF_FLAGS_RQPN, f->src_qpn & 0xffffff);
	mlx5_qpn_put_be32(cqe + MLX5_QPN_CQE_OFF_BYTE_CNT, f->byte_cnt);
	cqe[MLX5_QPN_CQE_OFF_VENDOR_SYND] = f->vendor_synd;
	cqe[MLX5_QPN_CQE_OFF_SYNDROME] = f->syndrome;
	mlx5_qpn_put_be32(cqe + MLX5_QPN_CQE_OFF_SOP_DROP_QPN,
			  ((uint32_t)f->wqe_opcode << 24) | (f->qpn & 0xffffff));
	mlx5_qpn_put_be16(cqe + MLX5_QPN_CQE_OFF_WQE_COUNTER, f->wqe_counter);
	return (uint8_t)((f->opcode << 4) | (f->owner & MLX5_QPN_CQE_OWNER_MASK));
}

/** Decode a CQE (op_own given separately: the caller loads it with acquire order first). */
static inline void
mlx5_qpn_cqe_parse(const uint8_t *cqe, uint8_t op_own, struct mlx5_qpn_cqe_fields *f)
{
	uint32_t sdq = mlx5_qpn_get_be32(cqe + MLX5_QPN_CQE_OFF_SOP_DROP_QPN);
	int err;

	f->opcode = op_own >> 4;
	f->owner = op_own & MLX5_QPN_CQE_OWNER_MASK;
	err = static_cast<int>(f->opcode == MLX5_QPN_PRM_CQE_REQ_ERR ||
			       f->opcode == MLX5_QPN_PRM_CQE_RESP_ERR);
	f->syndrome = err ? cqe[MLX5_QPN_CQE_OFF_SYNDROME] : 0;
	f->vendor_synd = err ? cqe[MLX5_QPN_CQE_OFF_VENDOR_SYND] : 0;
	f->wqe_opcode = (uint8_t)(sdq >> 24);
	f->qpn = sdq & 0xffffff;
	f->wqe_counter = mlx5_qpn_get_be16(cqe + MLX5_QPN_CQE_OFF_WQE_COUNTER);
	f->src_qpn = mlx5_qpn_get_be32(cqe + MLX5_QPN_CQE_OFF_FLAGS_RQPN) & 0xffffff;
	f->byte_cnt = mlx5_qpn_get_be32(cqe + MLX5_QPN_CQE_OFF_BYTE_CNT);
}

/** 1 if the CQE with this op_own at consumer index ci of a 2^log_depth ring is valid. */
static inline int
mlx5_qpn_cqe_is_sw_owned(uint8_t op_own, uint32_t ci, uint32_t log_depth)
{
	return static_cast<int>((op_own >> 4) != MLX5_QPN_CQE_OPCODE_INVALID &&
				(op_own & MLX5_QPN_CQE_OWNER_MASK) == ((ci >> log_depth) & 1));
}

#ifdef __cplusplus
}
#endif

#endif /* MLX5_QPN_PRM_WQE_H */
