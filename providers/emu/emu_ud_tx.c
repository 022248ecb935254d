// SPDX-License-Identifier: MIT
/*
 * The send engine's UD part: a UD WQE (ctrl + datagram segment + data)
 * becomes a RoCE v2 frame, as a ConnectX-3 Pro sends it with RoCE v2
 * enabled. Everything comes from the WQE copy the engine took (the core
 * may have written the ring itself) and is checked: the address vector
 * must name GID index 1 and an IPv4-mapped GID, like the AHs create_ah
 * makes.
 */
#include "emu.h"

#include <arpa/inet.h>
#include <string.h>

/* The UDP source port: 0xc000 | 14 bits of flow entropy. The AH's flow
 * label when it has one, else a hash of the two QPNs, so one QP pair
 * keeps one port (one ECMP path) and different pairs spread. */
static uint16_t udp_sport(uint32_t flow_label, uint32_t sqpn, uint32_t dqpn)
{
	uint32_t fl = flow_label & 0xfffff;

	if (!fl) {
		uint32_t h = (sqpn * 0x9e3779b1u) ^ (dqpn * 0x85ebca6bu);

		h ^= h >> 15;
		fl = h & 0xfffff;
	}
	return (uint16_t)(0xc000 | ((fl & 0x3fff) ^ (fl >> 14)));
}

uint8_t qps_emu_ud_frame(struct qps_emu_qp *qp, const uint8_t *w,
			 uint32_t hdr, uint32_t *len)
{
	struct qps_emu_dev *dev = qps_emu_dev(qp->base.dev);
	const struct mlx4_wqe_ctrl_seg *ctrl = (const void *)w;
	struct mlx4_wqe_datagram_seg dg;
	struct qps_emu_roce r;
	uint32_t payload = *len - hdr, tcfl, qkey, op;
	static const uint8_t v4_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					       0xff, 0xff };

	memcpy(&dg, w + sizeof(*ctrl), sizeof(dg));
	if (dg.av.gid_index != QPS_GID_ROCE_V2_IPV4 ||
	    memcmp(dg.av.dgid, v4_prefix, sizeof(v4_prefix)) != 0) {
		qps_emu_count(&qp->st.malformed, 1);
		return MLX4_CQE_SYNDROME_LOCAL_QP_OP_ERR;
	}
	if (payload > qps_emu_ib_mtu(dev->mtu))
		return MLX4_CQE_SYNDROME_LOCAL_LENGTH_ERR;
	memset(&r, 0, sizeof(r));
	memcpy(r.dmac, dg.mac, 6);
	qps_emu_port_mac(dev->port, r.smac);
	r.sip = dev->sp->addr;
	memcpy(&r.dip, dg.av.dgid + 12, 4);
	tcfl = be32toh(dg.av.sl_tclass_flowlabel);
	r.tos = (uint8_t)(tcfl >> 20);
	r.ttl = dg.av.hop_limit;
	r.dqpn = be32toh(dg.dqpn) & 0xffffff;
	r.sqpn = qp->base.qp_num;
	r.sport = udp_sport(tcfl, r.sqpn, r.dqpn);
	op = be32toh(ctrl->owner_opcode) & 0x1f;
	r.opcode = op == MLX4_OPCODE_SEND_IMM ? QPS_EMU_BTH_UD_SEND_IMM :
						QPS_EMU_BTH_UD_SEND;
	r.se = be32toh(ctrl->srcrb_flags) & MLX4_WQE_CTRL_SOLICIT;
	r.pkey = QPS_EMU_PKEY_DEFAULT;
	/* IB: a Q_Key with the high bit set means the QP's own. */
	qkey = be32toh(dg.qkey);
	r.qkey = (qkey & QPS_EMU_QKEY_OWN) ? qp->qkey : qkey;
	r.imm = ctrl->imm;
	r.psn = qp->psn;
	qp->psn = (qp->psn + 1) & 0xffffff;
	*len = qps_emu_roce_build(qp->frame, &r, payload);
	return 0;
}
