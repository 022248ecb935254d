// SPDX-License-Identifier: MIT
/*
 * Socket options. An option with a QPS_OPT_* counterpart is given to the
 * kernel socket first, so the application gets the kernel's validation,
 * errno and getsockopt() answer, and then to the endpoint, which is what
 * acts on it. Options the endpoint has no use for go to the kernel
 * socket alone (it never sends or receives, so they are harmless there).
 * Exceptions, each explained where handled: SO_RCVBUF, SO_ERROR,
 * memberships, and IP_MULTICAST_IF on emu.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

/* What one datagram costs a kernel receive buffer, roughly: SO_RCVBUF
 * bytes become a receive queue of this many datagrams fewer. */
#define PL_RCVBUF_TRUESIZE 2048
#define PL_RCVBUF_MIN 2304	/* the kernel's floor (SOCK_MIN_RCVBUF) */

static int opt_int(const void *val, socklen_t len, int *v)
{
	if (!val)
		return -EFAULT;
	if (len >= sizeof(int)) {
		memcpy(v, val, sizeof(int));
		return 0;
	}
	/* IP_MULTICAST_TTL/LOOP and IP_TTL also take one byte. */
	if (len >= 1) {
		*v = *(const unsigned char *)val;
		return 0;
	}
	return -EINVAL;
}

static int set_rcvbuf(struct pl_sock *s, const void *val, socklen_t len,
		      bool force)
{
	int v;

	if (!val)
		return -EFAULT;
	if (len < sizeof(int))
		return -EINVAL;
	memcpy(&v, val, sizeof(int));
	if (force && geteuid() != 0)
		return -EPERM;
	/* As the kernel: the value taken as unsigned and capped by
	 * rmem_max (unless forced), doubled for its bookkeeping, never
	 * below its floor. */
	if (!force && (v < 0 || v > pl_conf.rmem_max))
		v = pl_conf.rmem_max;
	if (v < 0)
		v = 0;
	if (v > INT_MAX / 2)
		v = INT_MAX / 2;
	s->rcvbuf = 2 * v < PL_RCVBUF_MIN ? PL_RCVBUF_MIN : 2 * v;
	/* Never passed to the kernel socket: on packet it holds the port
	 * with the smallest buffer so it never queues anything. */
	v = s->rcvbuf / PL_RCVBUF_TRUESIZE;
	if (v < 1)
		v = 1;
	return qps_setopt(s->ep, QPS_OPT_RCVBUF, &v, sizeof(v));
}

static int tv_ms(const void *val, socklen_t len, int *ms)
{
	struct timeval tv;
	long long m;

	if (len < sizeof(tv))
		return -EINVAL;
	memcpy(&tv, val, sizeof(tv));
	m = (long long)tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000;
	*ms = m > 0x7fffffff ? 0x7fffffff : (int)m;
	return 0;
}

static int pktinfo_sync(struct pl_sock *s)
{
	int on = s->pktinfo || s->ts || s->tsns;

	return qps_setopt(s->ep, QPS_OPT_PKTINFO, &on, sizeof(on));
}

/* ip_mreq, ip_mreqn or ip_mreq_source to the core's form. */
static int mreq_of(int opt, const void *val, socklen_t len,
		   struct qps_mreq *m)
{
	memset(m, 0, sizeof(*m));
	if (!val)
		return -EFAULT;
	if (opt == IP_ADD_SOURCE_MEMBERSHIP ||
	    opt == IP_DROP_SOURCE_MEMBERSHIP) {
		struct ip_mreq_source r;

		if (len < sizeof(r))
			return -EINVAL;
		memcpy(&r, val, sizeof(r));
		m->group = r.imr_multiaddr;
		m->iface = r.imr_interface;
		m->source = r.imr_sourceaddr;
		return 0;
	}
	if (len >= sizeof(struct ip_mreqn)) {
		struct ip_mreqn r;

		memcpy(&r, val, sizeof(r));
		m->group = r.imr_multiaddr;
		m->iface = r.imr_address;
		/* A context is one interface, QPS_IFINDEX to the core. */
		if (r.imr_ifindex == pl_ctx_info.ifindex)
			m->ifindex = QPS_IFINDEX;
		else if (r.imr_ifindex)
			m->ifindex = -1;
		return 0;
	}
	if (len < sizeof(struct ip_mreq))
		return -EINVAL;
	{
		struct ip_mreq r;

		memcpy(&r, val, sizeof(r));
		m->group = r.imr_multiaddr;
		m->iface = r.imr_interface;
	}
	return 0;
}

