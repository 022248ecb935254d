// SPDX-License-Identifier: MIT
/*
 * Endpoint lifetime, addressing and options. Endpoint memory belongs to its
 * context's table until the context is destroyed: a closed endpoint's slot
 * is reused only after every other free slot (FIFO), so a stale handle
 * reads a closed state and returns -EBADF instead of touching freed memory.
 *
 * The endpoint table, bind and connect run under ctx->ctl_lock and publish
 * into the demux tables (demux.c), which the receive path reads without
 * it. Closing unlinks the endpoint from every table, waits one grace
 * period (no poller can still be delivering to it), then drains its queue
 * and frees the slot; no per-packet reference on the endpoint is needed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "demux.h"
#include "endpoint.h"
#include "qps_int.h"
#include "rx.h"
#include "tx_wait.h"
#include "txts.h"
#include "ud.h"

int qps_ep_check(struct qps_ep *ep)
{
	/* Acquire: pairs with the release in qps_ep_set_state(). */
	if (!ep || __atomic_load_n(&ep->state, __ATOMIC_ACQUIRE) != QPS_EP_OPEN)
		return -EBADF;
	return qps_ctx_forked(ep->ctx) ? -ECHILD : 0;
}

/* Written under ctl_lock (and rx.lock when closing); read without a lock
 * by every call's qps_ep_check(). */
static void qps_ep_set_state(struct qps_ep *ep, enum qps_ep_state st)
{
	/* Release: the endpoint is set up before a call sees it open. */
	__atomic_store_n(&ep->state, st, __ATOMIC_RELEASE);
}

int qps_sin_check(const struct sockaddr *addr, socklen_t len,
		  const struct sockaddr_in **sin_out)
{
	if (!addr || len < sizeof(sa_family_t))
		return -EINVAL;
	if (addr->sa_family != AF_INET)
		return -EAFNOSUPPORT;
	if (len < sizeof(struct sockaddr_in))
		return -EINVAL;
	*sin_out = (const struct sockaddr_in *)addr;
	return 0;
}

/* Under ctl_lock, which every writer of the bind table holds. */
static bool qps_port_conflict(struct qps_ctx *ctx, const struct qps_ep *ep,
			      uint32_t addr, uint16_t port)
{
	const struct qps_ep *o;

	o = ctx->dmx.bind_tab[ntohs(port) % QPS_BIND_BUCKETS];
	for (; o; o = o->bind_next) {
		if (o->local.sin_port != port)
			continue;
		if (o->local.sin_addr.s_addr != INADDR_ANY &&
		    addr != INADDR_ANY && o->local.sin_addr.s_addr != addr)
			continue;
		if (!(o->reuseaddr && ep->reuseaddr) &&
		    !(o->reuseport && ep->reuseport))
			return true;
	}
	return false;
}

/*
 * On a device the host's stack also serves, the port is held there first
 * (provider.h hold_port): then the kernel's table, which every process
 * and kernel socket shares, decides conflicts and port 0's ephemeral
 * choice, and our own table only agrees with it.
 */
static int qps_ep_hold_port(struct qps_ep *ep, uint32_t addr, uint16_t *port)
{
	struct qps_ctx *ctx = ep->ctx;
	bool host_rx = ep->host_rx && ep->adopt_fd >= 0;
	/* A wildcard endpoint receives what reaches the context's address
	 * (and groups and broadcast, for which the kernel sends no ICMP):
	 * that is the port it holds, which the host's other addresses may
	 * still use, as for a kernel socket bound to it. With HOST_RX the
	 * socket receives for the host's other addresses itself: it is
	 * bound as asked. */
	struct in_addr a = { .s_addr = addr == INADDR_ANY && !host_rx ?
				       ctx->info.addr.s_addr : addr };
	unsigned int flags = (ep->reuseaddr ? QPS_HOLD_REUSEADDR : 0) |
			     (ep->reuseport ? QPS_HOLD_REUSEPORT : 0) |
			     (host_rx ? QPS_HOLD_HOST_RX : 0);
	int fd = ctx->ops->hold_port(ctx->dev, ep->adopt_fd, a, port, flags);

	/* The core's table alone holds the port (emu): with HOST_RX the
	 * socket is bound once the port is chosen (qps_bind_locked). */
	if (fd == -EOPNOTSUPP)
		return 0;
	if (fd < 0)
		return fd;
	ep->kfd = fd;
	if (host_rx)
		qps_rx_host_start(ep);
	return 0;
}

