// SPDX-License-Identifier: MIT
/*
 * The receive family. Everything funnels into qps_recvmsg(), which gives
 * the sender and, for sockets that asked (IP_PKTINFO, SO_TIMESTAMP,
 * SO_TIMESTAMPNS), the destination and receive time for the control
 * messages. Several buffers (readv, recvmsg) receive into one and are
 * scattered after.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

#define PL_SCATTER_STACK 2048

/* Kernel UDP flags to the core's. MSG_WAITALL and MSG_CMSG_CLOEXEC mean
 * nothing for UDP without fd passing and are ignored, as the kernel
 * does. MSG_ERRQUEUE is the kernel socket's (errq_msg). */
static int rx_flags(int flags, int *qf)
{
	if (flags & MSG_OOB)
		return -EOPNOTSUPP;
	*qf = flags & (QPS_MSG_PEEK | QPS_MSG_TRUNC | QPS_MSG_DONTWAIT);
	return 0;
}

/* The endpoint has no error queue: what could fill one (IP_RECVERR,
 * SO_TIMESTAMPING, SO_ZEROCOPY) is refused once the socket moved data,
 * and a fresh socket that asks falls back (pl_unsup.c). The kernel
 * socket's queue is then the socket's, empty but for its own sends to
 * this host, and the kernel's answer is exact: EAGAIN when empty,
 * never a wait. */
static long errq_msg(struct pl_sock *s, struct msghdr *msg, int flags)
{
	ssize_t r = pl_real.recvmsg(s->kfd, msg, flags);

	return r < 0 ? -errno : r;
}

/* A receive timeout is EAGAIN on a kernel socket. */
static long rx_ret(long r)
{
	return r == -ETIMEDOUT ? -EAGAIN : r;
}

static void cmsg_put(struct msghdr *msg, struct cmsghdr **c, size_t *used,
		     int level, int type, const void *data, size_t len)
{
	size_t space = CMSG_SPACE(len);

	if (!*c || *used + CMSG_LEN(len) > msg->msg_controllen) {
		msg->msg_flags |= MSG_CTRUNC;
		return;
	}
	(*c)->cmsg_level = level;
	(*c)->cmsg_type = type;
	(*c)->cmsg_len = CMSG_LEN(len);
	memcpy(CMSG_DATA(*c), data, len);
	*used += space > msg->msg_controllen - *used ?
		 msg->msg_controllen - *used : space;
	*c = CMSG_NXTHDR(msg, *c);
}

static void cmsgs(struct pl_sock *s, struct msghdr *msg,
		  const struct qps_rxmsg *m)
{
	struct cmsghdr *c = msg->msg_controllen >= sizeof(struct cmsghdr) ?
			    CMSG_FIRSTHDR(msg) : NULL;
	size_t used = 0;

	if (!(m->flags & QPS_RXMSG_PKTINFO)) {
		msg->msg_controllen = 0;
		return;
	}
	if (s->pktinfo) {
		struct in_pktinfo pi = {
			.ipi_ifindex = pl_ctx_info.ifindex,
			.ipi_spec_dst = pl_ctx_info.addr,
			.ipi_addr = m->dst.sin_addr,
		};

		cmsg_put(msg, &c, &used, IPPROTO_IP, IP_PKTINFO, &pi,
			 sizeof(pi));
	}
	if (s->ts) {
		struct timeval tv = {
			.tv_sec = (time_t)(m->ts_ns / 1000000000u),
			.tv_usec = (suseconds_t)(m->ts_ns % 1000000000u / 1000),
		};

		cmsg_put(msg, &c, &used, SOL_SOCKET, SCM_TIMESTAMP, &tv,
			 sizeof(tv));
	}
	if (s->tsns) {
		struct timespec ts = {
			.tv_sec = (time_t)(m->ts_ns / 1000000000u),
			.tv_nsec = (long)(m->ts_ns % 1000000000u),
		};

		cmsg_put(msg, &c, &used, SOL_SOCKET, SCM_TIMESTAMPNS, &ts,
			 sizeof(ts));
	}
	msg->msg_controllen = used;
}