static bool unbound(struct pl_sock *s)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);

	return qps_getsockname(s->ep, (struct sockaddr *)&a, &l) == 0 &&
	       a.sin_port == 0;
}

static int pending_find(struct pl_sock *s, const struct qps_mreq *m,
			bool any_source)
{
	int i;

	for (i = 0; i < s->npending; i++)
		if (s->pending[i].group.s_addr == m->group.s_addr &&
		    (any_source ||
		     s->pending[i].source.s_addr == m->source.s_addr))
			return i;
	return -1;
}

/* Before bind: kept, checked as the kernel would (a group; not twice). */
static int membership_pending(struct pl_sock *s, bool add,
			      const struct qps_mreq *m)
{
	if (!IN_MULTICAST(ntohl(m->group.s_addr)))
		return -EINVAL;
	if (!add) {
		int i = pending_find(s, m, m->source.s_addr == INADDR_ANY);
		if (i < 0)
			return -EADDRNOTAVAIL;
		s->pending[i] = s->pending[--s->npending];
		return 0;
	}
	if (pending_find(s, m, false) >= 0)
		return -EADDRINUSE;
	if (s->npending == PL_PENDING_JOINS)
		return -ENOBUFS;
	s->pending[s->npending++] = *m;
	return 0;
}

void pl_joins_apply(struct pl_sock *s)
{
	int i;

	for (i = 0; i < s->npending; i++) {
		int ret = qps_join(s->ep, &s->pending[i], sizeof(s->pending[i]));
		if (ret < 0)
			pl_log("fd %d: membership asked before bind: %s", s->fd,
			       strerrordesc_np(-ret));
	}
	s->npending = 0;
}

/* The kernel binds an unbound socket to port 0 at its first send or
 * connect, and memberships it holds then take effect on that port (a
 * sockperf multicast client joins, never binds, and gets its replies
 * sent to the group at its ephemeral port). The same here: bound now,
 * so the joins are made before the datagram leaves. */
void pl_joins_autobind(struct pl_sock *s)
{
	struct sockaddr_in any = { .sin_family = AF_INET };
	int ret;

	if (!unbound(s)) {
		pl_joins_apply(s);
		return;
	}
	ret = qps_bind(s->ep, (struct sockaddr *)&any, sizeof(any));
	if (ret < 0) {
		pl_log("fd %d: memberships asked before bind: no port (%s)",
		       s->fd, strerrordesc_np(-ret));
		s->npending = 0;
		return;
	}
	pl_joins_apply(s);
}

static int membership(struct pl_sock *s, int opt, const void *val,
		      socklen_t len)
{
	bool add = opt == IP_ADD_MEMBERSHIP ||
		   opt == IP_ADD_SOURCE_MEMBERSHIP;
	struct qps_mreq m;
	int ret = mreq_of(opt, val, len, &m);

	if (ret < 0)
		return ret;
	/* The interface given by the application's address for it. */
	if (m.iface.s_addr == pl_ctx_info.addr.s_addr)
		m.iface.s_addr = INADDR_ANY;
	if (unbound(s))
		return membership_pending(s, add, &m);
	if (add)
		return qps_join(s->ep, &m, sizeof(m));
	return qps_leave(s->ep, &m, sizeof(m));
}

