// SPDX-License-Identifier: MIT
/*
 * An offloaded socket: the application's fd is a real kernel UDP socket
 * (so fcntl, fstat, dup and close keep their kernel meaning) and the data
 * path is a qpsock endpoint. The endpoint holds a duplicate of that
 * socket, close-on-exec and adopted with qps_ep_adopt_fd():
 *   - on packet and verbs the core binds it where the endpoint binds, so
 *     the application's socket IS the one that holds the port in the
 *     kernel's table (exclusive host-wide, no ICMP port-unreachable, the
 *     port held as long as the socket lives), and delivers nothing;
 *   - on emu the port lives in the emu wire's table; the kernel socket is
 *     never bound, so it receives nothing and only gives the application
 *     a real fd.
 * The duplicate makes the socket live as long as the endpoint: the
 * application's close() frees its fd number at once, as the kernel does,
 * while a call still inside keeps both until it returns.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload.h"

/* Every socket not yet freed, for the exit teardown. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pl_sock *live;
static int live_n;

static void live_add(struct pl_sock *s)
{
	pthread_mutex_lock(&live_lock);
	s->prev = NULL;
	s->next = live;
	if (live)
		live->prev = s;
	live = s;
	live_n++;
	pthread_mutex_unlock(&live_lock);
}

/* Under live_lock (live_del, pl_live_each's callback): off the list. */
void pl_live_forget(struct pl_sock *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		live = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = s->prev = NULL;
	live_n--;
}

static void live_del(struct pl_sock *s)
{
	pthread_mutex_lock(&live_lock);
	pl_live_forget(s);
	pthread_mutex_unlock(&live_lock);
}

void pl_sock_atfork_child(void)
{
	pthread_mutex_init(&live_lock, NULL);
}

int pl_live_count(void)
{
	return __atomic_load_n(&live_n, __ATOMIC_RELAXED);
}

static void addr_str(const struct sockaddr_in *a, char *buf, size_t size)
{
	char ip[INET_ADDRSTRLEN];

	if (a->sin_family != AF_INET) {
		(void)snprintf(buf, size, "-");
		return;
	}
	if (!inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip)))
		ip[0] = '\0';
	(void)snprintf(buf, size, "%s:%u", ip, ntohs(a->sin_port));
}

void pl_sock_line(struct pl_sock *s, char *buf, size_t size)
{
	struct qps_ep_counters c;
	char local[32], peer[32];
	const char *what;
	size_t n;
	int refused;

	buf[0] = '\0';
	if (qps_ep_stats(s->ep, &c, sizeof(c)) < 0)
		return;
	addr_str(&c.local, local, sizeof(local));
	addr_str(&c.peer, peer, sizeof(peer));
	(void)snprintf(buf, size,
		 "fd %d udp %s peer %s: rx %llu datagrams (%llu bytes) tx "
		 "%llu datagrams (%llu bytes) drops %llu (rx queue full %llu, "
		 "tx %llu) via qpsock",
		 s->fd, local, peer, (unsigned long long)c.rx_packets,
		 (unsigned long long)c.rx_bytes,
		 (unsigned long long)c.tx_packets,
		 (unsigned long long)c.tx_bytes,
		 (unsigned long long)c.rx_queue_full +
		 (unsigned long long)c.tx_drops,
		 (unsigned long long)c.rx_queue_full,
		 (unsigned long long)c.tx_drops);
	/* What the program asked and qpsock refused (pl_unsup.c). */
	what = __atomic_load_n(&s->refused_what, __ATOMIC_ACQUIRE);
	refused = __atomic_load_n(&s->refused, __ATOMIC_RELAXED);
	n = strlen(buf);
	if (what && n < size)
		(void)snprintf(buf + n, size - n, "; refused %d (first %s)",
			       refused ? refused : 1, what);
}

/* The line is taken while the endpoint is open, once. */
static void sock_close_ep(struct pl_sock *s)
{
	bool release;

	if (!s->ep)
		return;
	/* A parent's endpoint, inherited: the core touches nothing of it. */
	if (s->pid != pl_self) {
		s->ep = NULL;
		return;
	}
	if (pl_conf.stats && !s->fell_back) {
		char line[256];

		pl_sock_line(s, line, sizeof(line));
		if (line[0])
			pl_stats_keep(line);
	}
	release = pl_fork_owned(s);
	if (release)
		pl_fork_release_begin(s);
	qps_ep_close(s->ep);
	s->ep = NULL;
	if (release)
		pl_fork_release_end(s);
}

void pl_sock_release_ep(struct pl_sock *s)
{
	sock_close_ep(s);
}

void pl_live_each(void (*fn)(struct pl_sock *s, void *arg), void *arg)
{
	struct pl_sock *s, *next;

	pthread_mutex_lock(&live_lock);
	/* @fn may take @s off the list (pl_live_forget). */
	for (s = live; s; s = next) {
		next = s->next;
		fn(s, arg);
	}
	pthread_mutex_unlock(&live_lock);
}

void pl_sock_free(struct pl_sock *s)
{
	int e = errno;

	live_del(s);
	sock_close_ep(s);
	pl_fork_unmap(s);
	if (s->kfd >= 0)
		pl_real.close(s->kfd);
	pl_sock_release(s);
	errno = e;
}

