// SPDX-License-Identifier: MIT
/*
 * A kernel UDP socket bound where a qpsock endpoint is bound. The frames
 * of that port reach the kernel's stack too (an AF_PACKET tap steals
 * nothing), and a port nobody holds there is answered with ICMP
 * port-unreachable, which a connected kernel sender reads as
 * ECONNREFUSED and loses a datagram to. Held in the kernel's table, the
 * port also becomes exclusive host-wide under the kernel's own
 * SO_REUSEADDR / SO_REUSEPORT rules (VMA keeps such an OS socket behind
 * every offloaded one for the same reasons).
 *
 * The socket must never deliver: a filter that accepts nothing drops the
 * kernel's copy of each datagram before it is queued (counted by the
 * kernel as a socket drop, no buffer filled), IP_MULTICAST_ALL 0 keeps
 * other sockets' groups away, and the smallest receive buffer bounds
 * anything that gets past both.
 */
#define _GNU_SOURCE	/* setns */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host_port.h"
#include "provider.h"

static int ns_ino(int fd, uint64_t *ino)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	*ino = (uint64_t)st.st_ino;
	return 0;
}

int qps_host_ns_open(struct qps_host_ns *ns)
{
	int ret;

	ns->fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (ns->fd < 0)
		return -errno;
	ret = ns_ino(ns->fd, &ns->ino);
	if (ret < 0)
		qps_host_ns_close(ns);
	return ret;
}

void qps_host_ns_close(struct qps_host_ns *ns)
{
	if (ns->fd >= 0)
		close(ns->fd);
	ns->fd = -1;
}

/* Whether the calling thread is in @ns (one readlink: "net:[inode]");
 * on error, assume it is. */
static bool ns_here(const struct qps_host_ns *ns)
{
	char link[64], *end;
	ssize_t n = readlink("/proc/thread-self/ns/net", link,
			     sizeof(link) - 1);
	unsigned long long ino;

	if (n <= 5)
		return true;
	link[n] = '\0';
	if (strncmp(link, "net:[", 5) != 0)
		return true;
	ino = strtoull(link + 5, &end, 10);
	if (*end != ']')
		return true;
	return ino == ns->ino;
}

static int set_int(int fd, int level, int opt, int v)
{
	return setsockopt(fd, level, opt, &v, sizeof(v)) < 0 ? -errno : 0;
}

static int hold(int fd, int ifindex, struct in_addr addr, uint16_t *port,
		unsigned int flags)
{
	static struct sock_filter drop_all[] = {
		BPF_STMT(BPF_RET | BPF_K, 0),
	};
	/* QPS_HOLD_HOST_RX: all but what came in through the device. */
	struct sock_filter not_dev[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_AD_OFF + SKF_AD_IFINDEX),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)ifindex, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, 0),
		BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
	};
	bool host_rx = (flags & QPS_HOLD_HOST_RX) && ifindex > 0;
	struct sock_fprog prog = { .len = 1, .filter = drop_all };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof(sin);
	int ret;

	if (host_rx) {
		prog.len = sizeof(not_dev) / sizeof(not_dev[0]);
		prog.filter = not_dev;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog,
		       sizeof(prog)) < 0)
		return -errno;
	/* Held only, it never queues; receiving, it keeps the buffer the
	 * application gave it. */
	ret = host_rx ? set_int(fd, IPPROTO_IP, IP_PKTINFO, 1) :
		       set_int(fd, SOL_SOCKET, SO_RCVBUF, 1);
	if (!ret)
		ret = set_int(fd, IPPROTO_IP, IP_MULTICAST_ALL, 0);
	/* The context's address may not be configured on the netdev (yet,
	 * or ever: a test double's): the port is held all the same. */
	if (!ret)
		ret = set_int(fd, IPPROTO_IP, IP_FREEBIND, 1);
	if (!ret && (flags & QPS_HOLD_REUSEADDR))
		ret = set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	if (!ret && (flags & QPS_HOLD_REUSEPORT))
		ret = set_int(fd, SOL_SOCKET, SO_REUSEPORT, 1);
	if (ret < 0)
		return ret;
	/* An adopted socket another process bound for an endpoint of its
	 * own (a socket inherited across fork) already holds the port: the
	 * kernel cannot bind it twice, and need not. */
	if (getsockname(fd, (struct sockaddr *)&sin, &len) < 0)
		return -errno;
	if (sin.sin_port != 0) {
		if ((*port && sin.sin_port != *port) ||
		    sin.sin_addr.s_addr != addr.s_addr)
			return -EINVAL;
		*port = sin.sin_port;
		return 0;
	}
	len = sizeof(sin);
	sin.sin_addr = addr;
	sin.sin_port = *port;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		return -errno;
	if (getsockname(fd, (struct sockaddr *)&sin, &len) < 0)
		return -errno;
	*port = sin.sin_port;
	return 0;
}

int qps_host_port_hold(const struct qps_host_ns *ns, int fd,
		       struct in_addr addr, uint16_t *port,
		       unsigned int flags)
{
	int here = -1, ret;

	/* An adopted socket was made by the application, in its
	 * namespace: the port it holds is where the application looks. */
	if (fd >= 0) {
		ret = hold(fd, ns->ifindex, addr, port, flags);
		return ret < 0 ? ret : fd;
	}

	/* A thread of another namespace binds: make the socket in the
	 * device's, then go back (setns is per thread). */
	if (ns->fd >= 0 && !ns_here(ns)) {
		here = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
		if (here < 0)
			return -errno;
		if (setns(ns->fd, CLONE_NEWNET) < 0) {
			ret = -errno;
			close(here);
			return ret;
		}
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	ret = fd < 0 ? -errno : 0;
	if (here >= 0) {
		/* Back where the caller was: failing that would leave the
		 * thread in the wrong namespace for good, so it cannot be
		 * ignored, but there is nothing to undo it with either. */
		if (setns(here, CLONE_NEWNET) < 0 && !ret)
			ret = -errno;
		close(here);
	}
	if (ret < 0) {
		if (fd >= 0)
			close(fd);
		return ret;
	}
	ret = hold(fd, ns->ifindex, addr, port, flags);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	return fd;
}
