// SPDX-License-Identifier: MIT
/*
 * What qpsock cannot honour on an offloaded socket (docs/preload.md
 * "What falls back, what is refused"). Ignoring it would give the
 * program other datagrams than it asked for (one 300-byte datagram where
 * UDP_SEGMENT asked for three), so:
 *   - on a fresh socket (never bound or connected: nothing moved, no
 *     port is the endpoint's) the kernel socket takes the option and the
 *     socket falls back to it, where the kernel honours it;
 *   - afterwards the endpoint holds the port and the socket can no
 *     longer go back (pl_policy.c): the call is refused, and the socket
 *     is left exactly as it was.
 * A refusal first runs the kernel's own checks on a scratch socket, so a
 * malformed value still gets the kernel's errno; only a request the
 * kernel would take gets ours, each chosen below as the errno a kernel
 * gives when it lacks that feature on a socket, which is what programs
 * that probe for the feature already handle.
 *
 * A value that asks for nothing (0, an empty device name) or names the
 * context's own interface is no such request: it goes to the kernel
 * socket as any other option does (pl_opts.c).
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/io_uring.h>

#include "preload.h"

/* The kernel interface that holds the context's address, 0 on emu
 * (its wire is no kernel netdev: every interface the kernel knows is
 * another one). Found once: the context's address never changes. */
static int own_ifindex(void)
{
	static int cached = -1;
	int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
	struct ifaddrs *all, *i;

	if (v >= 0)
		return v;
	v = 0;
	if (!pl_ctx_info.emu && getifaddrs(&all) == 0) {
		for (i = all; i && !v; i = i->ifa_next) {
			const struct sockaddr_in *a =
				(const struct sockaddr_in *)i->ifa_addr;

			if (a && a->sin_family == AF_INET &&
			    a->sin_addr.s_addr == pl_ctx_info.addr.s_addr)
				v = (int)if_nametoindex(i->ifa_name);
		}
		freeifaddrs(all);
	}
	__atomic_store_n(&cached, v, __ATOMIC_RELAXED);
	return v;
}

/* An interface index the context answers to: on emu the one IP_PKTINFO
 * reports and memberships take (QPS_IFINDEX), though no kernel netdev
 * name is its. */
static bool own_index(int ifindex)
{
	if (pl_ctx_info.emu)
		return ifindex == QPS_IFINDEX;
	return ifindex != 0 && ifindex == own_ifindex();
}

/* An int or, for IP-level options, a byte, as the kernel reads them;
 * a malformed value asks for nothing: the kernel socket refuses it. */
static bool set_int(const void *val, socklen_t len, int *v)
{
	if (!val || len < 1)
		return false;
	if (len >= sizeof(int))
		memcpy(v, val, sizeof(int));
	else
		*v = *(const unsigned char *)val;
	return true;
}

static bool nonzero(const void *val, socklen_t len)
{
	int v;

	return set_int(val, len, &v) && v != 0;
}

static bool always(const void *val, socklen_t len)
{
	(void)val;
	(void)len;
	return true;
}

/* SO_BINDTODEVICE: an empty name unbinds. A name the kernel does not
 * know counts as another interface: the kernel answers ENODEV. */
static bool other_dev(const void *val, socklen_t len)
{
	char name[IFNAMSIZ] = "";
	int i;

	if (!val || len == 0 || *(const char *)val == '\0')
		return false;
	memcpy(name, val, len < IFNAMSIZ - 1 ? len : IFNAMSIZ - 1);
	i = (int)if_nametoindex(name);
	return i == 0 || i != own_ifindex();
}

/* SO_BINDTOIFINDEX; IP_UNICAST_IF, whose index is in network order. */
static bool other_ifindex(const void *val, socklen_t len)
{
	int v;

	return set_int(val, len, &v) && v != 0 && !own_index(v);
}

static bool other_ucif(const void *val, socklen_t len)
{
	int v;

	return set_int(val, len, &v) && v != 0 &&
	       !own_index((int)ntohl((uint32_t)v));
}

/* IP_MULTICAST_IF, read as the kernel reads it: an ip_mreqn, an
 * ip_mreq (its interface address), or an address. Nothing named, or
 * the context's address or interface: qpsock's own. */
static bool other_mcif(const void *val, socklen_t len)
{
	struct ip_mreqn m = { 0 };

	if (!val || len < sizeof(struct in_addr))
		return false;
	if (len >= sizeof(m))
		memcpy(&m, val, sizeof(m));
	else if (len >= sizeof(struct ip_mreq))
		memcpy(&m, val, sizeof(struct ip_mreq));
	else
		memcpy(&m.imr_address, val, sizeof(m.imr_address));
	if (m.imr_ifindex)
		return !own_index(m.imr_ifindex);
	return m.imr_address.s_addr != INADDR_ANY &&
	       m.imr_address.s_addr != pl_ctx_info.addr.s_addr;
}

struct unsup {
	int level, name;
	const char *what;
	/* Whether the value asks for what qpsock cannot do. */
	bool (*asks)(const void *val, socklen_t len);
	/* The answer once data moved; 0: taken, and nothing to do. */
	int err;
};