static void name_put(struct msghdr *msg, const struct sockaddr_in *src)
{
	if (!msg->msg_name)
		return;
	memcpy(msg->msg_name, src, msg->msg_namelen < sizeof(*src) ?
	       msg->msg_namelen : sizeof(*src));
	msg->msg_namelen = sizeof(*src);
}

static void scatter(const struct msghdr *msg, const char *buf, size_t n)
{
	size_t i;

	for (i = 0; i < msg->msg_iovlen && n; i++) {
		size_t k = msg->msg_iov[i].iov_len < n ? msg->msg_iov[i].iov_len : n;
		memcpy(msg->msg_iov[i].iov_base, buf, k);
		buf += k;
		n -= k;
	}
}

ssize_t pl_recvmsg_sock(struct pl_sock *s, struct msghdr *msg, int flags)
{
	char stack[PL_SCATTER_STACK];
	struct qps_rxmsg m = { 0 };
	int64_t deadline = 0;
	size_t i, total = 0;
	int qf;
	long r = rx_flags(flags, &qf);

	if (r < 0)
		return r;
	if (!msg || (msg->msg_iovlen && !msg->msg_iov))
		return -EFAULT;
	if (__builtin_expect(flags & MSG_ERRQUEUE, 0))
		return errq_msg(s, msg, flags);
	if (msg->msg_iovlen > IOV_MAX)
		return -EMSGSIZE;
	for (i = 0; i < msg->msg_iovlen; i++)
		total += msg->msg_iov[i].iov_len;
	if (msg->msg_iovlen == 1) {
		m.buf = msg->msg_iov[0].iov_base;
	} else if (total <= sizeof(stack)) {
		m.buf = stack;
	} else {
		m.buf = malloc(total);
		if (!m.buf)
			return -ENOBUFS;
	}
	m.len = total;
	/* The receive is a cancellation point (pl_put_cleanup). */
	pthread_cleanup_push(free, m.buf != stack && msg->msg_iovlen > 1 ?
			     m.buf : NULL);
	do {
		pl_sig_clear();
		r = qps_recvmsg(s->ep, &m, qf);
	} while ((r == -EINTR && !s->rcvtimeo && pl_sig_restart()) ||
		 pl_fork_wait(s, &r, flags, true, &deadline));
	pthread_cleanup_pop(0);
	r = rx_ret(r);
	if (r >= 0) {
		if (msg->msg_iovlen > 1)
			scatter(msg, m.buf, (size_t)r < total ? (size_t)r :
				total);
		msg->msg_flags = m.flags & QPS_RXMSG_TRUNC ? MSG_TRUNC : 0;
		name_put(msg, &m.src);
		if (msg->msg_control)
			cmsgs(s, msg, &m);
		else
			msg->msg_controllen = 0;
	}
	if (msg->msg_iovlen > 1 && m.buf != stack)
		free(m.buf);
	return r;
}

PL_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return syscall(SYS_recvmsg, fd, msg, flags);
	s = pl_get(fd);
	if (!s)
		return pl_real.recvmsg(fd, msg, flags);
	pthread_cleanup_push(pl_put_cleanup, s);
	r = pl_recvmsg_sock(s, msg, flags);
	pthread_cleanup_pop(1);
	return pl_ret(r);
}

static long recvfrom_sock(struct pl_sock *s, void *buf, size_t len,
			  int flags, struct sockaddr *src, socklen_t *slen)
{
	int64_t deadline = 0;
	int qf;
	long r = rx_flags(flags, &qf);

	if (r < 0)
		return r;
	if (__builtin_expect(flags & MSG_ERRQUEUE, 0)) {
		ssize_t k = pl_real.recvfrom(s->kfd, buf, len, flags, src,
					     slen);

		return k < 0 ? -errno : k;
	}
	/* As the kernel: a handler with SA_RESTART restarts the call,
	 * unless the socket has a receive timeout. */
	do {
		pl_sig_clear();
		r = src ? qps_recvfrom(s->ep, buf, len, qf, src, slen) :
			  qps_recv(s->ep, buf, len, qf);
	} while ((r == -EINTR && !s->rcvtimeo && pl_sig_restart()) ||
		 pl_fork_wait(s, &r, flags, true, &deadline));
	return rx_ret(r);
}

