// SPDX-License-Identifier: MIT
/*
 * What the kernel knows about the port's netdev, used as the packet
 * provider uses it (src/nl_neigh.c): the next-hop MAC of a destination
 * from the route and neighbour tables, ARP triggered by the kernel when
 * there is no entry, -EHOSTUNREACH after $QPS_VERBS_RESOLVE_MS (3000)
 * without an answer; netlink events move route_gen.
 *
 * Multicast membership: the NIC sends no IGMP, so a kernel UDP socket
 * joins the group on the netdev (MCAST_JOIN_GROUP, or
 * MCAST_JOIN_SOURCE_GROUP for a source-specific join, both by interface
 * index) and the kernel sends the reports and answers queries, as VMA
 * does. The frames themselves reach the QP through steering rules (raw
 * packet) or ibv_attach_mcast (UD). One socket per membership, counted
 * per (group, source).
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "verbs.h"

int qps_verbs_route_open(struct qps_verbs_dev *vd)
{
	int ret;

	if (!vd->ifindex)
		return 0;
	ret = qps_nl_route_open(&vd->route, vd->ifindex, vd->ifname, "verbs",
				"QPS_VERBS_RESOLVE_MS");
	if (ret) {
		qps_nl_route_close(&vd->route);
		qps_verbs_log("%s: rtnetlink for %s: %s", vd->info.name,
			      vd->ifname, qps_verbs_strerror(-ret));
		return ret;
	}
	vd->route.local_ok = true;
	vd->route_open = true;
	return 0;
}

void qps_verbs_route_close(struct qps_verbs_dev *vd)
{
	if (vd->route_open)
		qps_nl_route_close(&vd->route);
	vd->route_open = false;
}

int qps_verbs_resolve(struct qps_dev *dev, struct in_addr dst,
		      uint8_t mac_out[6])
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);
	uint32_t h = ntohl(dst.s_addr);

	if (!mac_out)
		return -EINVAL;
	if (IN_MULTICAST(h)) {
		mac_out[0] = 0x01;
		mac_out[1] = 0x00;
		mac_out[2] = 0x5e;
		mac_out[3] = (uint8_t)((h >> 16) & 0x7f);
		mac_out[4] = (uint8_t)(h >> 8);
		mac_out[5] = (uint8_t)h;
		return 0;
	}
	if (h == INADDR_BROADCAST) {
		memset(mac_out, 0xff, 6);
		return 0;
	}
	if (!vd->route_open) {
		char buf[INET_ADDRSTRLEN];

		qps_verbs_log("%s: no netdev behind GID 0, so no neighbour "
			      "table to resolve %s in", vd->info.name,
			      inet_ntop(AF_INET, &dst, buf, sizeof(buf)));
		return -EHOSTUNREACH;
	}
	return qps_nl_resolve(&vd->route, dst, mac_out);
}

uint64_t qps_verbs_route_gen(struct qps_dev *dev)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);

	/* Without a netdev nothing ever resolves, so nothing goes stale. */
	return vd->route_open ? qps_nl_route_gen(&vd->route) : 1;
}

static int igmp_join(const struct qps_verbs_dev *vd, struct qps_verbs_mcast *m)
{
	struct sockaddr_in *g, *s;
	int ret;

	m->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (m->fd < 0)
		return -errno;
	/* Bound to the netdev like VMA's socket; never bound to a port,
	 * so the kernel queues no datagram on it. */
	(void)setsockopt(m->fd, SOL_SOCKET, SO_BINDTODEVICE, vd->ifname,
			 (socklen_t)strlen(vd->ifname));
	if (m->source.s_addr) {
		struct group_source_req gsr;

		memset(&gsr, 0, sizeof(gsr));
		gsr.gsr_interface = (uint32_t)vd->ifindex;
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
		gr.gr_interface = (uint32_t)vd->ifindex;
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

static struct qps_verbs_mcast **find(struct qps_verbs_dev *vd,
				     struct in_addr group,
				     struct in_addr source)
{
	struct qps_verbs_mcast **pp;

	for (pp = &vd->mcast; *pp; pp = &(*pp)->next)
		if ((*pp)->group.s_addr == group.s_addr &&
		    (*pp)->source.s_addr == source.s_addr)
			break;
	return pp;
}

int qps_verbs_mcast_attach(struct qps_dev *dev, struct in_addr group,
			   struct in_addr source)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);
	struct qps_verbs_mcast **pp, *m;
	int ret = 0;

	if (!IN_MULTICAST(ntohl(group.s_addr)))
		return -EINVAL;
	pthread_mutex_lock(&vd->lock);
	pp = find(vd, group, source);
	if (*pp) {
		(*pp)->refs++;
		goto out;
	}
	ret = -ENOMEM;
	m = calloc(1, sizeof(*m));
	if (!m)
		goto out;
	m->group = group;
	m->source = source;
	m->refs = 1;
	m->fd = -1;
	ret = 0;
	if (vd->ifindex) {
		ret = igmp_join(vd, m);
	} else if (!vd->mcast_warned) {
		/* Counted all the same, so detach pairs with attach. */
		vd->mcast_warned = true;
		qps_verbs_log("%s: no netdev behind GID 0: multicast groups "
			      "are not joined with IGMP (the switch must "
			      "flood them)", vd->info.name);
	}
	if (ret < 0) {
		free(m);
		goto out;
	}
	m->next = vd->mcast;
	vd->mcast = m;
out:
	pthread_mutex_unlock(&vd->lock);
	return ret;
}

static void leave(struct qps_verbs_mcast *m)
{
	if (m->fd >= 0)
		close(m->fd);	/* the kernel leaves: IGMP leave */
	free(m);
}

int qps_verbs_mcast_detach(struct qps_dev *dev, struct in_addr group,
			   struct in_addr source)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);
	struct qps_verbs_mcast **pp, *m;
	int ret = 0;

	pthread_mutex_lock(&vd->lock);
	pp = find(vd, group, source);
	m = *pp;
	if (!m) {
		ret = -ENOENT;
	} else if (--m->refs == 0) {
		*pp = m->next;
		leave(m);
	}
	pthread_mutex_unlock(&vd->lock);
	return ret;
}

void qps_verbs_mcast_close(struct qps_verbs_dev *vd)
{
	struct qps_verbs_mcast *m;

	while ((m = vd->mcast)) {
		vd->mcast = m->next;
		leave(m);
	}
}
