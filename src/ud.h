/* SPDX-License-Identifier: MIT */
/*
 * The UD transport (QPS_TRANSPORT_UD), core side, one job per file:
 *
 *  ud_frame.c  qpsock's 12-byte UD header (build, parse) and the 40-byte
 *              GRH a UD receive buffer starts with (RoCE v2: 20 bytes, then
 *              the IPv4 header; IB and RoCE v1: an IPv6 GRH whose GIDs are
 *              IPv4-mapped). Pure functions, no context.
 *  ud_addr.c   the peer table (IPv4 -> QPN, Q_Key: set or learned) and the
 *              address-handle cache (IPv4 -> AH, created once per
 *              destination and reused), with the send queues' per-slot
 *              destinations; qps_ud_local, qps_ud_peer_set.
 *  ud_mcast.c  group membership of the receiving QP.
 *
 * qp_up.c brings UD QPs up (RESET -> RTS with QPS_UD_QKEY). The raw
 * path's files call into these only where ctx->ud is set.
 */
#ifndef QPS_UD_H
#define QPS_UD_H

#include <stdbool.h>
#include <stdint.h>

#include "frames.h"
#include "qps_int.h"

#define QPS_UD_GRH_LEN 40
#define QPS_UD_MCAST_QPN 0xffffffu
#define QPS_UD_QPN_MASK 0xffffffu
/* The hop limit of every AH qpsock makes (traffic class 0). */
#define QPS_UD_HOP_LIMIT 64

/*
 * The header after the GRH, network order:
 *   0  u8  magic QPS_UD_MAGIC (version in it: a new layout, a new value)
 *   1  u8  flags (none defined; nonzero is rejected)
 *   2  u16 payload length (the datagram's; the rest of the message is
 *          padding and rejected if it is not zero-length)
 *   4  u16 source port
 *   6  u16 destination port
 *   8  u32 the sender's receiving QPN (high byte zero)
 */
#define QPS_UD_MAGIC 0x51	/* 'Q', layout 1 */

struct qps_ud_hdr_info {
	uint16_t sport, dport;	/* network order */
	uint32_t src_qpn;	/* host order */
};

/* ud_frame.c */
/* Write the header for @payload_len bytes at @buf; returns
 * QPS_UD_HDR_LEN + @payload_len, or -EMSGSIZE beyond 65535. */
int qps_ud_hdr_build(void *buf, const struct qps_ud_hdr_info *h,
		     size_t payload_len);
/*
 * Parse a UD receive buffer of @len bytes (GRH included, as byte_len
 * counts it): the GRH gives fi->hdr.saddr/daddr, the UD header the ports,
 * the payload follows it. @src_qpn_out gets the sender's receiving QPN.
 * Returns 0, or -EPROTO for a bad GRH (stats.rx_ud_bad_grh) and -EBADMSG
 * for a bad UD header (stats.rx_ud_bad_hdr). Never reads outside @len.
 */
int qps_ud_parse(const uint8_t *buf, uint32_t len,
		 struct qps_frame_info *fi, uint32_t *src_qpn_out);

/* The per-slot destination of a UD send, written with the frame under
 * sq->lock and read by sq_generic.c when it builds the WR. */
struct qps_ud_dest {
	struct ibv_ah *ah;
	uint32_t daddr;		/* network order; for capture (dump.c) */
	uint32_t qpn;
	uint32_t qkey;
};

struct qps_ud;	/* ud_addr.c: peer table and AH cache */

/* ud_addr.c */
int qps_ud_init(struct qps_ctx *ctx);	/* ctx->ud; after the device opens */
void qps_ud_fini(struct qps_ctx *ctx);	/* destroys every AH */
/*
 * The destination of a datagram to @daddr (network order) from send queue
 * @sq, under sq->lock: its AH (cached per send queue while the route and
 * peer generations hold, created once per destination in the context's
 * cache), QPN and Q_Key. Multicast: QPN 0xffffff. -EHOSTUNREACH: no QPN
 * known for a unicast address (counted). @out is the entry of the slot
 * the datagram is built in (&sq->ud_dest[slot]): the slot keeps its AH
 * alive until it is written again (ud_addr.c), else -EINVAL.
 */
int qps_ud_dest_get(struct qps_sq *sq, uint32_t daddr,
		    struct qps_ud_dest *out);
/* 0 when @daddr (network order) can be sent to: multicast, or a unicast
 * address with a QPN known; else -EHOSTUNREACH (counted). No lock. */
int qps_ud_peer_known(struct qps_ctx *ctx, uint32_t daddr);
/* A datagram arrived from @saddr whose receiving QP is @qpn: learn it
 * (rx.lock held; cheap when nothing changed). */
void qps_ud_learn(struct qps_ctx *ctx, uint32_t saddr, uint32_t qpn);
/* Add the UD counters into @st (qps_ctx_stats). */
void qps_ud_stats(struct qps_ctx *ctx, struct qps_stats *st);

/* ud_mcast.c */
/* Group membership of the receiving QP: attach_mcast plus the device's
 * L2/IGMP membership (mcast_attach), undone in reverse on failure. */
int qps_ud_group_attach(struct qps_ctx *ctx, uint32_t group);
int qps_ud_group_detach(struct qps_ctx *ctx, uint32_t group);

#endif /* QPS_UD_H */
