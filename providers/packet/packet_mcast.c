// SPDX-License-Identifier: MIT
/*
 * Multicast membership on the interface, two halves:
 *  - L2: PACKET_ADD_MEMBERSHIP of the group's MAC on the device's
 *    membership socket, which programs the NIC's MAC filter (veth has
 *    none and delivers every group anyway);
 *  - L3: a kernel UDP socket joins the group on this interface, so the
 *    kernel sends the IGMP reports and answers queries (common/igmp.c).
 * Joins are counted per (group, source); the last detach leaves.
 */
#include "packet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <string.h>
#include <sys/socket.h>

int qps_packet_mac_member(int fd, int ifindex, const uint8_t mac[6], bool add)
{
	struct packet_mreq mr;

	memset(&mr, 0, sizeof(mr));
	mr.mr_ifindex = ifindex;
	mr.mr_type = PACKET_MR_MULTICAST;
	mr.mr_alen = 6;
	memcpy(mr.mr_address, mac, 6);
	if (setsockopt(fd, SOL_PACKET, add ? PACKET_ADD_MEMBERSHIP :
		       PACKET_DROP_MEMBERSHIP, &mr, sizeof(mr)) < 0)
		return -errno;
	return 0;
}

static void group_mac(struct in_addr group, uint8_t mac[6])
{
	uint32_t g = ntohl(group.s_addr);

	mac[0] = 0x01;
	mac[1] = 0x00;
	mac[2] = 0x5e;
	mac[3] = (uint8_t)((g >> 16) & 0x7f);
	mac[4] = (uint8_t)(g >> 8);
	mac[5] = (uint8_t)g;
}

/* The L2 half of a membership, run by common/igmp.c around the L3 join. */
static int link_member(void *arg, struct in_addr group, bool add)
{
	struct qps_packet_dev *dev = arg;
	uint8_t mac[6];

	group_mac(group, mac);
	return qps_packet_mac_member(dev->mc_fd, dev->ifindex, mac, add);
}

static const struct qps_igmp_netdev *igmp_netdev(struct qps_packet_dev *dev,
						 struct qps_igmp_netdev *nd)
{
	qps_igmp_netdev_init(nd, &dev->mcast, &dev->lock, dev->ifindex,
			     dev->info.name);
	nd->link = link_member;
	nd->arg = dev;
	return nd;
}

int qps_packet_mcast_attach(struct qps_dev *d, struct in_addr group,
			    struct in_addr source)
{
	struct qps_igmp_netdev nd;
	int ret;

	ret = qps_igmp_attach(igmp_netdev(qps_packet_dev(d), &nd), group,
			      source);
	return ret < 0 ? ret : 0;
}

int qps_packet_mcast_detach(struct qps_dev *d, struct in_addr group,
			    struct in_addr source)
{
	struct qps_igmp_netdev nd;

	return qps_igmp_detach(igmp_netdev(qps_packet_dev(d), &nd), group,
			       source);
}

void qps_packet_mcast_close(struct qps_packet_dev *dev)
{
	struct qps_igmp_netdev nd;

	qps_igmp_close(igmp_netdev(dev, &nd));
}
