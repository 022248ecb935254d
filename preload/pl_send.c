// SPDX-License-Identifier: MIT
/*
 * The send family. Several buffers (writev, sendmsg) are gathered into
 * one datagram first: a qpsock send is one contiguous payload. sendmmsg
 * of single-buffer messages goes through qps_sendmmsg, one doorbell per
 * send queue for the batch.
 */
#include <limits.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

#define PL_GATHER_STACK 2048
#define PL_MMSG_CHUNK 64

/* Kernel UDP flags to the core's. MSG_MORE corks on a kernel UDP socket
 * (appends to one pending datagram), a meaning qpsock's MSG_MORE does
 * not have: refused rather than silently sent apart. */
static int tx_flags(int flags, int *qf)
{
	if (flags & (MSG_OOB | MSG_MORE))
		return -EOPNOTSUPP;
	*qf = (flags & MSG_DONTWAIT) ? QPS_MSG_DONTWAIT : 0;
	return 0;
}

static long sent(struct pl_sock *s, long r, int flags)
{
	if (r >= 0)
		s->fresh = false;
	/* As the kernel: EPIPE after shutdown(SHUT_WR) also raises
	 * SIGPIPE unless the caller asked not to. */
	if (r == -EPIPE && !(flags & MSG_NOSIGNAL))
		(void)raise(SIGPIPE);
	return r;
}

/* A destination this host answers itself (loopback; on packet and verbs
 * the context's own address, which a frame sent on the wire never
 * reaches): the kernel socket, bound where the endpoint is
 * (QPS_OPT_HOST_RX), sends it from the socket's port. */
static bool host_local(const struct sockaddr *dest, socklen_t dlen)
{
	struct sockaddr_in a;

	if (!dest || dlen < sizeof(a) || dest->sa_family != AF_INET)
		return false;
	memcpy(&a, dest, sizeof(a));
	return (ntohl(a.sin_addr.s_addr) >> 24) == 127 ||
	       (!pl_ctx_info.emu && a.sin_addr.s_addr == pl_ctx_info.addr.s_addr);
}

static bool host_bound(struct pl_sock *s)
{
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);

	/* Unbound there (emu, whose port the host had taken): a reply
	 * from another port would be no reply. */
	return pl_real.getsockname(s->kfd, (struct sockaddr *)&me, &ml) == 0 &&
	       me.sin_port != 0;
}

static long send_host(struct pl_sock *s, const void *buf, size_t len,
		      int flags, const struct sockaddr *dest, socklen_t dlen)
{
	ssize_t r;

	if (!host_bound(s))
		return -ENETUNREACH;
	r = pl_real.sendto(s->kfd, buf, len, flags, dest, dlen);
	return r < 0 ? -errno : r;
}

/* Segmented by the kernel socket, @gso bytes a datagram. Its only
 * control message: the others are dropped as on the device's path (an
 * IP_PKTINFO the program copied from a datagram's would name the
 * context's address and interface, which are not loopback's). */
static long send_host_gso(struct pl_sock *s, const struct msghdr *msg,
			  int flags, uint16_t gso)
{
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctl;
	struct msghdr m = *msg;
	struct cmsghdr *c;
	int qf;
	ssize_t r = tx_flags(flags, &qf);

	if (r < 0)
		return r;
	if (!host_bound(s))
		return -ENETUNREACH;
	memset(&ctl, 0, sizeof(ctl));
	m.msg_control = ctl.buf;
	m.msg_controllen = sizeof(ctl.buf);
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = IPPROTO_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(gso));
	memcpy(CMSG_DATA(c), &gso, sizeof(gso));
	r = pl_real.sendmsg(s->kfd, &m, flags);
	return r < 0 ? -errno : r;
}

static long send_sock(struct pl_sock *s, const void *buf, size_t len,
		      int flags, const struct sockaddr *dest, socklen_t dlen)
{
	int64_t deadline = 0;
	int qf;
	long r = tx_flags(flags, &qf);

	if (r < 0)
		return r;
	if (__builtin_expect(host_local(dest, dlen), 0))
		return send_host(s, buf, len, flags, dest, dlen);
	pl_joins_before_tx(s);
	do {
		pl_sig_clear();
		r = dest ? qps_sendto(s->ep, buf, len, qf, dest, dlen) :
			   qps_send(s->ep, buf, len, qf);
	} while ((r == -EINTR && !s->sndtimeo && pl_sig_restart()) ||
		 pl_fork_wait(s, &r, flags, false, &deadline));
	return sent(s, r, flags);
}