static void qps_ep_release_port(struct qps_ep *ep)
{
	qps_rx_host_stop(ep);
	/* An adopted socket stays bound: the kernel cannot unbind one, and
	 * its owner closes it, or hands it on (a fork child takes it). */
	if (ep->kfd >= 0 && ep->kfd != ep->adopt_fd)
		close(ep->kfd);
	else if (ep->kfd >= 0)
		ep->ctx->ops->release_port(ep->ctx->dev, ep->kfd);
	ep->kfd = -1;
}

static int qps_bind_locked(struct qps_ep *ep, uint32_t addr, uint16_t port)
{
	struct qps_ctx *ctx = ep->ctx;
	uint32_t span = QPS_EPHEMERAL_HI - QPS_EPHEMERAL_LO + 1;
	int ret;

	if (ep->bound)
		return -EINVAL;
	/* Port 0 is then the kernel's choice, already made. */
	ret = qps_ep_hold_port(ep, addr, &port);
	if (ret < 0)
		return ret;
	if (port == 0) {
		uint32_t i;

		for (i = 0; i < span; i++) {
			uint16_t p = ctx->ept.eph_next;

			ctx->ept.eph_next = p >= QPS_EPHEMERAL_HI ?
					    QPS_EPHEMERAL_LO : p + 1;
			if (!qps_port_conflict(ctx, ep, addr, htons(p))) {
				port = htons(p);
				break;
			}
		}
		if (port == 0)
			return -EADDRINUSE;
	} else if (qps_port_conflict(ctx, ep, addr, port)) {
		/* The kernel may let share what our table does not (a
		 * REUSEADDR and a REUSEPORT endpoint, say). */
		qps_ep_release_port(ep);
		return -EADDRINUSE;
	}
	ep->local.sin_family = AF_INET;
	ep->local.sin_addr.s_addr = addr;
	ep->local.sin_port = port;
	if (ep->host_rx && ep->adopt_fd >= 0 && ep->kfd < 0)
		qps_rx_host_bind(ep, addr, port);
	qps_bind_link_locked(ep);
	/* Release: ep->local is set before a sender that sees bound
	 * (acquire in qps_ep_autobind) builds a frame from it. */
	__atomic_store_n(&ep->bound, true, __ATOMIC_RELEASE);
	qps_stat_ep_publish_locked(ep);
	return 0;
}

static void qps_unbind_locked(struct qps_ep *ep)
{
	if (!ep->bound)
		return;
	qps_bind_unlink_locked(ep);
	qps_ep_release_port(ep);
	__atomic_store_n(&ep->bound, false, __ATOMIC_RELAXED);
}

int qps_ep_adopt_fd(struct qps_ep *ep, int fd)
{
	QPS_ERRNO_GUARD;
	int dom = 0, type = 0, ret = qps_ep_check(ep);
	socklen_t len = sizeof(int);

	if (ret < 0)
		return ret;
	if (fd < 0)
		return -EBADF;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) < 0)
		return -errno;
	len = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return -errno;
	if (dom != AF_INET || type != SOCK_DGRAM)
		return -EINVAL;
	pthread_mutex_lock(&ep->ctx->ctl_lock);
	if (qps_ep_check(ep) < 0)
		ret = -EBADF;
	else if (ep->bound)
		ret = -EINVAL;
	else
		ep->adopt_fd = fd;
	pthread_mutex_unlock(&ep->ctx->ctl_lock);
	return ret;
}

int qps_ep_autobind(struct qps_ep *ep)
{
	int ret = 0;

	/* Acquire: pairs with the release in qps_bind_locked(). */
	if (__atomic_load_n(&ep->bound, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&ep->ctx->ctl_lock);
	if (qps_ep_check(ep) < 0)
		ret = -EBADF;
	else if (!ep->bound)
		ret = qps_bind_locked(ep, INADDR_ANY, 0);
	pthread_mutex_unlock(&ep->ctx->ctl_lock);
	return ret;
}

static int qps_ep_fds(struct qps_ep *ep)
{
	struct epoll_event ev = { .events = EPOLLIN };

	ep->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ep->efd < 0)
		return -errno;
	ep->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ep->epfd < 0)
		return -errno;
	ev.data.fd = ep->efd;
	if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->efd, &ev) < 0)
		return -errno;
	if (ep->ctx->event_fd >= 0) {
		ev.data.fd = ep->ctx->event_fd;
		if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->ctx->event_fd,
			      &ev) < 0)
			return -errno;
	}
	return 0;
}

