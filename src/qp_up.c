// SPDX-License-Identifier: MIT
/*
 * Bringing a QP from RESET to RTS, the verbs way: INIT (the port; on UD
 * also P_Key index 0 and the Q_Key), RTR, RTS (on UD a send PSN). UD QPs
 * take this path when a context is created (providers create them in
 * RESET, as verbs does); raw-packet and UD QPs both take it when
 * qp_recover.c brings a failed QP back.
 *
 * Port 0 asks for the context's own port: verbs fills it in (the device
 * name may say "mlx4_0:2"), emu has only port 1. Every send queue's UD QP
 * gets the same Q_Key, the one qps_ud_local hands out: a receiver checks a
 * WR's key against its own QP's, and a WR may ask for "the sending QP's
 * key" (remote_qkey bit 31).
 */
#define _GNU_SOURCE	/* strerrordesc_np: strerror is not thread safe */
#include <string.h>

#include "sq.h"

/* UD carries no sequence: any start value does. */
#define QPS_UD_SQ_PSN 0

static int qps_qp_to(struct qps_ctx *ctx, struct qps_qp *qp,
		     struct ibv_qp_attr *a, int mask, const char *step)
{
	int ret = ctx->ops->modify_qp(qp, a, IBV_QP_STATE | mask);

	if (ret < 0)
		qps_log_err("QP %u on %s: %s failed: %s", qp->qp_num,
			    ctx->provider, step, strerrordesc_np(-ret));
	return ret;
}

int qps_qp_up(struct qps_ctx *ctx, struct qps_qp *qp)
{
	bool ud = qp->qp_type == IBV_QPT_UD;
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.qkey = QPS_UD_QKEY;
	ret = qps_qp_to(ctx, qp, &a, IBV_QP_PORT |
			(ud ? IBV_QP_PKEY_INDEX | IBV_QP_QKEY : 0),
			"RESET -> INIT");
	if (ret < 0)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	ret = qps_qp_to(ctx, qp, &a, 0, "INIT -> RTR");
	if (ret < 0)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = QPS_UD_SQ_PSN;
	return qps_qp_to(ctx, qp, &a, ud ? IBV_QP_SQ_PSN : 0, "RTR -> RTS");
}
