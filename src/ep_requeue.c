// SPDX-License-Identifier: MIT
/*
 * qps_ep_requeue: a datagram another context received, queued here as if
 * this context's device had just delivered it. The datagram is rebuilt as
 * the frame it arrived in (valid checksums, its source and destination)
 * and fed to the receive path through qps_rx_inject, so the demux, the
 * endpoint's filters (connected peer, source lists), its queue limit and
 * its counters treat it as any other: a process taking over a socket
 * (libqpsock-preload across fork) loses nothing the previous holder had
 * queued, and nothing bypasses what the endpoint would have refused.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "endpoint.h"
#include "frames.h"
#include "qps_int.h"
#include "rx.h"

#define QPS_REQUEUE_MAX (65535u - QPS_IP_HLEN - QPS_UDP_HLEN)

int qps_ep_requeue(struct qps_ep *ep, const struct qps_rxmsg *m)
{
	QPS_ERRNO_GUARD;
	struct qps_frame_hdr h;
	struct qps_ctx *ctx;
	uint8_t *frame;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	if (!m || (!m->buf && m->len))
		return -EFAULT;
	if (m->len > QPS_REQUEUE_MAX)
		return -EMSGSIZE;
	if (m->src.sin_family != AF_INET)
		return -EAFNOSUPPORT;
	ctx = ep->ctx;
	/* A UD context's frames carry a GRH, not Ethernet headers. */
	if (ctx->ud)
		return -EOPNOTSUPP;
	/* Read once: a bind or connect racing with us is as if it came
	 * after the datagram. */
	if (!__atomic_load_n(&ep->bound, __ATOMIC_ACQUIRE))
		return -EINVAL;

	memset(&h, 0, sizeof(h));
	h.saddr = m->src.sin_addr.s_addr;
	h.sport = m->src.sin_port;
	/* A destination left out is the endpoint's own name. */
	h.daddr = m->dst.sin_addr.s_addr != INADDR_ANY ?
		  m->dst.sin_addr.s_addr :
		  ep->local.sin_addr.s_addr != INADDR_ANY ?
		  ep->local.sin_addr.s_addr : ctx->info.addr.s_addr;
	h.dport = m->dst.sin_port ? m->dst.sin_port : ep->local.sin_port;
	h.ttl = 64;
	if (IN_MULTICAST(ntohl(h.daddr)))
		qps_mcast_mac(h.daddr, h.dst_mac);
	else
		memcpy(h.dst_mac, ctx->info.mac, 6);

	frame = malloc(QPS_HDRS_LEN + m->len);
	if (!frame)
		return -ENOMEM;
	if (m->len)
		memcpy(frame + QPS_HDRS_LEN, m->buf, m->len);
	ret = qps_frame_build(frame, &h, m->len);
	if (ret < 0) {
		free(frame);
		return ret;
	}
	/* The receive path owns the frame from here, freed or queued. */
	qps_rx_inject(ctx, frame, (size_t)ret);
	return 0;
}