void pl_live_wake_all(void)
{
	struct pl_sock *s;

	/* Receivers read the end and pollers see it readable; each then
	 * drops its reference, and the last closes. Not SHUT_WR: a sender
	 * would get EPIPE, and SIGPIPE would end the process with another
	 * status than its exit's. */
	pthread_mutex_lock(&live_lock);
	for (s = live; s; s = s->next)
		if (s->ep)
			qps_shutdown(s->ep, SHUT_RD);
	pthread_mutex_unlock(&live_lock);
}

int pl_sock_host_rx(struct qps_ep *ep)
{
	int one = 1;

	return qps_setopt(ep, QPS_OPT_HOST_RX, &one, sizeof(one));
}

static uint64_t next_id;

static void sock_offload(int fd, int type)
{
	struct qps_ctx *ctx = pl_ctx_get();
	int e = errno, ret;
	socklen_t len = sizeof(int);
	struct pl_sock *s;

	if (!ctx)
		return;
	s = pl_sock_alloc();
	if (!s) {
		ret = -ENOMEM;
		goto fail;
	}
	s->fd = fd;
	s->pid = getpid();
	s->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
	s->fresh = true;
	s->kfd = pl_real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (s->kfd < 0) {
		ret = -errno;
		goto fail;
	}
	if (pl_real.getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &s->rcvbuf,
			       &len) < 0)
		s->rcvbuf = 0;
	ret = qps_ep_create(ctx, QPS_EP_DGRAM, &s->ep);
	if (!ret)
		ret = pl_rcvbuf_apply(s->ep, s->rcvbuf);
	if (!ret)
		ret = qps_ep_adopt_fd(s->ep, s->kfd);
	if (!ret)
		ret = pl_sock_host_rx(s->ep);
	if (!ret && (type & SOCK_NONBLOCK))
		ret = qps_set_nonblock(s->ep, 1);
	if (ret < 0)
		goto fail;
	live_add(s);
	ret = pl_install(fd, s);
	/* The table's reference now keeps it; on failure this was the
	 * last, and it goes. */
	pl_unref(s);
	if (ret < 0) {
		s = NULL;
		goto fail;
	}
	errno = e;
	return;
fail:
	if (s) {
		if (s->ep)
			qps_ep_close(s->ep);
		if (s->kfd >= 0)
			pl_real.close(s->kfd);
		pl_sock_release(s);
	}
	if (pl_conf.debug)
		pl_log("fd %d: not offloaded (%s): left on the kernel", fd,
		       strerrordesc_np(-ret));
	errno = e;
}

void pl_sock_offload(int fd, int type)
{
	/* Opening the context and the endpoint takes the core's locks. */
	pl_inside++;
	sock_offload(fd, type);
	pl_inside--;
}

int pl_kernel_join(int fd, const struct qps_mreq *m, struct in_addr iface,
		   int ifindex, bool add)
{
	int r;

	if (m->source.s_addr != INADDR_ANY) {
		struct ip_mreq_source r4 = {
			.imr_multiaddr = m->group,
			.imr_interface = iface,
			.imr_sourceaddr = m->source,
		};

		r = pl_real.setsockopt(fd, IPPROTO_IP, add ?
				       IP_ADD_SOURCE_MEMBERSHIP :
				       IP_DROP_SOURCE_MEMBERSHIP, &r4,
				       sizeof(r4));
	} else {
		struct ip_mreqn rn = {
			.imr_multiaddr = m->group,
			.imr_address = iface,
			.imr_ifindex = ifindex,
		};

		r = pl_real.setsockopt(fd, IPPROTO_IP, add ? IP_ADD_MEMBERSHIP :
				       IP_DROP_MEMBERSHIP, &rn, sizeof(rn));
	}
	return r < 0 ? -errno : 0;
}

/* Memberships asked before the decision were kept for the endpoint;
 * the kernel socket now gets them, as the program asked. */
static void joins_to_kernel(int fd, struct pl_sock *s)
{
	int i;

	for (i = 0; i < s->npending; i++) {
		const struct qps_mreq *m = &s->pending[i];
		int r = pl_kernel_join(fd, m, m->iface, !pl_ctx_info.emu &&
				       m->ifindex == QPS_IFINDEX ?
				       pl_ctx_info.ifindex : 0, true);

		if (r < 0)
			pl_log("fd %d: membership asked before it fell back: "
			       "the kernel refused it (%s)", fd,
			       strerrordesc_np(-r));
	}
	for (i = 0; i < s->npblock; i++) {
		struct ip_mreq_source r4 = {
			.imr_multiaddr = s->pblock[i].group,
			.imr_interface = s->pblock[i].iface,
			.imr_sourceaddr = s->pblock[i].source,
		};

		if (pl_real.setsockopt(fd, IPPROTO_IP, IP_BLOCK_SOURCE, &r4,
				       sizeof(r4)) < 0)
			pl_log("fd %d: source blocked before it fell back: "
			       "the kernel refused it (%s)", fd,
			       strerrordesc_np(errno));
	}
	s->npending = 0;
	s->npblock = 0;
}

void pl_sock_fallback(int fd, struct pl_sock *s, const char *why)
{
	struct pl_sock *t = pl_remove(fd);
	int e = errno;

	if (pl_conf.debug)
		pl_log("fd %d: %s: left on the kernel", fd, why);
	/* Another thread remapped the fd meanwhile: put that one back. */
	if (t && t != s) {
		pl_install(fd, t);
	} else if (t) {
		t->fell_back = true;
		joins_to_kernel(fd, t);
		pl_epoll_fell(fd, t->id);
	}
	pl_unref(t);
	errno = e;
}
