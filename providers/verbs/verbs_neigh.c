// SPDX-License-Identifier: MIT
/*
 * What the kernel knows about the port's netdev, used as the packet
 * provider uses it (common/nl_neigh.c): the next-hop MAC of a destination
 * from the route and neighbour tables, ARP triggered by the kernel when
 * there is no entry, -EHOSTUNREACH after $QPS_VERBS_RESOLVE_MS (3000)
 * without an answer; netlink events move route_gen.
 *
 * Multicast membership: the NIC sends no IGMP, so the kernel joins the
 * group on the netdev for us (common/igmp.c). The frames themselves reach
 * the QP through steering rules (raw packet) or ibv_attach_mcast (UD).
 *
 * Ports: a port with a netdev is the host's, so a bound endpoint's port is
 * held in the kernel too (common/host_port.c); without one (a device
 * this namespace cannot see) the core's table alone holds it.
 */
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include "host_port.h"
#include "igmp.h"
#include "verbs.h"

int qps_verbs_route_open(struct qps_verbs_dev *vd)
{
	int ret;

	if (!vd->ifindex)
		return 0;
	ret = qps_host_ns_open(&vd->ns);
	if (ret) {
		qps_verbs_log("%s: its network namespace: %s", vd->info.name,
			      qps_verbs_strerror(-ret));
		return ret;
	}
	vd->ns.ifindex = vd->ifindex;
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
	qps_host_ns_close(&vd->ns);
}

int qps_verbs_hold_port(struct qps_dev *dev, int fd, struct in_addr addr,
			uint16_t *port, unsigned int flags)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);

	if (!vd->ifindex)
		return -EOPNOTSUPP;
	return qps_host_port_hold(&vd->ns, fd, addr, port, flags);
}

static int verbs_resolve(struct qps_dev *dev, struct in_addr dst,
			 uint8_t mac_out[6], bool wait)
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
	return wait ? qps_nl_resolve(&vd->route, dst, mac_out) :
		      qps_nl_resolve_nowait(&vd->route, dst, mac_out);
}

int qps_verbs_resolve(struct qps_dev *dev, struct in_addr dst,
		      uint8_t mac_out[6])
{
	return verbs_resolve(dev, dst, mac_out, true);
}

int qps_verbs_resolve_nowait(struct qps_dev *dev, struct in_addr dst,
			     uint8_t mac_out[6])
{
	return verbs_resolve(dev, dst, mac_out, false);
}

uint64_t qps_verbs_route_gen(struct qps_dev *dev)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);

	/* Without a netdev nothing ever resolves, so nothing goes stale. */
	return vd->route_open ? qps_nl_route_gen(&vd->route) : 1;
}

static const struct qps_igmp_netdev *igmp_netdev(struct qps_verbs_dev *vd,
						 struct qps_igmp_netdev *nd)
{
	memset(nd, 0, sizeof(*nd));
	nd->list = &vd->mcast;
	nd->lock = &vd->lock;
	nd->ifindex = vd->ifindex;
	nd->ifname = vd->ifname;
	return nd;
}

int qps_verbs_mcast_attach(struct qps_dev *dev, struct in_addr group,
			   struct in_addr source)
{
	struct qps_verbs_dev *vd = qps_verbs_dev(dev);
	struct qps_igmp_netdev nd;
	int ret;

	ret = qps_igmp_attach(igmp_netdev(vd, &nd), group, source);
	/* Counted all the same, so detach pairs with attach. Relaxed: the
	 * flag only makes the warning once, it orders nothing. */
	if (ret == 1 && !vd->ifindex &&
	    !__atomic_exchange_n(&vd->mcast_warned, true, __ATOMIC_RELAXED))
		qps_verbs_log("%s: no netdev behind GID 0: multicast groups "
			      "are not joined with IGMP (the switch must "
			      "flood them)", vd->info.name);
	return ret < 0 ? ret : 0;
}

int qps_verbs_mcast_detach(struct qps_dev *dev, struct in_addr group,
			   struct in_addr source)
{
	struct qps_igmp_netdev nd;

	return qps_igmp_detach(igmp_netdev(qps_verbs_dev(dev), &nd), group,
			       source);
}

void qps_verbs_mcast_close(struct qps_verbs_dev *vd)
{
	struct qps_igmp_netdev nd;

	qps_igmp_close(igmp_netdev(vd, &nd));
}
