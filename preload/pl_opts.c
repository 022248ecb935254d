// SPDX-License-Identifier: MIT
/*
 * Socket options. An option with a QPS_OPT_* counterpart is given to the
 * kernel socket first, so the application gets the kernel's validation,
 * errno and getsockopt() answer, and then to the endpoint, which is what
 * acts on it. Options the endpoint has no use for go to the kernel
 * socket alone (it never sends or receives, so they are harmless there).
 * Exceptions, each explained where handled: SO_RCVBUF, SO_ERROR,
 * memberships (pl_mcast.c), IP_MULTICAST_IF on emu, and what qpsock
 * cannot honour (pl_unsup.c).
 */
#include <arpa/inet.h>
#include <limits.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

#define PL_RCVBUF_MIN 2304	/* the kernel's floor (SOCK_MIN_RCVBUF) */

/* The endpoint's queue is bounded by SO_RCVBUF's bytes, counted per
 * datagram as QPS_RX_TRUESIZE, not by a number of datagrams. */
int pl_rcvbuf_apply(struct qps_ep *ep, int rcvbuf)
{
	int max = QPS_RCVBUF_MAX, ret;

	if (rcvbuf <= 0)
		return 0;
	ret = qps_setopt(ep, QPS_OPT_RCVBUF, &max, sizeof(max));
	if (!ret)
		ret = qps_setopt(ep, QPS_OPT_RCVBUF_BYTES, &rcvbuf,
				 sizeof(rcvbuf));
	return ret;
}

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
	return pl_rcvbuf_apply(s->ep, s->rcvbuf);
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

static int ip_level(struct pl_sock *s, int fd, int name, const void *val,
		    socklen_t len)
{
	int v = 0;

	switch (name) {
	case IP_ADD_MEMBERSHIP:
	case IP_DROP_MEMBERSHIP:
	case IP_ADD_SOURCE_MEMBERSHIP:
	case IP_DROP_SOURCE_MEMBERSHIP:
	case IP_BLOCK_SOURCE:
	case IP_UNBLOCK_SOURCE:
	case IP_MSFILTER:
	case MCAST_JOIN_GROUP:
	case MCAST_LEAVE_GROUP:
	case MCAST_JOIN_SOURCE_GROUP:
	case MCAST_LEAVE_SOURCE_GROUP:
	case MCAST_BLOCK_SOURCE:
	case MCAST_UNBLOCK_SOURCE:
	case MCAST_MSFILTER:
		return pl_mcast_setopt(s, fd, name, val, len);
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
		/* Here it names nothing or the context (another interface
		 * is pl_unsup.c's). emu's address is on no kernel
		 * interface, the kernel would refuse it: the context is
		 * the one interface. */
		if (!pl_ctx_info.emu || !val || len < sizeof(struct in_addr))
			break;
		return 0;
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
	if (pl_unsup_setopt(s, fd, level, name, val, len, &r)) {
		/* Fallen back or refused: done. */
	} else if (level == SOL_SOCKET) {
		r = sol_socket(s, fd, name, val, len);
	} else if (level == IPPROTO_IP) {
		r = ip_level(s, fd, name, val, len);
	} else {
		r = pl_real.setsockopt(fd, level, name, val, len) < 0 ?
		    -errno : 0;
	}
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
	} else if (level == IPPROTO_IP &&
		   (name == MCAST_MSFILTER || name == IP_MSFILTER)) {
		r = pl_mcast_getopt(s, name, val, len);
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