PL_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
			   struct sockaddr *src, socklen_t *slen)
{
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return syscall(SYS_recvfrom, fd, buf, len, flags, src, slen);
	s = pl_get(fd);
	if (!s)
		return pl_real.recvfrom(fd, buf, len, flags, src, slen);
	pthread_cleanup_push(pl_put_cleanup, s);
	r = recvfrom_sock(s, buf, len, flags, src, slen);
	pthread_cleanup_pop(1);
	return pl_ret(r);
}

PL_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
	s = pl_get(fd);
	if (!s)
		return pl_real.recv(fd, buf, len, flags);
	pthread_cleanup_push(pl_put_cleanup, s);
	r = recvfrom_sock(s, buf, len, flags, NULL, NULL);
	pthread_cleanup_pop(1);
	return pl_ret(r);
}

PL_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return syscall(SYS_read, fd, buf, len);
	s = pl_get(fd);
	if (!s)
		return pl_real.read(fd, buf, len);
	/* As the kernel's read(): nothing asked, nothing taken. */
	pthread_cleanup_push(pl_put_cleanup, s);
	r = len ? recvfrom_sock(s, buf, len, 0, NULL, NULL) : 0;
	pthread_cleanup_pop(1);
	return pl_ret(r);
}

PL_EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov };
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return syscall(SYS_readv, fd, iov, n);
	s = pl_get(fd);
	if (!s)
		return pl_real.readv(fd, iov, n);
	pthread_cleanup_push(pl_put_cleanup, s);
	if (n < 0) {
		r = -EINVAL;
	} else {
		msg.msg_iovlen = (size_t)n;
		r = pl_recvmsg_sock(s, &msg, 0);
	}
	pthread_cleanup_pop(1);
	return pl_ret(r);
}

/* As the kernel: MSG_WAITFORONE makes every receive after the first
 * non-blocking, and the timeout is looked at only after each datagram
 * (recvmmsg(2), BUGS): the call returns once it has passed, and what is
 * left of it is written back when something was received. */
PL_EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags,
		       struct timespec *timeout)
{
	struct pl_sock *s;
	int64_t end = 0;
	unsigned int i;
	long r = 0;

	if (!pl_sym_ready())
		return (int)syscall(SYS_recvmmsg, fd, v, n, flags, timeout);
	s = pl_get(fd);
	if (!s)
		return pl_real.recvmmsg(fd, v, n, flags, timeout);
	if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
			timeout->tv_nsec >= 1000000000)) {
		pl_put(s);
		errno = EINVAL;
		return -1;
	}
	if (timeout)
		end = pl_now_ns() + timeout->tv_sec * 1000000000 +
		      timeout->tv_nsec;
	if (n > UIO_MAXIOV)
		n = UIO_MAXIOV;
	pthread_cleanup_push(pl_put_cleanup, s);
	for (i = 0; i < n;) {
		int f = flags & ~MSG_WAITFORONE;

		if (i > 0 && (flags & MSG_WAITFORONE))
			f |= MSG_DONTWAIT;
		r = pl_recvmsg_sock(s, &v[i].msg_hdr, f);
		if (r < 0)
			break;
		v[i++].msg_len = (unsigned int)r;
		/* As the kernel: the timeout is looked at after each
		 * datagram (never while one is awaited), and what is left
		 * of it is written back. */
		if (timeout) {
			int64_t left = end - pl_now_ns();

			if (left < 0)
				left = 0;
			timeout->tv_sec = left / 1000000000;
			timeout->tv_nsec = left % 1000000000;
			if (!left)
				break;
		}
	}
	pthread_cleanup_pop(1);
	return i ? (int)i : (int)pl_ret(r);
}

PL_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen,
			     int flags)
{
	if (len > buflen)
		__chk_fail();
	return recv(fd, buf, len, flags);
}

PL_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len,
				 size_t buflen, int flags,
				 struct sockaddr *from, socklen_t *fromlen)
{
	if (len > buflen)
		__chk_fail();
	return recvfrom(fd, buf, len, flags, from, fromlen);
}

PL_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		__chk_fail();
	return read(fd, buf, len);
}
