// SPDX-License-Identifier: MIT
/*
 * An offloaded socket across fork(). The kernel socket behind the fd is
 * one open file that parent and children share; the endpoint is not: it
 * lives in one process's context (the core refuses a child's calls on
 * its parent's). So one process at a time serves a shared socket, and
 * the socket moves to the process that uses it once the one serving it
 * lets go. A page of shared memory per socket, made when the first fork
 * sees it, says who serves it (owner) and carries what a move needs:
 * the name, the peer, the memberships, and the datagrams the endpoint
 * had queued (requeued on the taker's endpoint, qps_ep_requeue).
 *
 * Letting go (release): at close of the last fd, at exit or exec, and,
 * on packet and verbs, at fork itself when no call is inside the socket,
 * since a prefork parent never touches the socket again and a daemon's
 * parent exits.
 * Between two owners the kernel socket is the socket: it holds the port
 * already, so the filter that keeps the device's traffic out of it is
 * taken off and it queues what arrives (the gap); the taker's bind puts
 * the filter back and drains that queue into its endpoint. On emu there
 * is no kernel path:
 * the socket is released only by close, exit or exec, and a process
 * takes it only at the address it had (emu's addresses are per process),
 * so in practice when the process that had it has exited.
 *
 * Taking (claim): the first call of a process on a socket it does not
 * serve, when nobody does (or the owner died without letting go). A
 * process that cannot take it sees the plain kernel socket (packet,
 * verbs: sends leave through the kernel from the right port, receives
 * get what the gap queues); on emu its blocking calls wait until it can
 * take it (pl_fork_wait), its non-blocking ones get EAGAIN.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "preload.h"

/* Queued datagrams a release can hand on; the mapping is sparse, so an
 * idle socket's costs a page. */
#define PL_SHARE_SIZE (4u << 20)
#define PL_SHARE_GROUPS (QPS_EP_STATS_GROUPS + PL_PENDING_JOINS)
#define PL_HANDOFF_MAX 65536
#define PL_HANDOFF_DGRAMS 4096

struct pl_handoff {
	uint32_t len;
	struct sockaddr_in src, dst;
};

struct pl_share {
	int owner;		/* pid serving it, 0: nobody (atomic) */
	struct sockaddr_in local, peer;
	struct in_addr ctx_addr;	/* the address it was served at */
	int ngroups;
	struct qps_mreq groups[PL_SHARE_GROUPS];
	bool gap;		/* the kernel socket queues (packet, verbs) */
	uint32_t used;		/* bytes of data[] in records */
	uint32_t lost;		/* datagrams that did not fit */
	unsigned char data[];	/* struct pl_handoff + payload, aligned */
};

#define PL_SHARE_DATA (PL_SHARE_SIZE - sizeof(struct pl_share))

static pthread_mutex_t claim_lock = PTHREAD_MUTEX_INITIALIZER;
/* Sockets the last fork shared: the child may take them. */
static int shared_at_fork;

static bool host_netdev(void)
{
	return !pl_ctx_info.emu;
}

static struct pl_share *share_get(struct pl_sock *s)
{
	void *p;