/* Kernel first; then @opt on the endpoint with @v. The endpoint may
 * refuse a value the kernel took (a range qpsock does not have): the
 * kernel's answer stands, the endpoint keeps what it had. */
static int both(struct pl_sock *s, int fd, int level, int name,
		const void *val, socklen_t len, int opt, int v)
{
	if (pl_real.setsockopt(fd, level, name, val, len) < 0)
		return -errno;
	qps_setopt(s->ep, opt, &v, sizeof(v));
	return 0;
}

static int sol_socket(struct pl_sock *s, int fd, int name, const void *val,
		      socklen_t len)
{
	int v = 0, ret;

	switch (name) {
	case SO_RCVBUF:
	case SO_RCVBUFFORCE:
		return set_rcvbuf(s, val, len, name == SO_RCVBUFFORCE);
	case SO_REUSEADDR:
	case SO_REUSEPORT:
	case SO_PRIORITY:
	case SO_BUSY_POLL:
		ret = opt_int(val, len, &v);
		if (ret < 0 || len < sizeof(int))
			break;
		return both(s, fd, SOL_SOCKET, name, val, len,
			    name == SO_REUSEADDR ? QPS_OPT_REUSEADDR :
			    name == SO_REUSEPORT ? QPS_OPT_REUSEPORT :
			    name == SO_PRIORITY ? QPS_OPT_PRIORITY :
			    QPS_OPT_BUSY_POLL,
			    name == SO_PRIORITY && v > 15 ? 15 : v);
	case SO_RCVTIMEO:
	case SO_SNDTIMEO:
		if (pl_real.setsockopt(fd, SOL_SOCKET, name, val, len) < 0)
			return -errno;
		if (tv_ms(val, len, &v) == 0) {
			qps_setopt(s->ep, name == SO_RCVTIMEO ?
				   QPS_OPT_RCVTIMEO : QPS_OPT_SNDTIMEO,
				   &v, sizeof(v));
			if (name == SO_RCVTIMEO)
				s->rcvtimeo = v != 0;
			else
				s->sndtimeo = v != 0;
		}
		return 0;
	case SO_TIMESTAMP:
	case SO_TIMESTAMPNS:
		if (pl_real.setsockopt(fd, SOL_SOCKET, name, val, len) < 0)
			return -errno;
		opt_int(val, len, &v);
		if (name == SO_TIMESTAMP)
			s->ts = v != 0;
		else
			s->tsns = v != 0;
		return pktinfo_sync(s);
	default:
		break;
	}
	return pl_real.setsockopt(fd, SOL_SOCKET, name, val, len) < 0 ?
	       -errno : 0;
}

static bool join_falls_back(struct pl_sock *s, int fd, int name,
			    const void *val, socklen_t len)
{
	char why[PL_WHY_MAX];
	struct qps_mreq m;

	/* Malformed: the endpoint gives the kernel's answer. */
	if (mreq_of(name, val, len, &m) < 0 ||
	    !IN_MULTICAST(ntohl(m.group.s_addr)) ||
	    !pl_policy_join(s, m.group, why, sizeof(why)))
		return false;
	pl_sock_fallback(fd, s, why);
	return true;
}