static const struct unsup unsup[] = {
	/* Segmentation, coalescing and corking make or merge datagrams
	 * the endpoint sends and receives whole. ENOPROTOOPT is what a
	 * kernel without them says (before 4.18 for GSO, 5.0 for GRO): a
	 * UDP option it does not know. QUIC stacks probe both and then
	 * use plain datagrams. */
	{ IPPROTO_UDP, UDP_SEGMENT, "UDP_SEGMENT", nonzero, ENOPROTOOPT },
	{ IPPROTO_UDP, UDP_GRO, "UDP_GRO", nonzero, ENOPROTOOPT },
	{ IPPROTO_UDP, UDP_CORK, "UDP_CORK", nonzero, ENOPROTOOPT },
	/* The endpoint sends and receives through its device alone.
	 * ENOPROTOOPT: a kernel that cannot bind sockets to devices
	 * (built without CONFIG_NETDEVICES) says so. */
	{ SOL_SOCKET, SO_BINDTODEVICE, "SO_BINDTODEVICE", other_dev,
	  ENOPROTOOPT },
	{ SOL_SOCKET, SO_BINDTOIFINDEX, "SO_BINDTOIFINDEX", other_ifindex,
	  ENOPROTOOPT },
	/* An offloaded socket is as bound to its device, and for a socket
	 * bound with SO_BINDTODEVICE the kernel refuses another interface
	 * with EINVAL. */
	{ IPPROTO_IP, IP_MULTICAST_IF, "IP_MULTICAST_IF", other_mcif, EINVAL },
	{ IPPROTO_IP, IP_UNICAST_IF, "IP_UNICAST_IF", other_ucif, EINVAL },
	/* No ICMP reaches the endpoint and it has no error queue:
	 * ENOPROTOOPT, an option this socket does not have. */
	{ IPPROTO_IP, IP_RECVERR, "IP_RECVERR", nonzero, ENOPROTOOPT },
	/* Transmit timestamps and zerocopy completions come through the
	 * error queue too. SO_ZEROCOPY: EOPNOTSUPP, the kernel's answer on
	 * a socket that cannot send zerocopy (programs then copy);
	 * SO_TIMESTAMPING: ENOPROTOOPT, as before kernel 2.6.30. */
	{ SOL_SOCKET, SO_ZEROCOPY, "SO_ZEROCOPY", nonzero, EOPNOTSUPP },
	{ SOL_SOCKET, SO_TIMESTAMPING, "SO_TIMESTAMPING", nonzero,
	  ENOPROTOOPT },
	/* The program would steer the kernel's reuseport group, which the
	 * device's datagrams never see. EINVAL: the kernel's answer on a
	 * socket in no reuseport group a program could steer. */
	{ SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, "SO_ATTACH_REUSEPORT_CBPF",
	  always, EINVAL },
	{ SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, "SO_ATTACH_REUSEPORT_EBPF",
	  always, EINVAL },
	/* A socket filter would choose datagrams the endpoint never
	 * passes through it, and on packet and verbs the kernel socket's
	 * filter is the core's (it keeps the port's socket empty): EPERM,
	 * the kernel's answer on a socket whose filter is locked. */
	{ SOL_SOCKET, SO_ATTACH_FILTER, "SO_ATTACH_FILTER", always, EPERM },
	{ SOL_SOCKET, SO_ATTACH_BPF, "SO_ATTACH_BPF", always, EPERM },
	/* Detaching would take the core's off. A program's filter is never
	 * on an offloaded socket (attaching one made it fall back): the
	 * scratch socket's ENOENT, nothing attached, is the answer. */
	{ SOL_SOCKET, SO_DETACH_FILTER, "SO_DETACH_FILTER", always, ENOENT },
	/* Locking the filter would lock the core's. Every filter change is
	 * refused from then on anyway, as on a locked socket: taken. */
	{ SOL_SOCKET, SO_LOCK_FILTER, "SO_LOCK_FILTER", nonzero, 0 },
};

long pl_unsup_refuse(struct pl_sock *s, const char *what, int err)
{
	const char *none = NULL;

	/* The first is said, and named on the stats line. */
	if (__atomic_compare_exchange_n(&s->refused_what, &none, what, false,
					__ATOMIC_RELEASE, __ATOMIC_RELAXED))
		pl_log("fd %d: %s refused (%s): the socket moved data through "
		       "qpsock, which cannot honour it", s->fd, what,
		       strerrordesc_np(err));
	__atomic_fetch_add(&s->refused, 1, __ATOMIC_RELAXED);
	return -err;
}

/* The kernel's checks of the value, on a socket of its own: the
 * program's is not touched. */
static int kernel_check(int level, int name, const void *val,
			socklen_t len)
{
	int fd = pl_real.socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int one = 1, r;

	if (fd < 0)
		return 0;
	/* A reuseport program is attached only where there is a group. */
	if (name == SO_ATTACH_REUSEPORT_CBPF ||
	    name == SO_ATTACH_REUSEPORT_EBPF)
		(void)pl_real.setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one,
					 sizeof(one));
	r = pl_real.setsockopt(fd, level, name, val, len) < 0 ? -errno : 0;
	pl_real.close(fd);
	return r;
}

