// SPDX-License-Identifier: MIT
/*
 * Multicast membership on the interface, two halves:
 *  - L2: PACKET_ADD_MEMBERSHIP of the group's MAC on the device's
 *    membership socket, which programs the NIC's MAC filter (veth has
 *    none and delivers every group anyway);
 *  - L3: a kernel UDP socket joins the group on this interface
 *    (IP_ADD_MEMBERSHIP, or IP_ADD_SOURCE_MEMBERSHIP for a source-specific
 *    join), so the kernel sends the IGMP reports and answers queries.
 *    The socket is never bound, so the kernel queues no datagram on it.
 *    One socket per membership: a socket holds at most
 *    net.ipv4.igmp_max_memberships (20) groups.
 * Joins are counted per (group, source); the last detach leaves.
 */
#include "packet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

static int igmp_join(struct qps_packet_dev *dev, struct qps_packet_mcast *m)
{
	int ret;

	m->udp_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (m->udp_fd < 0)
		return -errno;
	if (m->source.s_addr) {
		struct ip_mreq_source mr = {
			.imr_multiaddr = m->group,
			.imr_interface = dev->info.addr,
			.imr_sourceaddr = m->source,
		};

		ret = setsockopt(m->udp_fd, IPPROTO_IP,
				 IP_ADD_SOURCE_MEMBERSHIP, &mr, sizeof(mr));
	} else {
		struct ip_mreqn mr = {
			.imr_multiaddr = m->group,
			.imr_ifindex = dev->ifindex,
		};

		ret = setsockopt(m->udp_fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr,
				 sizeof(mr));
	}
	if (ret < 0) {
		ret = -errno;
		close(m->udp_fd);
		m->udp_fd = -1;
	}
	return ret;
}

static struct qps_packet_mcast **find(struct qps_packet_dev *dev,
				      struct in_addr group,
				      struct in_addr source)
{
	struct qps_packet_mcast **pp;

	for (pp = &dev->mcast; *pp; pp = &(*pp)->next)
		if ((*pp)->group.s_addr == group.s_addr &&
		    (*pp)->source.s_addr == source.s_addr)
			break;
	return pp;
}

int qps_packet_mcast_attach(struct qps_dev *d, struct in_addr group,
			    struct in_addr source)
{
	struct qps_packet_dev *dev = qps_packet_dev(d);
	struct qps_packet_mcast **pp, *m;
	uint8_t mac[6];
	int ret;

	if (!IN_MULTICAST(ntohl(group.s_addr)))
		return -EINVAL;
	pthread_mutex_lock(&dev->lock);
	pp = find(dev, group, source);
	if (*pp) {
		(*pp)->refs++;
		pthread_mutex_unlock(&dev->lock);
		return 0;
	}
	ret = -ENOMEM;
	m = calloc(1, sizeof(*m));
	if (!m)
		goto out;
	m->group = group;
	m->source = source;
	m->refs = 1;
	group_mac(group, mac);
	ret = qps_packet_mac_member(dev->mc_fd, dev->ifindex, mac, true);
	if (ret < 0) {
		free(m);
		goto out;
	}
	ret = igmp_join(dev, m);
	if (ret < 0) {
		qps_packet_mac_member(dev->mc_fd, dev->ifindex, mac, false);
		free(m);
		goto out;
	}
	m->next = dev->mcast;
	dev->mcast = m;
out:
	pthread_mutex_unlock(&dev->lock);
	return ret;
}

static void leave(struct qps_packet_dev *dev, struct qps_packet_mcast *m)
{
	uint8_t mac[6];

	close(m->udp_fd);	/* the kernel leaves the group: IGMP leave */
	group_mac(m->group, mac);
	qps_packet_mac_member(dev->mc_fd, dev->ifindex, mac, false);
	free(m);
}

int qps_packet_mcast_detach(struct qps_dev *d, struct in_addr group,
			    struct in_addr source)
{
	struct qps_packet_dev *dev = qps_packet_dev(d);
	struct qps_packet_mcast **pp, *m;

	pthread_mutex_lock(&dev->lock);
	pp = find(dev, group, source);
	m = *pp;
	if (!m) {
		pthread_mutex_unlock(&dev->lock);
		return -ENOENT;
	}
	if (--m->refs == 0) {
		*pp = m->next;
		leave(dev, m);
	}
	pthread_mutex_unlock(&dev->lock);
	return 0;
}

void qps_packet_mcast_close(struct qps_packet_dev *dev)
{
	struct qps_packet_mcast *m;

	while ((m = dev->mcast)) {
		dev->mcast = m->next;
		leave(dev, m);
	}
}