/* Under ctl_lock; nothing can reach @ep any more. */
static void qps_ep_free_locked(struct qps_ep *ep)
{
	struct qps_ctx *ctx = ep->ctx;

	if (ep->epfd >= 0)
		close(ep->epfd);
	if (ep->efd >= 0)
		close(ep->efd);
	ep->epfd = ep->efd = -1;
	free(ep->rxq);
	ep->rxq = NULL;
	free(ep->rxts);
	ep->rxts = NULL;
	qps_txts_fini_locked(ep);
	ep->free_next = NULL;
	if (ctx->ept.free_tail)
		ctx->ept.free_tail->free_next = ep;
	else
		ctx->ept.free_head = ep;
	ctx->ept.free_tail = ep;
	ctx->ept.nused--;
}

int qps_ep_create(struct qps_ctx *ctx, int type, struct qps_ep **ep_out)
{
	QPS_ERRNO_GUARD;
	struct qps_stat_ep *sb;
	struct qps_ep *ep;
	int ret = qps_ctx_check(ctx);

	if (ret < 0)
		return ret;
	if (!ep_out)
		return -EINVAL;
	*ep_out = NULL;
	if (type != QPS_EP_DGRAM)
		return -EINVAL;

	pthread_mutex_lock(&ctx->ctl_lock);
	ep = ctx->ept.free_head;
	if (!ep) {
		pthread_mutex_unlock(&ctx->ctl_lock);
		return -EMFILE;
	}
	ctx->ept.free_head = ep->free_next;
	if (!ctx->ept.free_head)
		ctx->ept.free_tail = NULL;
	ctx->ept.nused++;

	sb = ep->sb;
	memset(ep, 0, sizeof(*ep));
	ep->sb = sb;
	ep->ctx = ctx;
	ep->efd = ep->epfd = -1;
	ep->kfd = -1;
	ep->adopt_fd = -1;
	ep->hrx_fd = -1;
	ep->rxq_cap = ctx->rx.depth;
	ep->rcvbuf = ctx->rx.depth;
	ep->busy_poll_us = (int)ctx->busy_poll_us;
	ep->gen = ++ctx->ep_gen;
	ep->ttl = QPS_IP_TTL_DEFAULT;
	ep->mc_ttl = QPS_IP_MC_TTL_DEFAULT;
	ep->mc_loop = 1;
	ep->rxq = calloc(ep->rxq_cap, sizeof(*ep->rxq));
	ret = ep->rxq ? qps_ep_fds(ep) : -ENOMEM;
	if (ret < 0) {
		qps_ep_set_state(ep, QPS_EP_CLOSED);
		qps_ep_free_locked(ep);
		pthread_mutex_unlock(&ctx->ctl_lock);
		return ret;
	}
	qps_ep_set_state(ep, QPS_EP_OPEN);
	qps_stat_ep_open_locked(ep);
	pthread_mutex_unlock(&ctx->ctl_lock);
	*ep_out = ep;
	return 0;
}

/* Under every send queue's lock and ctl_lock. */
static void qps_ep_close_locked(struct qps_ep *ep)
{
	struct qps_ctx *ctx = ep->ctx;

	/* Receive calls check the state under rx.lock: none of them
	 * touches the queue after this. Those asleep are woken and leave
	 * with -EBADF; the descriptors they poll stay until they are out
	 * (they take only rx.lock to leave, not the locks we hold). */
	qps_mutex_lock(&ctx->rx.lock);
	qps_ep_set_state(ep, QPS_EP_CLOSED);
	if (ep->ts_flags & QPS_TS_RX_MASK)
		ctx->rx.ts_users--;
	ep->ts_flags = 0;
	qps_ep_wake_locked(ep);
	/* Senders asleep on a full send queue too (tx_wait.c). */
	qps_txw_wake(ctx);
	while (ep->waiters) {
		qps_mutex_unlock(&ctx->rx.lock);
		sched_yield();
		qps_mutex_lock(&ctx->rx.lock);
	}
	/* Reasons to arm that no sleeper will take back now. */
	ctx->rx.arm_refs -= ep->efd_refs;
	ep->efd_refs = 0;
	ep->efd_out = false;
	qps_mutex_unlock(&ctx->rx.lock);

	qps_mcast_leave_all_locked(ep);
	qps_conn_clear_locked(ep);
	qps_unbind_locked(ep);
	ep->connected = false;
	/* No table reaches @ep now; after a grace period no poller is
	 * still delivering to it, so the drain below is final. */
	qps_epoch_sync(&ctx->rx.epoch, 1);
	qps_retire_flush(ctx);

	qps_mutex_lock(&ctx->rx.lock);
	qps_rxq_drain_locked(ep);
	qps_mutex_unlock(&ctx->rx.lock);
	qps_ep_free_locked(ep);
	qps_stat_ep_publish_locked(ep);
}

