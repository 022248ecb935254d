// SPDX-License-Identifier: MIT
/*
 * Delivery of RoCE v2 datagrams to UD QPs, in the sending process under
 * the receiving port's rx_lock, ahead of the steering table (a ConnectX
 * with RoCE v2 traps UDP port 4791 the same way).
 *
 * Checks, in the order the drop counters are charged: frame structure
 * (rx_roce_bad), ICRC (rx_icrc_bad), BTH opcode / version / P_Key
 * (rx_bth_bad), destination QPN (rx_qpn_bad; 0xffffff goes to every QP
 * attached to the destination group, rx_mcg_none when none is), Q_Key
 * (rx_qkey_bad), QP state RTR or RTS (rx_qp_state). A datagram that
 * passes lands as ConnectX places it: a 40-byte GRH (for RoCE v2 over
 * IPv4, 20 zero bytes then the IPv4 header) followed by the payload.
 */
#include "emu.h"

#include <arpa/inet.h>
#include <string.h>

/* One UD QP, by its RQ slot: Q_Key, state, then the buffer. */
static void deliver_one(struct qps_emu_shm_port *sp, uint8_t *qarea,
			uint8_t *pool, int slot, const struct qps_emu_roce *r,
			const uint8_t grh[QPS_EMU_GRH_LEN],
			struct qps_emu_rx_result *res)
{
	struct qps_emu_shm_rq *srq = qps_emu_rq_checked(sp, slot);
	struct qps_emu_piece pc[2] = {
		{ .p = grh, .len = QPS_EMU_GRH_LEN },
		{ .p = r->payload, .len = r->payload_len },
	};
	struct qps_emu_cqe_info ci = {
		.opcode = r->opcode == QPS_EMU_BTH_UD_SEND_IMM ?
			  QPS_EMU_RECV_OPCODE_SEND_IMM :
			  QPS_EMU_RECV_OPCODE_SEND,
		.grh = true,
		.src_qp = r->sqpn,
		.imm = r->imm,
	};

	if (!srq) {
		qps_emu_count(&sp->st.rx_corrupt, 1);
		qps_emu_count(&sp->st.rx_drops, 1);
		return;
	}
	if (srq->qp_type != IBV_QPT_UD) {
		/* A group entry naming a raw QP: scribbled on. */
		qps_emu_count(&sp->st.rx_qpn_bad, 1);
		qps_emu_count(&sp->st.rx_drops, 1);
		return;
	}
	if (srq->qkey != r->qkey) {
		qps_emu_count(&sp->st.rx_qkey_bad, 1);
		qps_emu_count(&sp->st.rx_drops, 1);
		return;
	}
	/* State, buffer, CQ room and the copy: as for steered frames. */
	qps_emu_rq_deliver(sp, qarea, pool, slot, pc, 2, &ci, res);
}

/* The UD QP with number @qpn on this port, as its RQ slot, or -1. */
static int ud_slot(const struct qps_emu_shm_port *sp, uint32_t qpn)
{
	unsigned int i;

	for (i = 0; i < QPS_EMU_MAX_RQ; i++) {
		const struct qps_emu_shm_rq *srq = &sp->rq[i];

		if (srq->state == QPS_EMU_SLOT_ACTIVE && srq->qpn == qpn &&
		    srq->qp_type == IBV_QPT_UD)
			return (int)i;
	}
	return -1;
}

static bool drop(struct qps_emu_shm_port *sp, uint64_t *why)
{
	qps_emu_count(why, 1);
	qps_emu_count(&sp->st.rx_drops, 1);
	return true;
}

bool qps_emu_ud_rx(struct qps_emu_shm_port *sp, uint8_t *qarea,
		   uint8_t *pool, const uint8_t *frame, uint32_t len,
		   struct qps_emu_rx_result *res)
{
	struct qps_emu_shm_stats *st = &sp->st;
	uint8_t grh[QPS_EMU_GRH_LEN];
	struct qps_emu_roce r;
	unsigned int i;

	switch (qps_emu_roce_parse(frame, len, sp->addr, &r)) {
	case QPS_EMU_ROCE_NOT:
		return false;
	case QPS_EMU_ROCE_BAD:
		qps_emu_count(&st->rx_roce, 1);
		return drop(sp, &st->rx_roce_bad);
	case QPS_EMU_ROCE_ICRC:
		qps_emu_count(&st->rx_roce, 1);
		return drop(sp, &st->rx_icrc_bad);
	case QPS_EMU_ROCE_BTH:
		qps_emu_count(&st->rx_roce, 1);
		return drop(sp, &st->rx_bth_bad);
	case QPS_EMU_ROCE_OK:
		break;
	}
	qps_emu_count(&st->rx_roce, 1);
	memset(grh, 0, 20);
	memcpy(grh + 20, r.ip, 20);
	if ((ntohl(r.dip) >> 28) != 0xe) {
		int slot = r.dqpn == QPS_EMU_MC_QPN ? -1 : ud_slot(sp, r.dqpn);
		if (slot < 0)
			return drop(sp, &st->rx_qpn_bad);
		deliver_one(sp, qarea, pool, slot, &r, grh, res);
		return true;
	}
	if (r.dqpn != QPS_EMU_MC_QPN)
		return drop(sp, &st->rx_qpn_bad);
	for (i = 0; i < QPS_EMU_MAX_MCG; i++) {
		uint32_t rqs = sp->mcg[i].rqs, bit;

		if (!rqs || sp->mcg[i].group != r.dip)
			continue;
		/* One copy per attached QP (an entry per group). */
		for (bit = 0; bit < QPS_EMU_MAX_RQ; bit++)
			if (rqs & (1u << bit))
				deliver_one(sp, qarea, pool, (int)bit, &r, grh,
					    res);
		return true;
	}
	return drop(sp, &st->rx_mcg_none);
}