bool pl_unsup_setopt(struct pl_sock *s, int fd, int level, int name,
		     const void *val, socklen_t len, long *r)
{
	const struct unsup *u = NULL;
	size_t i;

	for (i = 0; i < sizeof(unsup) / sizeof(unsup[0]); i++)
		if (unsup[i].level == level && unsup[i].name == name) {
			u = &unsup[i];
			break;
		}
	if (!u || !u->asks(val, len))
		return false;
	if (s->fresh) {
		char why[PL_WHY_MAX];

		/* The kernel first: if it refuses, nothing changed and
		 * the socket stays offloaded. */
		if (pl_real.setsockopt(fd, level, name, val, len) < 0) {
			*r = -errno;
			return true;
		}
		(void)snprintf(why, sizeof(why), "%s, which qpsock cannot "
			       "honour", u->what);
		pl_sock_fallback(fd, s, why);
		*r = 0;
		return true;
	}
	*r = kernel_check(level, name, val, len);
	if (*r == 0 && u->err)
		*r = pl_unsup_refuse(s, u->what, u->err);
	return true;
}

int pl_unsup_gso(const struct msghdr *msg)
{
	struct cmsghdr *c;
	uint16_t v;

	if (!msg->msg_control || msg->msg_controllen < sizeof(*c))
		return 0;
	for (c = CMSG_FIRSTHDR((struct msghdr *)msg); c;
	     c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
		if (c->cmsg_level != IPPROTO_UDP || c->cmsg_type != UDP_SEGMENT)
			continue;
		if (c->cmsg_len != CMSG_LEN(sizeof(v)))
			return -EINVAL;
		memcpy(&v, CMSG_DATA(c), sizeof(v));
		return v;
	}
	return 0;
}

#if defined(SYS_io_uring_register) && \
	(defined(__x86_64__) || defined(__aarch64__))

/* io_uring's headers before Linux 6.3 lack it: the ring named by its
 * index among the registered rings. */
#ifndef IORING_REGISTER_USE_REGISTERED_RING
#define IORING_REGISTER_USE_REGISTERED_RING (1U << 31)
#endif

/* The fds an io_uring_register(2) call would make the ring's files,
 * in *@fds; how many there are, or -1 for a call that registers none. */
static long uring_fds(unsigned int op, const void *arg, unsigned int nr,
		      const int **fds)
{
	switch (op) {
	case IORING_REGISTER_FILES:
		*fds = arg;
		return nr;
	case IORING_REGISTER_FILES_UPDATE: {
		const struct io_uring_files_update *u = arg;

		*fds = (const int *)(uintptr_t)u->fds;
		return nr;
	}
	case IORING_REGISTER_FILES2: {
		const struct io_uring_rsrc_register *rr = arg;

		if (nr != sizeof(*rr) || (rr->flags & IORING_RSRC_REGISTER_SPARSE))
			return -1;
		*fds = (const int *)(uintptr_t)rr->data;
		return rr->nr;
	}
	case IORING_REGISTER_FILES_UPDATE2: {
		const struct io_uring_rsrc_update2 *u = arg;

		if (nr != sizeof(*u))
			return -1;
		*fds = (const int *)(uintptr_t)u->data;
		return u->nr;
	}
	default:
		return -1;
	}
}

/* A ring's operations on a file are the kernel's: on an offloaded fd
 * they would reach the kernel socket (receives never complete, sends
 * leave by the kernel's routes). Only the files a ring registers can
 * be seen, and only through glibc's syscall() (liburing makes its
 * system calls itself): fresh sockets among them fall back first; one
 * that moved data makes the call fail as io_uring fails a file it
 * will not register (another ring), EBADF, before anything is
 * registered. */
long pl_unsup_uring_register(long *a)
{
	unsigned int op = (unsigned int)a[1] & ~IORING_REGISTER_USE_REGISTERED_RING;
	const int *fds = NULL;
	struct pl_sock *s;
	long n = a[2] ? uring_fds(op, (const void *)a[2],
				  (unsigned int)a[3], &fds) : -1;
	long i, r = 0;

	for (i = 0; fds && i < n && !r; i++) {
		s = fds[i] >= 0 ? pl_get(fds[i]) : NULL;
		if (s && !s->fresh)
			r = pl_unsup_refuse(s, "io_uring registration", EBADF);
		if (s)
			pl_put(s);
	}
	if (r)
		return pl_ret(r);
	for (i = 0; fds && i < n; i++) {
		s = fds[i] >= 0 ? pl_get(fds[i]) : NULL;
		if (s && s->fresh)
			pl_sock_fallback(fds[i], s, "registered with io_uring, "
					 "whose operations qpsock cannot see");
		if (s)
			pl_put(s);
	}
	return pl_real.syscall(SYS_io_uring_register, a[0], a[1], a[2], a[3],
			       a[4], a[5]);
}

#endif