int qps_ep_close(struct qps_ep *ep)
{
	QPS_ERRNO_GUARD;
	struct qps_ctx *ctx;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	ctx = ep->ctx;
	/* What this endpoint queued under MSG_MORE goes out now. */
	qps_tx_poll(ctx, QPS_TXF_CLOSE);
	qps_sq_lock_all(ctx);
	pthread_mutex_lock(&ctx->ctl_lock);
	if (qps_ep_check(ep) < 0)
		ret = -EBADF;
	else
		qps_ep_close_locked(ep);
	pthread_mutex_unlock(&ctx->ctl_lock);
	qps_sq_unlock_all(ctx);
	return ret;
}

void qps_ep_release_all(struct qps_ctx *ctx)
{
	uint32_t i;

	qps_sq_lock_all(ctx);
	pthread_mutex_lock(&ctx->ctl_lock);
	for (i = 0; i < ctx->ept.max; i++)
		if (qps_ep_check(&ctx->ept.eps[i]) == 0)
			qps_ep_close_locked(&ctx->ept.eps[i]);
	pthread_mutex_unlock(&ctx->ctl_lock);
	qps_sq_unlock_all(ctx);
}

static bool qps_local_addr_ok(struct qps_ctx *ctx, uint32_t addr)
{
	uint32_t h = ntohl(addr);

	return addr == INADDR_ANY || addr == ctx->info.addr.s_addr ||
	       IN_MULTICAST(h) || h == INADDR_BROADCAST;
}

int qps_bind(struct qps_ep *ep, const struct sockaddr *addr, socklen_t len)
{
	QPS_ERRNO_GUARD;
	const struct sockaddr_in *sin;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	ret = qps_sin_check(addr, len, &sin);
	if (ret < 0)
		return ret;
	if (!qps_local_addr_ok(ep->ctx, sin->sin_addr.s_addr))
		return -EADDRNOTAVAIL;
	pthread_mutex_lock(&ep->ctx->ctl_lock);
	ret = qps_ep_check(ep) < 0 ? -EBADF :
	      qps_bind_locked(ep, sin->sin_addr.s_addr, sin->sin_port);
	pthread_mutex_unlock(&ep->ctx->ctl_lock);
	return ret;
}

