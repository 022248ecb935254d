// SPDX-License-Identifier: MIT
/*
 * The host's side of the interface, as packet has it: routes and
 * neighbours through libnl (common/nl_neigh.c; $QPS_XDP_RESOLVE_MS bounds
 * the wait for ARP), and multicast membership through a kernel UDP
 * socket's join (common/igmp.c), which also puts the group's MAC in the
 * NIC's filter, so no link-layer half is needed.
 */
#include "xdp.h"


int qps_xdp_route_open(struct qps_xdp_dev *dev)
{
	return qps_nl_route_open(&dev->route, dev->ifindex, dev->info.name,
				 "xdp", "QPS_XDP_RESOLVE_MS");
}

void qps_xdp_route_close(struct qps_xdp_dev *dev)
{
	qps_nl_route_close(&dev->route);
}

/* Lock-free, called on every send. */
uint64_t qps_xdp_route_gen(struct qps_dev *d)
{
	return qps_nl_route_gen(&qps_xdp_dev(d)->route);
}

int qps_xdp_resolve(struct qps_dev *d, struct in_addr dst, uint8_t mac_out[6])
{
	return qps_nl_resolve(&qps_xdp_dev(d)->route, dst, mac_out);
}

int qps_xdp_resolve_nowait(struct qps_dev *d, struct in_addr dst,
			   uint8_t mac_out[6])
{
	return qps_nl_resolve_nowait(&qps_xdp_dev(d)->route, dst, mac_out);
}

static const struct qps_igmp_netdev *igmp_netdev(struct qps_xdp_dev *dev,
						 struct qps_igmp_netdev *nd)
{
	qps_igmp_netdev_init(nd, &dev->mcast, &dev->lock, dev->ifindex,
			     dev->info.name);
	return nd;
}

int qps_xdp_mcast_attach(struct qps_dev *d, struct in_addr group,
			 struct in_addr source)
{
	struct qps_igmp_netdev nd;
	int ret;

	ret = qps_igmp_attach(igmp_netdev(qps_xdp_dev(d), &nd), group, source);
	return ret < 0 ? ret : 0;
}

int qps_xdp_mcast_detach(struct qps_dev *d, struct in_addr group,
			 struct in_addr source)
{
	struct qps_igmp_netdev nd;

	return qps_igmp_detach(igmp_netdev(qps_xdp_dev(d), &nd), group, source);
}

void qps_xdp_mcast_close(struct qps_xdp_dev *dev)
{
	struct qps_igmp_netdev nd;

	qps_igmp_close(igmp_netdev(dev, &nd));
}
