// SPDX-License-Identifier: MIT
/*
 * Datagrams the device did not deliver, fed to the receive path as the
 * frames they arrived in (valid checksums, their source and destination)
 * through qps_rx_inject, so the demux, the endpoint's filters (connected
 * peer, memberships' sources), its queue limit and the counters treat
 * them as any other:
 *   - qps_ep_requeue: one another context received (a socket moving
 *     between processes, libqpsock-preload across fork, loses nothing
 *     the previous holder had queued);
 *   - QPS_OPT_HOST_RX: what reaches the host through its other
 *     interfaces (loopback above all: a server's localhost clients). The
 *     adopted kernel socket is bound where the endpoint is and filtered
 *     to drop what came in through the device, which the device gives
 *     us already; it is in the endpoint's epoll set, so sleepers and
 *     qps_ep_fd() users wake for it. A look costs a system call, so the
 *     receive path looks every QPS_RX_HOST_EVERY + 1 rounds whatever is
 *     queued (neither source starves the other), and always before it
 *     sleeps and in qps_ep_wait (which confirms a wake-up).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "endpoint.h"
#include "frames.h"
#include "qps_int.h"
#include "rx.h"

#define QPS_REQUEUE_MAX (65535u - QPS_IP_HLEN - QPS_UDP_HLEN)
#define QPS_RX_HOST_BURST 16

/* The headers of @len payload bytes already at @frame + QPS_HDRS_LEN,
 * sent from @src to @dst (a zero address or port: @ep's own name). */
static int frame_hdrs(const struct qps_ep *ep, uint8_t *frame,
		      const struct sockaddr_in *src,
		      const struct sockaddr_in *dst, size_t len)
{
	const struct qps_ctx *ctx = ep->ctx;
	struct qps_frame_hdr h;

	memset(&h, 0, sizeof(h));
	h.saddr = src->sin_addr.s_addr;
	h.sport = src->sin_port;
	h.daddr = dst->sin_addr.s_addr != INADDR_ANY ? dst->sin_addr.s_addr :
		  ep->local.sin_addr.s_addr != INADDR_ANY ?
		  ep->local.sin_addr.s_addr : ctx->info.addr.s_addr;
	h.dport = dst->sin_port ? dst->sin_port : ep->local.sin_port;
	h.ttl = 64;
	if (IN_MULTICAST(ntohl(h.daddr)))
		qps_mcast_mac(h.daddr, h.dst_mac);
	else
		memcpy(h.dst_mac, ctx->info.mac, 6);
	return qps_frame_build(frame, &h, len);
}

int qps_ep_requeue(struct qps_ep *ep, const struct qps_rxmsg *m)
{
	QPS_ERRNO_GUARD;
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
	/* A UD context's frames carry a GRH, not Ethernet headers. */
	if (ep->ctx->ud)
		return -EOPNOTSUPP;
	/* Read once: a bind or connect racing with us is as if it came
	 * after the datagram. */
	if (!__atomic_load_n(&ep->bound, __ATOMIC_ACQUIRE))
		return -EINVAL;
	frame = malloc(QPS_HDRS_LEN + m->len);
	if (!frame)
		return -ENOMEM;
	if (m->len)
		memcpy(frame + QPS_HDRS_LEN, m->buf, m->len);
	ret = frame_hdrs(ep, frame, &m->src, &m->dst, m->len);
	if (ret < 0) {
		free(frame);
		return ret;
	}
	/* The receive path owns the frame from here, freed or queued. */
	qps_rx_inject(ep->ctx, frame, (size_t)ret);
	return 0;
}

void qps_rx_host_start(struct qps_ep *ep)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.fd = ep->adopt_fd };

	if (ep->ctx->ud || ep->epfd < 0 ||
	    epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->adopt_fd, &ev) < 0)
		return;
	__atomic_store_n(&ep->hrx_fd, ep->adopt_fd, __ATOMIC_RELAXED);
}

void qps_rx_host_bind(struct qps_ep *ep, uint32_t addr, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = port },
			   now;
	socklen_t len = sizeof(now);
	int one = 1;

	/* The wire is no interface of the host: a wildcard endpoint is the
	 * host's wildcard socket on its port as well, when the port is
	 * free there. An address of the wire the kernel does not have. */
	if (addr != INADDR_ANY || ep->ctx->ud)
		return;
	if (setsockopt(ep->adopt_fd, IPPROTO_IP, IP_PKTINFO, &one,
		       sizeof(one)) < 0 ||
	    getsockname(ep->adopt_fd, (struct sockaddr *)&now, &len) < 0)
		return;
	/* Bound there already by the endpoint of another process that
	 * served the socket (a socket inherited across fork). */
	if (now.sin_port != port &&
	    bind(ep->adopt_fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		return;
	qps_rx_host_start(ep);
}

void qps_rx_host_stop(struct qps_ep *ep)
{
	int fd = __atomic_load_n(&ep->hrx_fd, __ATOMIC_RELAXED);

	if (fd < 0)
		return;
	__atomic_store_n(&ep->hrx_fd, -1, __ATOMIC_RELAXED);
	if (ep->epfd >= 0)
		(void)epoll_ctl(ep->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* One datagram of @fd into the demux: false when none is queued. */
static bool host_one(struct qps_ep *ep, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(struct in_pktinfo))];
	struct sockaddr_in src, dst = { .sin_family = AF_INET };
	struct iovec iov;
	struct msghdr mh = {
		.msg_name = &src, .msg_namelen = sizeof(src),
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;
	uint8_t *frame, probe;
	/* MSG_TRUNC: the datagram's length, whatever the buffer's. */
	ssize_t len = recv(fd, &probe, 0, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
	int flen;

	if (len < 0)
		return false;
	frame = malloc(QPS_HDRS_LEN + (size_t)len);
	if (!frame) {
		/* Left in the socket for the next look. */
		ep->ctx->st->rx_errors++;
		return false;
	}
	iov.iov_base = frame + QPS_HDRS_LEN;
	iov.iov_len = (size_t)len;
	len = recvmsg(fd, &mh, MSG_DONTWAIT);
	if (len < 0 || src.sin_family != AF_INET) {
		free(frame);
		return len >= 0;
	}
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			dst.sin_addr = pi.ipi_addr;
		}
	flen = frame_hdrs(ep, frame, &src, &dst, (size_t)len);
	if (flen < 0) {
		free(frame);
		return true;
	}
	qps_rx_inject_locked(ep->ctx, frame, (size_t)flen);
	return true;
}

void qps_rx_host_poll_locked(struct qps_ep *ep)
{
	int fd = __atomic_load_n(&ep->hrx_fd, __ATOMIC_RELAXED), i;

	if (fd < 0)
		return;
	for (i = 0; i < QPS_RX_HOST_BURST && host_one(ep, fd); i++)
		;
}
