/* SPDX-License-Identifier: MIT */
/*
 * Traffic helpers shared by the suites that send tagged, numbered
 * datagrams between emu contexts (test_mcast.c, test_ud.c): endpoints,
 * group membership, sending and receiving sequences, and checks on the
 * context's counters and buffer references.
 */
#ifndef QPS_T_TRAFFIC_H
#define QPS_T_TRAFFIC_H

#include <stddef.h>
#include <stdint.h>
#include <qpsock/qpsock.h>

#include "t_util.h"

#define T_WAIT_MS 3000		/* bound on waiting for frames to arrive */

/* Payload of every datagram: sender tag and sequence number. */
struct t_pkt {
	uint32_t tag;
	uint32_t seq;
};

/* A non-blocking datagram endpoint on @ctx, with SO_REUSEADDR when @reuse,
 * bound to @ip:@port unless @ip is NULL; failing to create or bind ends
 * the test. */
struct qps_ep *t_mkep(struct qps_ctx *ctx, const char *ip,
		      unsigned short port, int reuse);

/* A membership request for @group, source-specific when @source is not
 * NULL. */
struct qps_mreq t_mreq(const char *group, const char *source);

/* qps_join / qps_leave of @group (from @source, or any source). */
int t_join(struct qps_ep *ep, const char *group, const char *source);
int t_leave(struct qps_ep *ep, const char *group, const char *source);

/* Send @n datagrams (@tag, seq @first..) to @ip:@port, reaping and
 * retrying a full send queue. With @more, all but the last carry
 * QPS_MSG_MORE, so a burst rings the doorbell once. */
void t_send_seq(struct qps_ep *tx, const char *ip, unsigned short port,
		uint32_t tag, uint32_t first, uint32_t n, int more);

/* Progress @ctx until the 64-bit counter at offset @off of struct
 * qps_stats reaches @want: 0, or -ETIMEDOUT after T_WAIT_MS. Each poll
 * asserts the counters were read (t_ctx_stats). T_WAIT_STAT asserts the
 * wait by field name. */
int t_wait_stats(struct qps_ctx *ctx, uint64_t want, size_t off);
#define T_WAIT_STAT(ctx, field, want) \
	T_EQ(t_wait_stats((ctx), (want), offsetof(struct qps_stats, field)), 0)

/* Receive everything queued on @ep without blocking; every datagram must
 * be of @tag with seq < @n, counted in @seen[seq]. Returns the number
 * received. */
int t_drain(struct qps_ep *ep, uint32_t tag, uint8_t *seen, uint32_t n);

/* Assert each of @seen[0..@n) is exactly 1. */
void t_all_once(const uint8_t *seen, uint32_t n);

/* t_drain into a fresh table, asserting @ep held every seq < @n of @tag
 * exactly once and nothing else. */
void t_drain_all_once(struct qps_ep *ep, uint32_t tag, uint32_t n);

/* Receive everything queued on @ep from two senders, tags @tag1 and
 * @tag2 (others are passed over): assert each sent every seq < @n, and
 * each came exactly once. */
void t_drain_two_once(struct qps_ep *ep, uint32_t tag1, uint32_t tag2,
		      uint32_t n);

/* Assert every receive buffer of @ctx is back with the device: no
 * reference was lost or released twice. */
void t_all_buffers_home(struct qps_ctx *ctx);

/* Assert each valid datagram in @st was counted in exactly one demux
 * path. */
void t_partition_holds(const struct qps_stats *st);

/* emu only: the references on the port's multicast MAC filters. */
uint32_t t_emu_mac_refs(struct qps_ctx *ctx);

#endif