	if (s->share)
		return s->share;
	p = mmap(NULL, PL_SHARE_SIZE, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	s->share = p;
	__atomic_store_n(&s->share->owner, s->pid, __ATOMIC_RELEASE);
	return s->share;
}

bool pl_fork_owned(const struct pl_sock *s)
{
	return s->share &&
	       __atomic_load_n(&s->share->owner, __ATOMIC_RELAXED) == pl_self;
}

void pl_fork_unmap(struct pl_sock *s)
{
	if (s->share)
		munmap(s->share, PL_SHARE_SIZE);
	s->share = NULL;
}

static bool pid_alive(pid_t pid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	int fd;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return false;
	/* A zombie is gone for our purpose: it calls nothing any more. */
	(void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = pl_real.read(fd, buf, sizeof(buf) - 1);
	pl_real.close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

/* --- release -------------------------------------------------------- */

static void handoff_put(struct pl_share *sh, const struct qps_rxmsg *m,
			size_t len)
{
	struct pl_handoff h = { .len = (uint32_t)len, .src = m->src,
				.dst = m->dst };
	size_t need = (sizeof(h) + len + 7) & ~(size_t)7;

	if (sh->used + need > PL_SHARE_DATA) {
		sh->lost++;
		return;
	}
	memcpy(sh->data + sh->used, &h, sizeof(h));
	memcpy(sh->data + sh->used + sizeof(h), m->buf, len);
	sh->used += (uint32_t)need;
}

/* The endpoint's queue, into the page. */
static void drain_ep(struct pl_sock *s, struct pl_share *sh, char *buf)
{
	struct qps_rxmsg m;
	int on = 1, n = 0;

	qps_setopt(s->ep, QPS_OPT_PKTINFO, &on, sizeof(on));
	/* Bounded: the device may keep delivering while we drain. */
	while (n < PL_HANDOFF_DGRAMS) {
		long r;

		memset(&m, 0, sizeof(m));
		m.buf = buf;
		m.len = PL_HANDOFF_MAX;
		r = qps_recvmsg(s->ep, &m, QPS_MSG_DONTWAIT);
		/* 0 with no sender: the end after shutdown(SHUT_RD). */
		if (r < 0 || (r == 0 && m.src.sin_family != AF_INET))
			break;
		if (!(m.flags & QPS_RXMSG_PKTINFO))
			memset(&m.dst, 0, sizeof(m.dst));
		handoff_put(sh, &m, (size_t)r);
		n++;
	}
	if (pl_conf.debug && n)
		pl_log("fd %d: %d queued datagrams handed on", s->fd, n);
}

static void kernel_joins(int kfd, const struct pl_share *sh, bool add)
{
	int i;

	for (i = 0; i < sh->ngroups; i++)
		(void)pl_kernel_join(kfd, &sh->groups[i], sh->ctx_addr,
				     pl_ctx_info.ifindex, add);
}

/* The kernel socket queues from now until a taker's bind: it holds the
 * port already, only its filter kept the device's traffic out. It keeps
 * IP_PKTINFO on after (the second source needs it, QPS_OPT_HOST_RX). */
static void gap_open(struct pl_sock *s, struct pl_share *sh)
{
	int one = 1, rcv = s->rcvbuf / 2;

	sh->gap = false;
	if (!host_netdev() || sh->local.sin_port == 0)
		return;
	if (pl_real.setsockopt(s->kfd, SOL_SOCKET, SO_DETACH_FILTER, &one,
			       sizeof(one)) < 0)
		return;
	if (rcv > 0)
		(void)pl_real.setsockopt(s->kfd, SOL_SOCKET, SO_RCVBUF, &rcv,
					 sizeof(rcv));
	(void)pl_real.setsockopt(s->kfd, IPPROTO_IP, IP_PKTINFO, &one,
				 sizeof(one));
	kernel_joins(s->kfd, sh, true);
	sh->gap = true;
}

void pl_fork_release_begin(struct pl_sock *s)
{
	struct pl_share *sh = s->share;
	struct qps_ep_counters c;
	unsigned int i;
	char *buf;

	if (qps_ep_stats(s->ep, &c, sizeof(c)) < 0)
		memset(&c, 0, sizeof(c));
	sh->local = c.local;
	sh->peer = c.peer;
	sh->ctx_addr = pl_ctx_info.addr;
	sh->ngroups = 0;
	for (i = 0; i < c.ngroups && i < QPS_EP_STATS_GROUPS; i++)
		sh->groups[sh->ngroups++] = c.groups[i];
	if (c.ngroups > QPS_EP_STATS_GROUPS)
		pl_log("fd %d: %u memberships, %d handed on with the socket",
		       s->fd, c.ngroups, QPS_EP_STATS_GROUPS);
	for (i = 0; i < (unsigned int)s->npending; i++)
		sh->groups[sh->ngroups++] = s->pending[i];
	sh->used = 0;
	sh->lost = 0;
	buf = malloc(PL_HANDOFF_MAX);
	if (buf) {
		drain_ep(s, sh, buf);
		free(buf);
	}
	gap_open(s, sh);
}

void pl_fork_release_end(struct pl_sock *s)
{
	/* Release: pairs with the acquire CAS of a taker, which then reads
	 * the page as written above. */
	__atomic_store_n(&s->share->owner, 0, __ATOMIC_RELEASE);
}

static void prepare_one(struct pl_sock *s, void *arg)
{
	(void)arg;
	if (s->ep && s->pid == pl_self && !s->fell_back)
		(void)share_get(s);
	if (!s->share)
		return;
	shared_at_fork++;
	if (!s->ep || s->pid != pl_self)
		return;
	/* Only the fd table's references: no call of another thread is
	 * inside it. One that is keeps it here until close or exit. */
	if (host_netdev() &&
	    __atomic_load_n(&s->refs, __ATOMIC_ACQUIRE) == pl_fdtab_count(s))
		pl_sock_release_ep(s);
}

void pl_fork_prepare(void)
{
	shared_at_fork = 0;
	if (__atomic_load_n(&pl_state, __ATOMIC_ACQUIRE) != PL_RUNNING ||
	    pl_inside > 0 || !pl_ctx_open())
		return;
	pl_live_each(prepare_one, NULL);
}

/* --- claim ---------------------------------------------------------- */

/* The kernel socket's options the endpoint acts on. */
static void options_to_ep(struct pl_sock *s, struct qps_ep *ep)
{
	static const struct {
		int level, name, opt;
	} map[] = {
		{ SOL_SOCKET, SO_REUSEADDR, QPS_OPT_REUSEADDR },
		{ SOL_SOCKET, SO_REUSEPORT, QPS_OPT_REUSEPORT },
		{ SOL_SOCKET, SO_PRIORITY, QPS_OPT_PRIORITY },
		{ SOL_SOCKET, SO_BUSY_POLL, QPS_OPT_BUSY_POLL },
		{ IPPROTO_IP, IP_TTL, QPS_OPT_TTL },
		{ IPPROTO_IP, IP_TOS, QPS_OPT_TOS },
		{ IPPROTO_IP, IP_MULTICAST_TTL, QPS_OPT_MULTICAST_TTL },
		{ IPPROTO_IP, IP_MULTICAST_LOOP, QPS_OPT_MULTICAST_LOOP },
	};
	static const int tmo[2][2] = {
		{ SO_RCVTIMEO, QPS_OPT_RCVTIMEO },
		{ SO_SNDTIMEO, QPS_OPT_SNDTIMEO },
	};
	size_t i;
	int v;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		socklen_t l = sizeof(v);

		v = 0;
		if (pl_real.getsockopt(s->kfd, map[i].level, map[i].name, &v,
				       &l) < 0)
			continue;
		if (map[i].opt == QPS_OPT_PRIORITY && v > 15)
			v = 15;
		if (map[i].opt == QPS_OPT_TOS)
			v &= 0xff;
		qps_setopt(ep, map[i].opt, &v, sizeof(v));
	}
	for (i = 0; i < 2; i++) {
		struct timeval tv;
		socklen_t l = sizeof(tv);
		long long ms;

		if (pl_real.getsockopt(s->kfd, SOL_SOCKET, tmo[i][0], &tv,
				       &l) < 0)
			continue;
		ms = (long long)tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000;
		v = ms > 0x7fffffff ? 0x7fffffff : (int)ms;
		qps_setopt(ep, tmo[i][1], &v, sizeof(v));
	}
	(void)pl_rcvbuf_apply(ep, s->rcvbuf);
	v = s->pktinfo || s->ts || s->tsns;
	qps_setopt(ep, QPS_OPT_PKTINFO, &v, sizeof(v));
}

static void requeue_handoff(struct pl_sock *s, struct pl_share *sh,
			    struct qps_ep *ep)
{
	uint32_t off = 0;
	int n = 0;

	while (off + sizeof(struct pl_handoff) <= sh->used) {
		struct pl_handoff h;
		struct qps_rxmsg m = { 0 };

		memcpy(&h, sh->data + off, sizeof(h));
		m.buf = sh->data + off + sizeof(h);
		m.len = h.len;
		m.src = h.src;
		m.dst = h.dst;
		if (qps_ep_requeue(ep, &m) == 0)
			n++;
		off += (uint32_t)((sizeof(h) + h.len + 7) & ~(size_t)7);
	}
	if (sh->lost)
		pl_log("fd %d: %u queued datagrams did not fit the hand-over "
		       "between processes and were dropped", s->fd, sh->lost);
	if (pl_conf.debug && n)
		pl_log("fd %d: %d datagrams taken over", s->fd, n);
	sh->used = 0;
	sh->lost = 0;
}

/* What the kernel socket queued while nobody served it. */
static void requeue_gap(struct pl_sock *s, struct qps_ep *ep, char *buf)
{
	char cbuf[CMSG_SPACE(sizeof(struct in_pktinfo))];

	for (;;) {
		struct qps_rxmsg m = { 0 };
		struct iovec iov = { buf, PL_HANDOFF_MAX };
		struct msghdr mh = {
			.msg_name = &m.src, .msg_namelen = sizeof(m.src),
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
		};
		struct cmsghdr *c;
		ssize_t r = pl_real.recvmsg(s->kfd, &mh, MSG_DONTWAIT);

		if (r < 0)
			break;
		for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == IPPROTO_IP &&
			    c->cmsg_type == IP_PKTINFO) {
				struct in_pktinfo pi;

				memcpy(&pi, CMSG_DATA(c), sizeof(pi));
				m.dst.sin_family = AF_INET;
				m.dst.sin_addr = pi.ipi_addr;
			}
		m.buf = buf;
		m.len = (size_t)r;
		(void)qps_ep_requeue(ep, &m);
	}
}

static void gap_close(struct pl_sock *s, struct pl_share *sh,
		      struct qps_ep *ep)
{
	char *buf;