int qps_connect(struct qps_ep *ep, const struct sockaddr *addr, socklen_t len)
{
	QPS_ERRNO_GUARD;
	struct qps_ctx *ctx;
	const struct sockaddr_in *sin;
	bool resolved = true;
	uint8_t mac[6];
	uint64_t gen;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	ctx = ep->ctx;
	if (addr && len >= sizeof(sa_family_t) && addr->sa_family == AF_UNSPEC) {
		/* Every send queue's lock: senders read the peer and the
		 * cached pick under the lock of the queue they use. */
		qps_sq_lock_all(ctx);
		pthread_mutex_lock(&ctx->ctl_lock);
		qps_conn_clear_locked(ep);
		if (ep->connected)
			qps_txq_cache_reset(ctx->txq, &ep->txq_cache,
					    QPS_TXQ_RESET_CONNECT);
		ep->connected = false;
		memset(&ep->peer, 0, sizeof(ep->peer));
		qps_stat_ep_publish_locked(ep);
		qps_retire_flush(ctx);
		pthread_mutex_unlock(&ctx->ctl_lock);
		qps_sq_unlock_all(ctx);
		return 0;
	}
	ret = qps_sin_check(addr, len, &sin);
	if (ret < 0)
		return ret;
	if (sin->sin_port == 0)
		return -EINVAL;
	ret = qps_ep_autobind(ep);
	if (ret < 0)
		return ret;

	qps_sq_lock_all(ctx);
	gen = qps_route_gen(ctx);
	/* UD has no MAC to cache: its AH is the send queues' business, and
	 * a unicast peer needs a QPN (set or learned) to be reached. */
	memset(mac, 0, sizeof(mac));
	if (ctx->ud) {
		ret = qps_ud_peer_known(ctx, sin->sin_addr.s_addr);
	} else {
		/* A non-blocking connect does not wait for ARP (the kernel's
		 * never does): the first send resolves the peer. */
		ret = qps_route_resolve(ctx, NULL, sin->sin_addr.s_addr, mac,
					ep->nonblock);
		resolved = ret == 0;
		if (ret == -EAGAIN)
			ret = 0;
	}
	if (ret == 0) {
		pthread_mutex_lock(&ctx->ctl_lock);
		ret = qps_ep_check(ep);
		if (ret == 0)
			ret = qps_conn_set_locked(ep, sin->sin_addr.s_addr,
						  sin->sin_port);
		if (ret == 0) {
			ep->peer.sin_family = AF_INET;
			ep->peer.sin_addr = sin->sin_addr;
			ep->peer.sin_port = sin->sin_port;
			/* A new peer: its MAC replaces any newer one; one
			 * not resolved yet leaves none (generation 0, which
			 * a device whose routes change never has). */
			qps_ep_peer_mac_store(ep, resolved ? gen : 0, mac,
					      true);
			/* A new destination: the next send picks its QP
			 * again (a reconnect counts as a reset). */
			if (ep->connected)
				qps_txq_cache_reset(ctx->txq, &ep->txq_cache,
						    QPS_TXQ_RESET_CONNECT);
			else
				qps_txq_cache_init(&ep->txq_cache);
			ep->txq_tuple = (struct qps_txq_tuple){
				.saddr = ctx->info.addr.s_addr,
				.daddr = sin->sin_addr.s_addr,
				.sport = ep->local.sin_port,
				.dport = sin->sin_port,
			};
			ep->connected = true;
			qps_stat_ep_publish_locked(ep);
		}
		qps_retire_flush(ctx);
		pthread_mutex_unlock(&ctx->ctl_lock);
	}
	qps_sq_unlock_all(ctx);
	return ret;
}

/*
 * Senders on different send queues may refresh the peer's MAC at once
 * (tx.c); two plain stores each could interleave into the old MAC under
 * the new generation. Under peer_lock the pair is one update, and an
 * older generation never replaces a newer one, so a slow resolver cannot
 * undo a fresh one. Nothing blocks inside: the resolution is done before.
 */
