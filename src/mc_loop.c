// SPDX-License-Identifier: MIT
/*
 * Multicast loopback (QPS_OPT_MULTICAST_LOOP), as the kernel's
 * IP_MULTICAST_LOOP: a datagram an endpoint sends to a group also reaches
 * the subscribers of that group on this host, once each, the sender among
 * them if it joined; with the option off, none of them.
 *
 * A NIC does it in hardware (QPS_DEV_CAP_MC_LOOP: mlx4, emu): the frame
 * comes back through the receive path like any other, and the demux
 * drops it when its sender turned the option off (qps_mc_loop_off). For
 * a device that does not (packet: AF_PACKET sends bypass every tap) the
 * context's own subscribers get a copy here after each send, through the
 * receive path (qps_rx_inject). The host's kernel sockets do not: a
 * user-space device cannot hand the kernel a frame as received, and a
 * TTL 0 send through a kernel socket is looped only while the host is a
 * member of the group, and otherwise leaves on the wire with TTL 0
 * (ip_mc_output runs only for routes with RTCF_LOCAL), so it is not done
 * (docs/packet.md "Multicast loopback").
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "demux.h"
#include "endpoint.h"
#include "frames.h"
#include "qps_int.h"
#include "rx.h"

/* Whether the context has a subscriber for @group:@port now. Read in the
 * poller's epoch section, which rx.lock (held) makes ours. */
static bool qps_mc_loop_local_locked(struct qps_ctx *ctx, uint32_t group,
				     uint16_t port)
{
	bool hit;

	qps_epoch_enter(&ctx->rx.epoch);
	/* Pairs with QPS_RCU_STORE of ctx->dmx.mc_tab (mcast.c). */
	hit = qps_mc_lookup(QPS_RCU_LOAD(ctx->dmx.mc_tab), group, port);
	qps_epoch_exit(&ctx->rx.epoch);
	return hit;
}

void qps_mc_loop(struct qps_ep *ep, const struct sockaddr_in *to,
		 const void *buf, size_t len)
{
	struct qps_ctx *ctx = ep->ctx;
	struct qps_frame_hdr h;
	uint8_t *frame;
	bool local;
	int flen = 0;

	/* A context with no membership at all, the usual sender, pays
	 * nothing more; one joined while we look is as if it joined after
	 * the send. */
	if (!__atomic_load_n(&ep->mc_loop, __ATOMIC_RELAXED) ||
	    (ctx->info.caps & QPS_DEV_CAP_MC_LOOP) || ctx->ud ||
	    !__atomic_load_n(&ctx->dmx.mc_nrules, __ATOMIC_RELAXED))
		return;
	qps_mutex_lock(&ctx->rx.lock);
	local = qps_mc_loop_local_locked(ctx, to->sin_addr.s_addr,
					 to->sin_port);
	qps_mutex_unlock(&ctx->rx.lock);
	if (!local)
		return;

	memset(&h, 0, sizeof(h));
	qps_tx_hdr(ep, to, &h);
	qps_mcast_mac(to->sin_addr.s_addr, h.dst_mac);
	frame = malloc(QPS_HDRS_LEN + len);
	if (frame) {
		if (len)
			memcpy(frame + QPS_HDRS_LEN, buf, len);
		flen = qps_frame_build(frame, &h, len);
	}
	qps_mutex_lock(&ctx->rx.lock);
	ctx->st->tx_mc_loops++;
	if (!frame)
		ctx->st->tx_mc_loop_errors++;
	qps_mutex_unlock(&ctx->rx.lock);
	if (frame)
		qps_rx_inject(ctx, frame, (size_t)flen);
}

/*
 * A multicast frame from our own address that the device looped back:
 * dropped when the endpoint that sent it (bound to its source port) has
 * the option off. Endpoints sharing the port (REUSEADDR) cannot be told
 * apart; the first one bound decides.
 */
bool qps_mc_loop_off(struct qps_ctx *ctx, const struct qps_frame_hdr *h)
{
	struct qps_ep *ep;

	if (h->saddr != ctx->info.addr.s_addr)
		return false;
	/* Pairs with QPS_RCU_STORE in qps_bind_(un)link_locked. */
	for (ep = qps_bind_first(ctx, h->sport); ep;
	     ep = QPS_RCU_LOAD(ep->bind_next))
		if (ep->local.sin_port == h->sport)
			return !__atomic_load_n(&ep->mc_loop,
						__ATOMIC_RELAXED);
	return false;
}