	if (!sh->gap)
		return;
	kernel_joins(s->kfd, sh, false);
	buf = malloc(PL_HANDOFF_MAX);
	if (buf) {
		requeue_gap(s, ep, buf);
		free(buf);
	}
	sh->gap = false;
}

static int take(struct pl_sock *s, struct pl_share *sh)
{
	int fl = pl_real.fcntl(s->kfd, F_GETFL), ret, i;
	struct qps_ep *ep = NULL;
	struct qps_ctx *ctx;

	/* emu: the address goes with the socket, and the process that let
	 * it go may still be leaving the wire (its exit teardown lets go
	 * of its sockets before it destroys its context). */
	if (pl_ctx_info.emu && sh->local.sin_port && !pl_ctx_open()) {
		ctx = pl_ctx_get_at(sh->ctx_addr);
		if (!ctx)
			return -EAGAIN;
	} else {
		ctx = pl_ctx_get();
	}
	if (!ctx)
		return -ENODEV;
	if (pl_ctx_info.emu && sh->local.sin_port &&
	    pl_ctx_info.addr.s_addr != sh->ctx_addr.s_addr)
		return -EADDRNOTAVAIL;
	ret = qps_ep_create(ctx, QPS_EP_DGRAM, &ep);
	if (!ret)
		ret = qps_ep_adopt_fd(ep, s->kfd);
	if (!ret)
		ret = pl_sock_host_rx(ep);
	if (!ret && fl >= 0 && (fl & O_NONBLOCK))
		ret = qps_set_nonblock(ep, 1);
	if (ret < 0)
		goto fail;
	options_to_ep(s, ep);
	s->npending = 0;
	s->npblock = 0;
	if (sh->local.sin_port) {
		/* The bind puts the kernel socket's filter back (host_port.c),
		 * so the gap's queue stops growing before it is drained. */
		ret = qps_bind(ep, (struct sockaddr *)&sh->local,
			       sizeof(sh->local));
		if (ret < 0)
			goto fail;
		for (i = 0; i < sh->ngroups; i++)
			if (qps_join(ep, &sh->groups[i], sizeof(sh->groups[i])) < 0)
				pl_log("fd %d: membership not taken over",
				       s->fd);
		requeue_handoff(s, sh, ep);
		gap_close(s, sh, ep);
	} else {
		for (i = 0; i < sh->ngroups && i < PL_PENDING_JOINS; i++)
			s->pending[s->npending++] = sh->groups[i];
	}
	if (sh->peer.sin_port) {
		ret = qps_connect(ep, (struct sockaddr *)&sh->peer,
				  sizeof(sh->peer));
		if (ret < 0)
			goto fail;
	}
	s->fresh = !sh->local.sin_port && !sh->peer.sin_port;
	/* Release: other threads of ours read s->ep after s->pid (pl_get). */
	s->ep = ep;
	__atomic_store_n(&s->pid, pl_self, __ATOMIC_RELEASE);
	if (pl_conf.debug)
		pl_log("fd %d: taken over by process %d", s->fd, (int)pl_self);
	return 0;
fail:
	if (ep)
		qps_ep_close(ep);
	return ret;
}

bool pl_fork_claim(struct pl_sock *s)
{
	struct pl_share *sh = s->share;
	pid_t me = pl_self;
	bool ok = false;
	int cur;

	pthread_mutex_lock(&claim_lock);
	if (pl_fork_served(s)) {
		pthread_mutex_unlock(&claim_lock);
		return true;
	}
	/* Acquire: pairs with the releasing owner's store of 0. */
	cur = __atomic_load_n(&sh->owner, __ATOMIC_ACQUIRE);
	if ((cur == 0 || cur == me || !pid_alive(cur)) &&
	    __atomic_compare_exchange_n(&sh->owner, &cur, me, false,
					__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		int ret;

		pl_inside++;
		ret = take(s, sh);
		pl_inside--;
		ok = ret == 0;
		if (!ok) {
			if (pl_conf.debug)
				pl_log("fd %d: not taken over (%s): the kernel "
				       "socket's", s->fd, strerrordesc_np(-ret));
			__atomic_store_n(&sh->owner, 0, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&claim_lock);
	return ok;
}

/* The kernel socket's SO_RCVTIMEO or SO_SNDTIMEO, in ns; 0: none. */
static int64_t timeo_ns(int kfd, bool rx)
{
	struct timeval tv;
	socklen_t l = sizeof(tv);

	if (pl_real.getsockopt(kfd, SOL_SOCKET, rx ? SO_RCVTIMEO : SO_SNDTIMEO,
			       &tv, &l) < 0)
		return 0;
	return (int64_t)tv.tv_sec * 1000000000 + (int64_t)tv.tv_usec * 1000;
}

bool pl_fork_wait(struct pl_sock *s, long *r, int flags, bool rx,
		  int64_t *deadline)
{
	struct timespec step = { 0, PL_FORK_STEP_MS * 1000000L };
	int fl;

	if (*r != -ECHILD || !s->share)
		return false;
	fl = pl_real.fcntl(s->kfd, F_GETFL);
	if ((flags & MSG_DONTWAIT) || (fl >= 0 && (fl & O_NONBLOCK))) {
		*r = -EAGAIN;
		return false;
	}
	if (*deadline == 0) {
		int64_t t = timeo_ns(s->kfd, rx);

		*deadline = t ? pl_now_ns() + t : -1;
	}
	for (;;) {
		if (pl_fork_claim(s))
			return true;
		if (*deadline > 0 && pl_now_ns() >= *deadline) {
			*r = -EAGAIN;
			return false;
		}
		if (nanosleep(&step, NULL) < 0) {
			*r = -EINTR;
			return false;
		}
	}
}

bool pl_fork_atfork_child(void)
{
	pthread_mutex_init(&claim_lock, NULL);
	return shared_at_fork > 0;
}