void qps_ep_peer_mac_store(struct qps_ep *ep, uint64_t gen,
			   const uint8_t mac[6], bool force)
{
	/* Acquire: pairs with the release at the end (the previous holder's
	 * stores are seen). */
	while (__atomic_exchange_n(&ep->peer_lock, 1, __ATOMIC_ACQUIRE))
		qps_cpu_relax();
	if (force ||
	    __atomic_load_n(&ep->peer_route_gen, __ATOMIC_RELAXED) < gen) {
		__atomic_store_n(&ep->peer_mac48, qps_mac48_pack(mac),
				 __ATOMIC_RELAXED);
		/* Release: pairs with the acquire in qps_ep_peer_mac_load. */
		__atomic_store_n(&ep->peer_route_gen, gen, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&ep->peer_lock, 0, __ATOMIC_RELEASE);
}

/*
 * The MAC resolved under @gen, if that is what is published. A store that
 * overlaps the read can only bring a MAC resolved later (stores are
 * ordered by generation), which is as good for @gen.
 */
bool qps_ep_peer_mac_load(struct qps_ep *ep, uint64_t gen, uint8_t mac[6])
{
	/* Acquire: pairs with the release in qps_ep_peer_mac_store. */
	if (__atomic_load_n(&ep->peer_route_gen, __ATOMIC_ACQUIRE) != gen)
		return false;
	qps_mac48_unpack(__atomic_load_n(&ep->peer_mac48, __ATOMIC_RELAXED),
			 mac);
	return true;
}

int qps_shutdown(struct qps_ep *ep, int how)
{
	QPS_ERRNO_GUARD;
	struct qps_ctx *ctx;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	ctx = ep->ctx;
	qps_mutex_lock(&ctx->rx.lock);
	if (how != SHUT_WR) {
		ep->rd_shut = true;
		qps_ep_wake_locked(ep);
	}
	/* Read by senders without a lock (qps_tx_check). */
	if (how != SHUT_RD) {
		__atomic_store_n(&ep->wr_shut, true, __ATOMIC_RELAXED);
		/* A sender asleep on a full send queue sees it and leaves. */
		qps_txw_wake(ctx);
	}
	qps_mutex_unlock(&ctx->rx.lock);
	/* Linux answers an unconnected datagram socket so, after doing it:
	 * that is how a receiving thread is usually woken. */
	return ep->connected ? 0 : -ENOTCONN;
}

static int qps_sin_out(const struct sockaddr_in *sin, struct sockaddr *addr,
		       socklen_t *len)
{
	if (!addr || !len)
		return -EINVAL;
	memcpy(addr, sin, *len < sizeof(*sin) ? *len : sizeof(*sin));
	*len = sizeof(*sin);
	return 0;
}

int qps_getsockname(struct qps_ep *ep, struct sockaddr *addr, socklen_t *len)
{
	QPS_ERRNO_GUARD;
	struct sockaddr_in sin;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	if (ep->bound) {
		sin.sin_port = ep->local.sin_port;
		sin.sin_addr = ep->local.sin_addr;
	}
	/* As Linux: a wildcard-bound endpoint that connects takes the source
	 * address its datagrams leave with, until it disconnects. */
	if (ep->connected && sin.sin_addr.s_addr == INADDR_ANY)
		sin.sin_addr = ep->ctx->info.addr;
	return qps_sin_out(&sin, addr, len);
}

int qps_getpeername(struct qps_ep *ep, struct sockaddr *addr, socklen_t *len)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	if (!ep->connected)
		return -ENOTCONN;
	return qps_sin_out(&ep->peer, addr, len);
}

static int qps_opt_int(const void *val, socklen_t len, int *out)
{
	if (!val)
		return -EFAULT;
	if (len != sizeof(int))
		return -EINVAL;
	memcpy(out, val, sizeof(int));
	return 0;
}

/*
 * IP_TTL, IP_MULTICAST_TTL and IP_TOS as Linux takes them: -1 restores the
 * default. A multicast TTL of 0 (the host only) is refused: the device
 * would still put the frame on the wire.
 */
static int qps_ep_set_hdr_opt(struct qps_ep *ep, int opt, int v)
{
	uint8_t *field = opt == QPS_OPT_TTL ? &ep->ttl :
			 opt == QPS_OPT_MULTICAST_TTL ? &ep->mc_ttl : &ep->tos;

	if (v == -1)
		v = opt == QPS_OPT_TTL ? QPS_IP_TTL_DEFAULT :
		    opt == QPS_OPT_MULTICAST_TTL ? QPS_IP_MC_TTL_DEFAULT : 0;
	if (v > 255 || v < (opt == QPS_OPT_TOS ? 0 : 1))
		return -EINVAL;
	/* Read by senders without a lock (tx.c). */
	__atomic_store_n(field, (uint8_t)v, __ATOMIC_RELAXED);
	return 0;
}

/*
 * QPS_OPT_TIMESTAMP: the receive times need the ring PKTINFO uses, and
 * the context polls its receive CQ with stamps while any endpoint wants
 * them (rx.ts_users, under rx.lock as the flags are).
 */
static int qps_ep_set_ts(struct qps_ep *ep, int v)
{
	struct qps_ctx *ctx = ep->ctx;
	int ret;

	if (v & ~(QPS_TS_RX_MASK | QPS_TS_TX_MASK))
		return -EINVAL;
	qps_mutex_lock(&ctx->rx.lock);
	ret = qps_ep_check(ep);	/* a concurrent close frees rxts */
	if (!ret && (v & QPS_TS_RX_MASK) && !ep->rxts) {
		ep->rxts = calloc(ep->rxq_cap, sizeof(*ep->rxts));
		if (!ep->rxts)
			ret = -ENOMEM;
	}
	if (!ret)
		ret = qps_txts_enable_locked(ep, v & QPS_TS_TX_MASK);
	if (!ret) {
		if (!(ep->ts_flags & QPS_TS_RX_MASK) && (v & QPS_TS_RX_MASK))
			ctx->rx.ts_users++;
		else if ((ep->ts_flags & QPS_TS_RX_MASK) &&
			 !(v & QPS_TS_RX_MASK))
			ctx->rx.ts_users--;
		/* Release: pairs with the senders' acquire (txts.c); the
		 * report queue made above is there before they see it. */
		__atomic_store_n(&ep->ts_flags, (uint32_t)v, __ATOMIC_RELEASE);
	}
	qps_mutex_unlock(&ctx->rx.lock);
	return ret;
}

