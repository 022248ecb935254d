// SPDX-License-Identifier: MIT
/*
 * Destination IPv4 -> next-hop MAC through the kernel's route and
 * neighbour tables on our interface: common/nl_neigh.c, shared with the
 * verbs provider. $QPS_PACKET_RESOLVE_MS bounds the wait for ARP.
 */
#include "packet.h"

int qps_packet_route_open(struct qps_packet_dev *dev)
{
	return qps_nl_route_open(&dev->route, dev->ifindex, dev->info.name,
				 "packet", "QPS_PACKET_RESOLVE_MS");
}

void qps_packet_route_close(struct qps_packet_dev *dev)
{
	qps_nl_route_close(&dev->route);
}

/* Lock-free, called on every send. */
uint64_t qps_packet_route_gen(struct qps_dev *d)
{
	return qps_nl_route_gen(&qps_packet_dev(d)->route);
}

int qps_packet_resolve(struct qps_dev *d, struct in_addr dst,
		       uint8_t mac_out[6])
{
	return qps_nl_resolve(&qps_packet_dev(d)->route, dst, mac_out);
}

int qps_packet_resolve_nowait(struct qps_dev *d, struct in_addr dst,
			      uint8_t mac_out[6])
{
	return qps_nl_resolve_nowait(&qps_packet_dev(d)->route, dst, mac_out);
}