static int ip_level(struct pl_sock *s, int fd, int name, const void *val,
		    socklen_t len)
{
	struct in_addr a;
	int v = 0;

	switch (name) {
	case IP_ADD_MEMBERSHIP:
	case IP_ADD_SOURCE_MEMBERSHIP:
		/* A socket not yet decided decides at its first join
		 * (pl_policy.c); one that goes to the kernel joins there. */
		if (s->fresh && join_falls_back(s, fd, name, val, len))
			return pl_real.setsockopt(fd, IPPROTO_IP, name, val,
						  len) < 0 ? -errno : 0;
		/* fall through */
	case IP_DROP_MEMBERSHIP:
	case IP_DROP_SOURCE_MEMBERSHIP:
		/* The endpoint's alone: on packet the core's joins make
		 * the kernel send IGMP (common/igmp.c); on emu a kernel
		 * join would send IGMP on a real link. */
		return membership(s, name, val, len);
	case IP_PKTINFO:
		if (pl_real.setsockopt(fd, IPPROTO_IP, name, val, len) < 0)
			return -errno;
		opt_int(val, len, &v);
		s->pktinfo = v != 0;
		return pktinfo_sync(s);
	case IP_TTL:
	case IP_TOS:
	case IP_MULTICAST_TTL:
	case IP_MULTICAST_LOOP:
		if (opt_int(val, len, &v) < 0)
			break;
		return both(s, fd, IPPROTO_IP, name, val, len,
			    name == IP_TTL ? QPS_OPT_TTL :
			    name == IP_TOS ? QPS_OPT_TOS :
			    name == IP_MULTICAST_LOOP ? QPS_OPT_MULTICAST_LOOP :
			    QPS_OPT_MULTICAST_TTL, name == IP_TOS ? v & 0xff : v);
	case IP_MULTICAST_IF:
		/* emu's address is on no kernel interface: the kernel
		 * would refuse it. The context is the one interface. */
		if (!pl_ctx_info.emu || !val || len < sizeof(a))
			break;
		memcpy(&a, val, sizeof(a));
		if (len >= sizeof(struct ip_mreqn))
			a = ((const struct ip_mreqn *)val)->imr_address;
		return a.s_addr == INADDR_ANY ||
		       a.s_addr == pl_ctx_info.addr.s_addr ? 0 :
		       -EADDRNOTAVAIL;
	default:
		break;
	}
	return pl_real.setsockopt(fd, IPPROTO_IP, name, val, len) < 0 ?
	       -errno : 0;
}

PL_EXPORT int setsockopt(int fd, int level, int name, const void *val,
			 socklen_t len)
{
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return (int)syscall(SYS_setsockopt, fd, level, name, val, len);
	s = pl_get(fd);
	if (!s)
		return pl_real.setsockopt(fd, level, name, val, len);
	if (level == SOL_SOCKET)
		r = sol_socket(s, fd, name, val, len);
	else if (level == IPPROTO_IP)
		r = ip_level(s, fd, name, val, len);
	else
		r = pl_real.setsockopt(fd, level, name, val, len) < 0 ?
		    -errno : 0;
	pl_put(s);
	return (int)pl_ret(r);
}

/* An int answer, copied as getsockopt(2) does (truncated to *len). */
static int put_int(int v, void *val, socklen_t *len)
{
	socklen_t n;

	if (!val || !len)
		return -EFAULT;
	if ((int)*len < 0)
		return -EINVAL;
	n = *len < sizeof(int) ? *len : sizeof(int);
	memcpy(val, &v, n);
	*len = n;
	return 0;
}

PL_EXPORT int getsockopt(int fd, int level, int name, void *val,
			 socklen_t *len)
{
	struct pl_sock *s;
	socklen_t l = sizeof(int);
	int v = 0;
	long r;

	if (!pl_sym_ready())
		return (int)syscall(SYS_getsockopt, fd, level, name, val, len);
	s = pl_get(fd);
	if (!s)
		return pl_real.getsockopt(fd, level, name, val, len);
	if (level == SOL_SOCKET && name == SO_RCVBUF) {
		r = put_int(s->rcvbuf, val, len);
	} else if (level == SOL_SOCKET && name == SO_ERROR) {
		r = qps_getopt(s->ep, QPS_OPT_ERROR, &v, &l);
		if (r == 0)
			r = put_int(v, val, len);
	} else {
		r = pl_real.getsockopt(fd, level, name, val, len) < 0 ?
		    -errno : 0;
	}
	pl_put(s);
	return (int)pl_ret(r);
}