int qps_setopt(struct qps_ep *ep, int opt, const void *val, socklen_t len)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ep_check(ep);
	int v;

	if (ret < 0)
		return ret;
	switch (opt) {
	case QPS_OPT_NONBLOCK:
	case QPS_OPT_RCVBUF:
	case QPS_OPT_REUSEADDR:
	case QPS_OPT_REUSEPORT:
	case QPS_OPT_BUSY_POLL:
	case QPS_OPT_TTL:
	case QPS_OPT_MULTICAST_TTL:
	case QPS_OPT_TOS:
	case QPS_OPT_MULTICAST_LOOP:
	case QPS_OPT_PRIORITY:
	case QPS_OPT_RCVTIMEO:
	case QPS_OPT_SNDTIMEO:
	case QPS_OPT_PKTINFO:
	case QPS_OPT_TIMESTAMP:
	case QPS_OPT_HOST_RX:
	case QPS_OPT_RCVBUF_BYTES:
		break;
	default:	/* includes the read-only QPS_OPT_ERROR, _RXQ_LEN */
		return -ENOPROTOOPT;
	}
	ret = qps_opt_int(val, len, &v);
	if (ret < 0)
		return ret;

	switch (opt) {
	case QPS_OPT_NONBLOCK:
		ep->nonblock = v != 0;
		break;
	case QPS_OPT_RCVBUF:
		if (v < 1)
			return -EINVAL;
		/* Clamped like SO_RCVBUF; the queue grows to it as needed. */
		qps_mutex_lock(&ep->ctx->rx.lock);
		ep->rcvbuf = v > QPS_RCVBUF_MAX ? QPS_RCVBUF_MAX : (uint32_t)v;
		ep->sb->rcvbuf = ep->rcvbuf;
		qps_mutex_unlock(&ep->ctx->rx.lock);
		break;
	case QPS_OPT_RCVBUF_BYTES:
		if (v < 0)
			return -EINVAL;
		qps_mutex_lock(&ep->ctx->rx.lock);
		ep->rcvbuf_bytes = (uint64_t)v;
		qps_mutex_unlock(&ep->ctx->rx.lock);
		break;
	case QPS_OPT_REUSEADDR:
		ep->reuseaddr = v != 0;
		break;
	case QPS_OPT_REUSEPORT:
		ep->reuseport = v != 0;
		break;
	case QPS_OPT_BUSY_POLL:
		if (v < 0 || v > QPS_BUSY_POLL_MAX_US)
			return -EINVAL;
		/* Read by receivers without a lock, once per call. */
		__atomic_store_n(&ep->busy_poll_us, v, __ATOMIC_RELAXED);
		break;
	case QPS_OPT_TTL:
	case QPS_OPT_MULTICAST_TTL:
	case QPS_OPT_TOS:
		return qps_ep_set_hdr_opt(ep, opt, v);
	case QPS_OPT_MULTICAST_LOOP:
		/* Any value, as Linux: non-zero is on. Read by senders and
		 * the receive path without a lock. */
		__atomic_store_n(&ep->mc_loop, v != 0, __ATOMIC_RELAXED);
		break;
	case QPS_OPT_PRIORITY:
		if (v < 0 || v > 15)
			return -EINVAL;
		ep->priority = v;
		atomic_store_explicit(&ep->sb->priority, v,
				      memory_order_relaxed);
		break;
	case QPS_OPT_RCVTIMEO:
		if (v < 0)
			return -EINVAL;
		ep->rcvtimeo_ms = v;
		break;
	case QPS_OPT_SNDTIMEO:
		if (v < 0)
			return -EINVAL;
		ep->sndtimeo_ms = v;
		break;
	case QPS_OPT_PKTINFO:
		/* The timestamps ring is allocated once, on first use. */
		qps_mutex_lock(&ep->ctx->rx.lock);
		ret = qps_ep_check(ep);	/* a concurrent close frees rxts */
		if (!ret && v && !ep->rxts)
			ep->rxts = calloc(ep->rxq_cap, sizeof(*ep->rxts));
		if (!ret && v && !ep->rxts)
			ret = -ENOMEM;
		if (!ret)
			ep->pktinfo = v != 0;
		qps_mutex_unlock(&ep->ctx->rx.lock);
		return ret;
	case QPS_OPT_TIMESTAMP:
		return qps_ep_set_ts(ep, v);
	case QPS_OPT_HOST_RX:
		/* It decides how the port is held: fixed once bound. */
		pthread_mutex_lock(&ep->ctx->ctl_lock);
		ret = ep->bound ? -EISCONN : 0;
		if (!ret)
			ep->host_rx = v != 0;
		pthread_mutex_unlock(&ep->ctx->ctl_lock);
		return ret;
	}
	return 0;
}