/* The first destination decides, for a socket never bound or connected,
 * whether it stays offloaded (pl_policy_dest). */
static struct pl_sock *get_for(int fd, const struct sockaddr *dest,
			       socklen_t dlen)
{
	struct pl_sock *s = pl_get(fd);
	char why[PL_WHY_MAX];

	if (s && s->fresh && dest &&
	    pl_policy_dest(s, dest, dlen, why, sizeof(why))) {
		pl_sock_fallback(fd, s, why);
		pl_put(s);
		s = NULL;
	}
	return s;
}

/* As get_for, and a UDP_SEGMENT control message on a fresh socket sends
 * it to the kernel, which segments (pl_unsup.c). */
static struct pl_sock *get_for_msg(int fd, const struct msghdr *msg)
{
	struct pl_sock *s;

	if (!msg)
		return pl_get(fd);
	s = get_for(fd, msg->msg_name, msg->msg_namelen);
	if (s && s->fresh && msg->msg_controllen && pl_unsup_gso(msg) > 0) {
		pl_sock_fallback(fd, s, "UDP_SEGMENT control message, which "
				 "qpsock cannot honour");
		pl_put(s);
		s = NULL;
	}
	return s;
}

PL_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			 const struct sockaddr *dest, socklen_t dlen)
{
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return syscall(SYS_sendto, fd, buf, len, flags, dest, dlen);
	s = get_for(fd, dest, dlen);
	if (!s)
		return pl_real.sendto(fd, buf, len, flags, dest, dlen);
	r = send_sock(s, buf, len, flags, dest, dlen);
	pl_put(s);
	return pl_ret(r);
}

PL_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
	s = pl_get(fd);
	if (!s)
		return pl_real.send(fd, buf, len, flags);
	r = send_sock(s, buf, len, flags, NULL, 0);
	pl_put(s);
	return pl_ret(r);
}

PL_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return syscall(SYS_write, fd, buf, len);
	s = pl_get(fd);
	if (!s)
		return pl_real.write(fd, buf, len);
	r = send_sock(s, buf, len, 0, NULL, 0);
	pl_put(s);
	return pl_ret(r);
}

static long iov_total(const struct iovec *iov, size_t n)
{
	size_t i, t = 0;

	if (n > 0 && !iov)
		return -EFAULT;
	for (i = 0; i < n; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - t)
			return -EINVAL;
		t += iov[i].iov_len;
	}
	return (long)t;
}

ssize_t pl_sendmsg_sock(struct pl_sock *s, const struct msghdr *msg,
			int flags)
{
	char stack[PL_GATHER_STACK], *buf = stack, *p;
	long total, r;
	size_t i;

	if (!msg)
		return -EFAULT;
	if (msg->msg_iovlen > IOV_MAX)
		return -EMSGSIZE;
	total = iov_total(msg->msg_iov, msg->msg_iovlen);
	if (total < 0)
		return total;
	if (__builtin_expect(msg->msg_controllen != 0, 0)) {
		int gso = pl_unsup_gso(msg);

		if (gso < 0)
			return gso;
		/* Segments are the kernel's to make: to this host its
		 * socket sends them. Elsewhere EIO, the kernel's answer
		 * when the path cannot segment (no checksum offload, a
		 * tunnel): QUIC stacks then stop asking. A size the
		 * datagram does not exceed asks nothing, as there. */
		if (gso > 0 && total > gso &&
		    host_local(msg->msg_name, msg->msg_namelen))
			return send_host_gso(s, msg, flags, (uint16_t)gso);
		if (gso > 0 && total > gso)
			return pl_unsup_refuse(s, "UDP_SEGMENT control message",
					       EIO);
	}
	/* Other control messages (IP_PKTINFO source choice, IP_TTL per
	 * datagram) are not carried yet: ignored (docs/preload.md). */
	if (msg->msg_iovlen == 1)
		return send_sock(s, msg->msg_iov[0].iov_base, (size_t)total,
				 flags, msg->msg_name, msg->msg_namelen);
	if ((size_t)total > sizeof(stack)) {
		buf = malloc((size_t)total);
		if (!buf)
			return -ENOBUFS;
	}
	for (i = 0, p = buf; i < msg->msg_iovlen; i++) {
		memcpy(p, msg->msg_iov[i].iov_base, msg->msg_iov[i].iov_len);
		p += msg->msg_iov[i].iov_len;
	}
	r = send_sock(s, buf, (size_t)total, flags, msg->msg_name,
		      msg->msg_namelen);
	if (buf != stack)
		free(buf);
	return r;
}

