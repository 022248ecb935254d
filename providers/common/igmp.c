// SPDX-License-Identifier: MIT
/*
 * Kernel IGMP membership, counted per (group, source). One socket per
 * membership: a socket holds at most net.ipv4.igmp_max_memberships (20)
 * groups. It joins by interface index (MCAST_JOIN_GROUP, or
 * MCAST_JOIN_SOURCE_GROUP for a source-specific join) and is bound to
 * the netdev, as VMA does; it is never bound to a port, so the kernel
 * queues no datagram on it. Closing it is the IGMP leave.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "igmp.h"

static int join(const struct qps_igmp_netdev *nd, struct qps_igmp_memb *m)
{
	struct sockaddr_in *g, *s;
	int ret;

	m->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (m->fd < 0)
		return -errno;
	/* Best effort: the join itself names the interface. */
	if (nd->ifname)
		(void)setsockopt(m->fd, SOL_SOCKET, SO_BINDTODEVICE,
				 nd->ifname, (socklen_t)strlen(nd->ifname));
	if (m->source.s_addr) {
		struct group_source_req gsr;

		memset(&gsr, 0, sizeof(gsr));
		gsr.gsr_interface = (uint32_t)nd->ifindex;
		g = (struct sockaddr_in *)(void *)&gsr.gsr_group;
		s = (struct sockaddr_in *)(void *)&gsr.gsr_source;
		g->sin_family = s->sin_family = AF_INET;
		g->sin_addr = m->group;
		s->sin_addr = m->source;
		ret = setsockopt(m->fd, IPPROTO_IP, MCAST_JOIN_SOURCE_GROUP,
				 &gsr, sizeof(gsr));
	} else {
		struct group_req gr;

		memset(&gr, 0, sizeof(gr));
		gr.gr_interface = (uint32_t)nd->ifindex;
		g = (struct sockaddr_in *)(void *)&gr.gr_group;
		g->sin_family = AF_INET;
		g->sin_addr = m->group;
		ret = setsockopt(m->fd, IPPROTO_IP, MCAST_JOIN_GROUP, &gr,
				 sizeof(gr));
	}
	if (ret < 0) {
		ret = -errno;
		close(m->fd);
		m->fd = -1;
	}
	return ret;
}

static struct qps_igmp_memb **find(struct qps_igmp_memb **list,
				   struct in_addr group, struct in_addr source)
{
	struct qps_igmp_memb **pp;

	for (pp = list; *pp; pp = &(*pp)->next)
		if ((*pp)->group.s_addr == group.s_addr &&
		    (*pp)->source.s_addr == source.s_addr)
			break;
	return pp;
}

static int attach(const struct qps_igmp_netdev *nd, struct in_addr group,
		  struct in_addr source)
{
	struct qps_igmp_memb **pp, *m;
	int ret;

	pp = find(nd->list, group, source);
	if (*pp) {
		(*pp)->refs++;
		return 0;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->group = group;
	m->source = source;
	m->refs = 1;
	m->fd = -1;
	if (nd->link) {
		ret = nd->link(nd->arg, group, true);
		if (ret < 0)
			goto err;
	}
	if (nd->ifindex) {
		ret = join(nd, m);
		if (ret < 0) {
			if (nd->link)
				(void)nd->link(nd->arg, group, false);
			goto err;
		}
	}
	m->next = *nd->list;
	*nd->list = m;
	return 1;
err:
	free(m);
	return ret;
}

void qps_igmp_netdev_init(struct qps_igmp_netdev *nd,
			  struct qps_igmp_memb **list, pthread_mutex_t *lock,
			  int ifindex, const char *ifname)
{
	memset(nd, 0, sizeof(*nd));
	nd->list = list;
	nd->lock = lock;
	nd->ifindex = ifindex;
	nd->ifname = ifname;
}

int qps_igmp_attach(const struct qps_igmp_netdev *nd, struct in_addr group,
		    struct in_addr source)
{
	int ret;

	if (!IN_MULTICAST(ntohl(group.s_addr)))
		return -EINVAL;
	pthread_mutex_lock(nd->lock);
	ret = attach(nd, group, source);
	pthread_mutex_unlock(nd->lock);
	return ret;
}

static void leave(const struct qps_igmp_netdev *nd, struct qps_igmp_memb *m)
{
	if (m->fd >= 0)
		close(m->fd);	/* the kernel leaves: IGMP leave */
	if (nd->link)
		(void)nd->link(nd->arg, m->group, false);
	free(m);
}

int qps_igmp_detach(const struct qps_igmp_netdev *nd, struct in_addr group,
		    struct in_addr source)
{
	struct qps_igmp_memb **pp, *m;
	int ret = 0;

	pthread_mutex_lock(nd->lock);
	pp = find(nd->list, group, source);
	m = *pp;
	if (!m) {
		ret = -ENOENT;
	} else if (--m->refs == 0) {
		*pp = m->next;
		leave(nd, m);
	}
	pthread_mutex_unlock(nd->lock);
	return ret;
}

void qps_igmp_close(const struct qps_igmp_netdev *nd)
{
	struct qps_igmp_memb *m;

	pthread_mutex_lock(nd->lock);
	while ((m = *nd->list)) {
		*nd->list = m->next;
		leave(nd, m);
	}
	pthread_mutex_unlock(nd->lock);
}