int qps_getopt(struct qps_ep *ep, int opt, void *val, socklen_t *len)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ep_check(ep);
	int v;

	if (ret < 0)
		return ret;
	switch (opt) {
	case QPS_OPT_NONBLOCK:
		v = ep->nonblock;
		break;
	case QPS_OPT_RCVBUF:
		v = (int)ep->rcvbuf;
		break;
	case QPS_OPT_REUSEADDR:
		v = ep->reuseaddr;
		break;
	case QPS_OPT_REUSEPORT:
		v = ep->reuseport;
		break;
	case QPS_OPT_BUSY_POLL:
		v = __atomic_load_n(&ep->busy_poll_us, __ATOMIC_RELAXED);
		break;
	case QPS_OPT_TTL:
		v = __atomic_load_n(&ep->ttl, __ATOMIC_RELAXED);
		break;
	case QPS_OPT_MULTICAST_TTL:
		v = __atomic_load_n(&ep->mc_ttl, __ATOMIC_RELAXED);
		break;
	case QPS_OPT_TOS:
		v = __atomic_load_n(&ep->tos, __ATOMIC_RELAXED);
		break;
	case QPS_OPT_MULTICAST_LOOP:
		v = __atomic_load_n(&ep->mc_loop, __ATOMIC_RELAXED);
		break;
	case QPS_OPT_PRIORITY:
		v = ep->priority;
		break;
	case QPS_OPT_RCVTIMEO:
		v = ep->rcvtimeo_ms;
		break;
	case QPS_OPT_SNDTIMEO:
		v = ep->sndtimeo_ms;
		break;
	case QPS_OPT_PKTINFO:
		qps_mutex_lock(&ep->ctx->rx.lock);
		v = ep->pktinfo;
		qps_mutex_unlock(&ep->ctx->rx.lock);
		break;
	case QPS_OPT_TIMESTAMP:
		v = (int)__atomic_load_n(&ep->ts_flags, __ATOMIC_RELAXED);
		break;
	case QPS_OPT_HOST_RX:
		v = ep->host_rx;
		break;
	case QPS_OPT_RCVBUF_BYTES:
		v = (int)ep->rcvbuf_bytes;
		break;
	case QPS_OPT_ERROR:
		v = ep->error;
		ep->error = 0;
		break;
	case QPS_OPT_RXQ_LEN:
		qps_mutex_lock(&ep->ctx->rx.lock);
		v = (int)ep->rxq_count;
		qps_mutex_unlock(&ep->ctx->rx.lock);
		break;
	default:
		return -ENOPROTOOPT;
	}
	if (!val || !len)
		return -EFAULT;
	if (*len < sizeof(int))
		return -EINVAL;
	memcpy(val, &v, sizeof(int));
	*len = sizeof(int);
	return 0;
}

int qps_set_nonblock(struct qps_ep *ep, int on)
{
	QPS_ERRNO_GUARD;
	return qps_setopt(ep, QPS_OPT_NONBLOCK, &on, sizeof(on));
}

int qps_ep_fd(struct qps_ep *ep)
{
	QPS_ERRNO_GUARD;
	int ret = qps_ep_check(ep);

	if (ret < 0)
		return ret;
	/* From now on the eventfd must follow the queue. */
	qps_mutex_lock(&ep->ctx->rx.lock);
	qps_ep_fd_out_locked(ep);
	qps_mutex_unlock(&ep->ctx->rx.lock);
	return ep->epfd;
}