PL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return syscall(SYS_sendmsg, fd, msg, flags);
	s = get_for_msg(fd, msg);
	if (!s)
		return pl_real.sendmsg(fd, msg, flags);
	r = pl_sendmsg_sock(s, msg, flags);
	pl_put(s);
	return pl_ret(r);
}

PL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov };
	struct pl_sock *s;
	long r;

	if (!pl_sym_ready())
		return syscall(SYS_writev, fd, iov, n);
	s = pl_get(fd);
	if (!s)
		return pl_real.writev(fd, iov, n);
	if (n < 0) {
		r = -EINVAL;
	} else {
		msg.msg_iovlen = (size_t)n;
		r = pl_sendmsg_sock(s, &msg, 0);
	}
	pl_put(s);
	return pl_ret(r);
}

/* A chunk of single-buffer messages in one qps_sendmmsg call: returns
 * how many were accepted, or the first one's error. */
static long mmsg_chunk(struct pl_sock *s, struct mmsghdr *v, unsigned int n,
		       int qf)
{
	struct qps_msg m[PL_MMSG_CHUNK];
	int64_t deadline = 0;
	unsigned int i;
	long r;

	for (i = 0; i < n; i++) {
		m[i].buf = v[i].msg_hdr.msg_iovlen ?
			   v[i].msg_hdr.msg_iov[0].iov_base : NULL;
		m[i].len = v[i].msg_hdr.msg_iovlen ?
			   v[i].msg_hdr.msg_iov[0].iov_len : 0;
		m[i].dest = v[i].msg_hdr.msg_name;
		m[i].dest_len = v[i].msg_hdr.msg_namelen;
		m[i].priority = -1;
		m[i].result = 0;
	}
	do
		r = qps_sendmmsg(s->ep, m, n, qf);
	while (pl_fork_wait(s, &r, qf & QPS_MSG_DONTWAIT ? MSG_DONTWAIT : 0,
			    false, &deadline));
	for (i = 0; r > 0 && i < (unsigned int)r; i++)
		v[i].msg_len = (unsigned int)m[i].result;
	return r;
}

static bool mmsg_simple(const struct mmsghdr *v, unsigned int n)
{
	unsigned int i;

	/* A UDP_SEGMENT control message goes through pl_sendmsg_sock. */
	for (i = 0; i < n; i++)
		if (v[i].msg_hdr.msg_iovlen > 1 ||
		    (v[i].msg_hdr.msg_controllen &&
		     pl_unsup_gso(&v[i].msg_hdr) != 0))
			return false;
	return true;
}

PL_EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	unsigned int done = 0;
	struct pl_sock *s;
	int qf = 0;
	long r;

	if (!pl_sym_ready())
		return (int)syscall(SYS_sendmmsg, fd, v, n, flags);
	s = get_for_msg(fd, v && n ? &v[0].msg_hdr : NULL);
	if (!s)
		return pl_real.sendmmsg(fd, v, n, flags);
	if (n > UIO_MAXIOV)
		n = UIO_MAXIOV;
	r = !v && n ? -EFAULT : tx_flags(flags, &qf);
	if (r >= 0)
		pl_joins_before_tx(s);
	while (r >= 0 && done < n) {
		unsigned int k = n - done > PL_MMSG_CHUNK ? PL_MMSG_CHUNK :
				 n - done;

		if (mmsg_simple(v + done, k)) {
			r = sent(s, mmsg_chunk(s, v + done, k, qf), flags);
		} else {
			r = pl_sendmsg_sock(s, &v[done].msg_hdr, flags);
			if (r >= 0)
				v[done].msg_len = (unsigned int)r;
			k = 1;
			r = r >= 0 ? 1 : r;
		}
		if (r > 0)
			done += (unsigned int)r;
		if (r >= 0 && (unsigned int)r < k)
			break;
	}
	pl_put(s);
	/* As the kernel: what was sent counts; an error only when nothing
	 * was. */
	return done ? (int)done : (int)pl_ret(r < 0 ? r : 0);
}
